"""Plugin discovery and parameter validation (a bad definition is refused naming the field)."""

from __future__ import annotations

import pytest

from engine.tasks import registry
from engine.tasks.base import ParamError


def test_entry_points_provide_the_worker_plugins() -> None:
    assert set(registry.plugins()) == {"SHELL", "PYTHON", "SQL", "SPARK", "HTTP", "PROCEDURE", "MR"}
    assert not registry.LOGIC_TYPES & set(registry.plugins())


@pytest.mark.parametrize(
    ("task_type", "params", "field"),
    [
        ("SHELL", {}, "rawScript"),
        ("SHELL", {"rawScript": "   "}, "rawScript"),
        ("SHELL", {"rawScript": "x", "localParams": [{"prop": ""}]}, "localParams"),
        ("PYTHON", {"rawScript": 5}, "rawScript"),
        ("PYTHON", {"rawScript": "x", "interpreter": "a\nb"}, "interpreter"),
        ("SQL", {"sql": "select 1"}, "datasource"),
        ("SQL", {"datasource": "w"}, "sql"),
        ("SQL", {"datasource": "w", "sql": "x", "sqlType": "maybe"}, "sqlType"),
        ("SQL", {"datasource": "w", "sql": "x", "maxRows": -1}, "maxRows"),
        ("SQL", {"datasource": "w", "sql": "x", "preStatements": [1]}, "preStatements"),
        ("TELEPORT", {}, "task_type"),
    ],
)
def test_validation_names_the_field(task_type: str, params: dict, field: str) -> None:
    with pytest.raises(ParamError) as err:
        registry.validate(task_type, params)
    assert err.value.field == field


def test_valid_definitions_pass() -> None:
    registry.validate("SHELL", {"rawScript": "echo ${x}", "localParams": [{"prop": "x", "value": "1"}]})
    registry.validate("PYTHON", {"rawScript": "print(1)"})
    registry.validate("SQL", {"datasource": "w", "sql": "select 1", "sqlType": "non_query"})
    registry.validate("SPARK", {"programType": "SQL", "sql": "select 1"})
