"""Plugin discovery through the ``porpoise.tasks`` entry-point group, checked at start-up."""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from importlib.metadata import entry_points
from typing import Any

import jsonschema

from core.errors import InvalidInput
from core.schema_problem import schema_problem
from engine.tasks.base import ParamError, TaskPlugin

GROUP = "porpoise.tasks"

#: task types the master runs itself (issue: scheduling and control); not worker plugins
LOGIC_TYPES = frozenset({"SUB_PROCESS", "DEPENDENT", "CONDITIONS", "SWITCH"})


class PluginError(InvalidInput):
    pass


@cache
def plugins() -> Mapping[str, type[TaskPlugin]]:
    """task type -> plugin class; duplicates and malformed plugins are refused."""
    found: dict[str, type[TaskPlugin]] = {}
    for ep in entry_points(group=GROUP):
        cls = ep.load()
        if not (isinstance(cls, type) and issubclass(cls, TaskPlugin)):
            raise PluginError(f"entry point {ep.name} = {ep.value} is not a TaskPlugin")
        if cls.task_type != ep.name:
            raise PluginError(f"entry point {ep.name} names a plugin of type {cls.task_type}")
        if ep.name in found:
            raise PluginError(f"task type {ep.name} is provided twice ({found[ep.name]} and {cls})")
        found[ep.name] = cls
    return found


def plugin(task_type: str) -> type[TaskPlugin]:
    try:
        return plugins()[task_type]
    except KeyError:
        known = ", ".join(sorted(plugins()))
        raise ParamError("task_type", f"unknown task type {task_type!r} (known: {known})") from None


def validate(task_type: str, params: Mapping[str, Any]) -> None:
    """Validate a task definition's params for its type; raises ParamError naming the field."""
    cls = plugin(task_type)
    cls.validate(params)
    check_schema(cls.params_schema, params)


@cache
def _validator(schema_json: str) -> jsonschema.protocols.Validator:
    return jsonschema.Draft202012Validator(json.loads(schema_json))


def check_schema(schema: Mapping[str, Any], params: Mapping[str, Any]) -> None:
    """ParamError for what ``schema`` (a task type's params_schema) refuses in ``params``: run after the
    type's own checks, whose messages come first; this catches what the form promises and they do not test."""
    problem = schema_problem(_validator(json.dumps(schema, sort_keys=True)), dict(params))
    if problem is not None:
        field, reason = problem
        raise ParamError(field if field != "(document)" else "task_params", reason)
