"""Plugin discovery through the ``porpoise.tasks`` entry-point group, checked at start-up."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from importlib.metadata import entry_points
from typing import Any

from engine.tasks.base import ParamError, TaskPlugin

GROUP = "porpoise.tasks"

#: task types the master runs itself (issue: scheduling and control); not worker plugins
LOGIC_TYPES = frozenset({"SUB_PROCESS", "DEPENDENT", "CONDITIONS", "SWITCH"})


class PluginError(ValueError):
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
    plugin(task_type).validate(params)
