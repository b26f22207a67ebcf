"""Why isn't it running? ``GET /api/v1/instances/{id}/waiting`` asks the instance's owning master
(``workflow.waiting``) why each of its tasks that is not running yet waits: no live worker in its group,
every worker full or overloaded, its place in a task group's queue, a retry timer, a delay, a check by the
master. A run waiting for its place (SERIAL_WAIT) has no owner: what its workflow's runs are is read here,
from the rows the claiming master decided on, with the reason it recorded. A master that does not answer
gives "reason unknown", never an error: the page asks again while anything waits.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from sqlalchemy import select

from engine.api import access
from engine.api.routing import Call, Route, one
from engine.concurrency.serial_sql import ACTIVE
from engine.states import WorkflowState
from engine.storage import tables as t
from rpc.errors import RpcError
from rpc.messages import TaskWait, WaitingReasons

wi = t.workflow_instance

#: seconds the API waits for the owning master's answer
ASK_TIMEOUT = 3.0

_WORKER = {
    "type": "object",
    "required": ["address", "state"],
    "properties": {
        "address": {"type": "string"},
        "state": {"enum": ["full", "overloaded", "draining"]},
        "detail": {"type": "string", "description": "the worker's own words: its last refusal or heartbeat reason"},
        "running": {"type": "integer"},
        "slots": {"type": "integer"},
    },
}
_KINDS = ["no_worker", "workers_busy", "task_group", "retry", "delay", "dispatching", "dispatched", "logic",
          "preparing"]  # fmt: skip
_TASK = {
    "type": "object",
    "required": ["task_instance_id", "task_code", "task_name", "kind"],
    "properties": {
        "task_instance_id": {"type": "integer"},
        "task_code": {"type": "integer"},
        "task_name": {"type": "string"},
        "kind": {"enum": _KINDS},
        "worker_group": {"type": "string"},
        "workers": {"type": "array", "items": _WORKER},
        "task_group": {"type": "string"},
        "position": {"type": "integer", "description": "place in the task group's queue (1 = next)"},
        "queued": {"type": "integer", "description": "attempts waiting in the task group's queue"},
        "used": {"type": "integer", "description": "slots of the task group taken"},
        "size": {"type": "integer", "description": "slots of the task group"},
        "retry": {"type": "integer"},
        "retries": {"type": "integer"},
        "at": {"type": ["string", "null"], "format": "date-time", "description": "when a retry or delay is due"},
        "host": {"type": "string"},
        "task_type": {"type": "string"},
    },
}
_RUN = {"type": "object", "required": ["id", "name", "state"],
        "properties": {"id": {"type": "integer"}, "name": {"type": "string"}, "state": {"type": "string"}}}  # fmt: skip
_ANSWER = {
    "type": "object",
    "required": ["id", "state", "host", "unknown", "unknown_kind", "serial_wait", "tasks"],
    "properties": {
        "id": {"type": "integer"},
        "state": {"type": "string", "description": "the run's state (as its master holds it when it answered)"},
        "host": {"type": ["string", "null"], "description": "the owning master"},
        "unknown": {"type": ["string", "null"], "description": "why the reasons are not known (master silent)"},
        "unknown_kind": {
            "enum": ["silent", "not_owner", "no_owner", None],
            "description": "silent: the owning master did not answer in time; not_owner: it does not drive the"
            " instance now (failing over); no_owner: no master has taken it yet",
        },
        "serial_wait": {
            "type": ["object", "null"],
            "description": "a run waiting for its place (SERIAL_WAIT): the runs it waits behind",
            "required": ["reason", "behind", "position", "waiting"],
            "properties": {
                "reason": {"type": "string", "description": "as the claiming master recorded it"},
                "behind": {"type": "array", "items": _RUN},
                "position": {"type": "integer", "description": "place among the workflow's waiting runs (1 = next)"},
                "waiting": {"type": "integer"},
            },
        },
        "tasks": {"type": "array", "items": _TASK},
    },
}


def _iso(ms: int) -> str | None:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat() if ms else None


def _task(w: TaskWait, names: dict[int, str]) -> dict[str, Any]:
    out = {f.name: getattr(w, f.name) for f in dataclasses.fields(w) if f.name != "at_ms"}
    out["workers"] = [dataclasses.asdict(x) for x in w.workers]
    out["at"] = _iso(w.at_ms)
    out["task_name"] = names.get(w.task_code, str(w.task_code))
    return out


async def _serial_wait(api: Any, row: Any) -> dict[str, Any]:
    """The runs a SERIAL_WAIT instance waits behind (the active runs of its workflow), with the reason the
    claiming master recorded and its place among the waiting runs."""
    history = row["state_history"] or []
    reason = next((h.get("desc", "") for h in reversed(history) if h.get("state") == "SERIAL_WAIT"), "")
    runs = await api.db.fetch(
        "SELECT id, name, state FROM workflow_instance WHERE workflow_definition_code = $1 AND id <> $2"
        " AND (state = ANY($3::smallint[]) OR state = $4) ORDER BY id",
        row["workflow_definition_code"],
        row["id"],
        ACTIVE,
        int(WorkflowState.SERIAL_WAIT),
    )
    behind = [{"id": r["id"], "name": r["name"], "state": WorkflowState(r["state"]).name}
              for r in runs if r["state"] != WorkflowState.SERIAL_WAIT]  # fmt: skip
    waiting = [r["id"] for r in runs if r["state"] == WorkflowState.SERIAL_WAIT]
    ahead = sum(1 for i in waiting if i < row["id"])
    return {"reason": reason, "behind": behind, "position": ahead + 1, "waiting": len(waiting) + 1}


async def get_waiting(api: Any, call: Call) -> dict[str, Any]:
    instance_id = call.path_int("id")
    cols = (wi.c.id, wi.c.name, wi.c.state, wi.c.host, wi.c.workflow_definition_code, wi.c.state_history)
    row = await one(api.db, select(*cols).where(wi.c.id == instance_id), f"workflow instance {instance_id}")
    state = WorkflowState(row["state"])
    out: dict[str, Any] = {"id": row["id"], "state": state.name, "host": row["host"] or None, "unknown": None,
                           "unknown_kind": None, "serial_wait": None, "tasks": []}  # fmt: skip
    if state is WorkflowState.SERIAL_WAIT:
        out["serial_wait"] = await _serial_wait(api, row)
        return out
    if state.finished or state in (WorkflowState.PAUSE, WorkflowState.STOP):
        return out
    if not row["host"]:
        out["unknown"], out["unknown_kind"] = "reason unknown: no master owns this instance yet", "no_owner"
        return out
    try:
        reply = await api.rpc.call(row["host"], WaitingReasons(row["id"]), timeout=ASK_TIMEOUT)
    except RpcError:
        out["unknown"], out["unknown_kind"] = f"reason unknown: master {row['host']} did not answer", "silent"
        return out
    if not reply.owned:
        out["unknown"] = f"reason unknown: master {row['host']} does not drive this instance now (failing over?)"
        out["unknown_kind"] = "not_owner"
        return out
    names = {
        r["task_code"]: r["name"]
        for r in await api.db.fetch(
            "SELECT DISTINCT ON (task_code) task_code, name FROM task_instance WHERE workflow_instance_id = $1"
            " ORDER BY task_code, id DESC",
            row["id"],
        )
    }
    out["state"] = reply.state or state.name
    out["tasks"] = [_task(w, names) for w in reply.tasks]
    return out


ROUTES = [
    Route("GET", "/api/v1/instances/{id}/waiting", get_waiting,
          "Why isn't it running? The owning master's reason for each task of the instance not running yet",
          "instances", response=_ANSWER, rule=access.read("instance", "path.id")),
]  # fmt: skip
