"""The overview a person opens first: instances by state over the last day and week, what runs now, the
latest failures with the task that failed (its log one click away), and the cluster's health."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from engine.api import access
from engine.api.routing import Call, Route
from engine.states import WORKFLOW_FINISHED, TaskState, WorkflowState
from registry.heartbeat import ServerStatus

#: SQL lists of states (in the statements' text: see _counts)
_UNFINISHED = "(" + ", ".join(str(int(s)) for s in WorkflowState if s not in WORKFLOW_FINISHED) + ")"
_FAILED_TASK = f"({int(TaskState.FAILURE)}, {int(TaskState.KILL)}, {int(TaskState.NEED_FAULT_TOLERANCE)})"
RECENT = 10

_COUNTS = {"type": "object", "additionalProperties": {"type": "integer"}, "description": "state name -> instances"}
_BRIEF = {
    "type": "object",
    "required": ["id", "name", "state", "start_time", "end_time"],
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": "string"},
        "state": {"type": "string"},
        "start_time": {"type": ["string", "null"], "format": "date-time"},
        "end_time": {"type": ["string", "null"], "format": "date-time"},
        "failed_task": {
            "type": ["object", "null"],
            "required": ["id", "name"],
            "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
        },
    },
}
_OVERVIEW = {
    "type": "object",
    "required": ["last_day", "last_week", "running", "running_total", "failures", "cluster"],
    "properties": {
        "last_day": _COUNTS,
        "last_week": _COUNTS,
        "running": {"type": "array", "items": _BRIEF, "description": f"the newest {RECENT} unfinished instances"},
        "running_total": {"type": "integer"},
        "failures": {"type": "array", "items": _BRIEF, "description": f"the latest {RECENT} failed instances"},
        "cluster": {
            "type": "object",
            "required": ["registry", "masters", "workers", "unhealthy"],
            "properties": {
                "registry": {"type": "boolean", "description": "the registry (etcd) view is up"},
                "masters": {"type": "integer"},
                "workers": {"type": "integer"},
                "unhealthy": {"type": "array", "items": {"type": "string"}, "description": "nodes not NORMAL"},
            },
        },
    },
}


def _brief(row: Any, failed: bool = False) -> dict[str, Any]:
    out = {
        "id": row["id"],
        "name": row["name"],
        "state": WorkflowState(row["state"]).name,
        "start_time": row["start_time"],
        "end_time": row["end_time"],
    }
    if failed:
        out["failed_task"] = {"id": row["task_id"], "name": row["task_name"]} if row["task_id"] else None
    return out


async def _counts(db: Any, interval: dt.timedelta, scope: Callable[..., str], who: list[int]) -> dict[str, int]:
    # constants in the text, not parameters: a prepared statement's generic plan cannot see how short the
    # time range is (or which states) and scans the whole table once it holds a million instances
    rows = await db.fetch(
        f"SELECT state, count(*) AS n FROM workflow_instance WHERE start_time >= now() - interval"
        f" '{int(interval.total_seconds())} seconds'{scope(1)} GROUP BY state",
        *who,
    )
    return {WorkflowState(r["state"]).name: r["n"] for r in rows}


def _cluster(api: Any) -> dict[str, Any]:
    ready = api.membership.ready.is_set()
    masters = api.membership.masters() if ready else []
    workers = api.membership.workers() if ready else []
    unhealthy = [n.address for n in [*masters, *workers] if n.heartbeat.status != ServerStatus.NORMAL]
    return {"registry": ready, "masters": len(masters), "workers": len(workers), "unhealthy": unhealthy}


def _scope(call: Call) -> tuple[Callable[..., str], list[int]]:
    """A condition on a project-code column for the caller's visible projects (none for admins), given
    the user's parameter number, and the parameter."""
    who = access.principal_of(call)
    if who.is_admin:
        return lambda n, column="project_code": "", []
    return lambda n, column="project_code": f" AND {column} IN " + access.visible_projects_sql(n), [who.user_id]


async def get_overview(api: Any, call: Call) -> dict[str, Any]:
    db = api.db
    scope, who = _scope(call)
    running = await db.fetch(
        f"SELECT id, name, state, start_time, end_time FROM workflow_instance WHERE state IN {_UNFINISHED}"
        f"{scope(1)} ORDER BY id DESC LIMIT {RECENT}",
        *who,
    )
    running_total = await db.fetchval(
        f"SELECT count(*) FROM workflow_instance WHERE state IN {_UNFINISHED}{scope(1)}",
        *who,
    )
    failures = await db.fetch(
        "SELECT w.id, w.name, w.state, w.start_time, w.end_time, f.id AS task_id, f.name AS task_name"
        " FROM workflow_instance w LEFT JOIN LATERAL (SELECT id, name FROM task_instance"
        f" WHERE workflow_instance_id = w.id AND flag = 1 AND state IN {_FAILED_TASK}"
        " ORDER BY end_time DESC NULLS LAST, id DESC LIMIT 1) f ON true"
        f" WHERE w.state = {int(WorkflowState.FAILURE)}{scope(1, 'w.project_code')}"
        f" ORDER BY w.id DESC LIMIT {RECENT}",
        *who,
    )
    return {
        "last_day": await _counts(db, dt.timedelta(days=1), scope, who),
        "last_week": await _counts(db, dt.timedelta(days=7), scope, who),
        "running": [_brief(r) for r in running],
        "running_total": running_total,
        "failures": [_brief(r, failed=True) for r in failures],
        "cluster": _cluster(api),
    }


ROUTES = [
    Route("GET", "/api/v1/overview", get_overview,
          "Instances by state over the last day and week, what runs now, recent failures, cluster health",
          "overview", response=_OVERVIEW, rule=access.SIGNED_IN),
]  # fmt: skip
