"""The parameter schemas the UI draws its task forms from (GET /api/v1/task-types) cannot drift from the
server's validation: every parameter a type's validation reads is declared in its schema, every example of a
schema (the UI's template for a new task) passes validation, and every declared type is enforced (a value of
another type is refused naming that field)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import jsonschema
import pytest

from engine.tasks import registry
from engine.tasks.base import ParamError
from engine.workflows import logic

#: upstream and downstream task names the logic examples refer to
UPSTREAM = {"up"}
DOWNSTREAM = {"ok", "ko"}

TYPES = sorted([*registry.plugins(), *logic.SCHEMAS])


def schema_of(task_type: str) -> dict[str, Any]:
    return logic.SCHEMAS[task_type] if task_type in logic.SCHEMAS else registry.plugin(task_type).params_schema


def validate(task_type: str, params: Mapping[str, Any]) -> None:
    if task_type in logic.SCHEMAS:
        logic.validate(task_type, params, UPSTREAM, DOWNSTREAM)
    else:
        registry.validate(task_type, params)


class Reading(Mapping[str, Any]):
    """A params mapping that records the keys validation looks at."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.data = dict(data)
        self.read: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return self.data[key]

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return self.data.get(key, default)

    def __contains__(self, key: object) -> bool:
        self.read.add(str(key))
        return key in self.data

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def __len__(self) -> int:
        return len(self.data)


def test_every_task_type_has_a_schema_with_examples() -> None:
    assert {"SHELL", "PYTHON", "SQL", "SPARK", "HTTP", *registry.LOGIC_TYPES} <= set(TYPES)
    for task_type in TYPES:
        schema = schema_of(task_type)
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["examples"], task_type
        assert "localParams" in schema["properties"]


@pytest.mark.parametrize("task_type", TYPES)
def test_validation_reads_only_declared_parameters(task_type: str) -> None:
    schema = schema_of(task_type)
    declared = set(schema["properties"])
    for example in schema["examples"]:
        params = Reading(example)
        validate(task_type, params)  # every example is a valid task of the type
        assert params.read - {"task_params"} <= declared, f"{task_type} reads undeclared {params.read - declared}"


@pytest.mark.parametrize("task_type", TYPES)
def test_each_declared_type_is_enforced_at_its_field(task_type: str) -> None:
    schema = schema_of(task_type)
    candidates: list[Any] = [{"an": "object"}, 12345, "some text", ["a", 1], True]
    for name, prop in schema["properties"].items():
        if not ("type" in prop or "enum" in prop):
            continue
        checker = jsonschema.Draft202012Validator(prop)
        wrong = next(c for c in candidates if not checker.is_valid(c))
        # an example that sets the field, where one does (items and groups of DEPENDENT exclude each other)
        example = next((e for e in schema["examples"] if name in e), schema["examples"][0])
        with pytest.raises(ParamError) as refused:
            validate(task_type, {**example, name: wrong})
        assert refused.value.field.split(".")[0].split("[")[0] == name, (task_type, name, refused.value)


def test_the_schema_check_refuses_what_the_plugin_did_not_test() -> None:
    # SHELL's own check reads only rawScript; a localParams entry without its name is the schema's catch
    with pytest.raises(ParamError) as refused:
        registry.validate("SHELL", {"rawScript": "echo", "localParams": [{"value": 1}]})
    assert refused.value.field.startswith("localParams")
    with pytest.raises(ParamError) as refused:
        registry.validate("SQL", {"datasource": "d", "sql": "select 1", "loadFiles": ["a.csv"]})
    assert refused.value.field.startswith("loadFiles[0]")
