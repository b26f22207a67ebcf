"""The task types a workflow may use and the JSON Schema of each one's parameters: the worker plugins'
``params_schema`` and the master's logic tasks' (engine/workflows/logic.py SCHEMAS). The UI draws a task's
form from them; the same schemas are checked when a workflow is saved (tests/test_task_param_schemas.py
pins them to the validation code)."""

from __future__ import annotations

import sys
from typing import Any

from engine.api import access
from engine.api.routing import Call, Route
from engine.tasks import registry
from engine.workflows import logic

_TYPE = {
    "type": "object",
    "required": ["type", "runs_on", "summary", "params"],
    "properties": {
        "type": {"type": "string"},
        "runs_on": {"enum": ["worker", "master"], "description": "a worker plugin, or a logic task of the master"},
        "summary": {"type": "string"},
        "params": {"type": "object", "description": "JSON Schema of the task's params; examples[0] = a new task's"},
    },
}


def _summary(doc: str | None) -> str:
    return (doc or "").strip().split("\n", 1)[0]


def catalogue() -> list[dict[str, Any]]:
    items = [
        {"type": name, "runs_on": "worker", "summary": _summary(sys.modules[cls.__module__].__doc__),
         "params": cls.params_schema}
        for name, cls in sorted(registry.plugins().items())
    ]  # fmt: skip
    items += [
        {"type": name, "runs_on": "master", "summary": _LOGIC_SUMMARY[name], "params": schema}
        for name, schema in sorted(logic.SCHEMAS.items())
    ]
    return items


_LOGIC_SUMMARY = {
    logic.SUB_PROCESS: "SUB_PROCESS: runs another workflow as a child instance.",
    logic.DEPENDENT: "DEPENDENT: waits for other workflows' runs over date cycles.",
    logic.CONDITIONS: "CONDITIONS: picks the success or failure branch from upstream outcomes.",
    logic.SWITCH: "SWITCH: the first case whose condition holds picks the branch.",
}


async def list_task_types(api: Any, call: Call) -> dict[str, Any]:
    return {"items": catalogue()}


ROUTES = [
    Route("GET", "/api/v1/task-types", list_task_types, "Task types and their parameter schemas", "workflows",
          response={"type": "object", "required": ["items"], "properties": {"items": {"type": "array",
                    "items": _TYPE}}}, rule=access.SIGNED_IN),
]  # fmt: skip
