"""Task groups (DolphinScheduler's task groups, Airflow's pools): create, list, resize live, delete;
a group's queue with positions; force-start of a waiting task. Changing groups and force-starting
need an admin user; anyone may read.

Admission itself is the masters' (engine/concurrency/task_groups_sql.py); a resize or a force start here
runs the same admission under the group's row lock and notifies the masters on commit.
"""

from __future__ import annotations

import json
from typing import Any

from engine.api import access
from engine.api.routing import PAGE, ApiError, Call, Route, not_found, page
from engine.concurrency import task_groups_sql
from engine.workflows.definitions import ensure_project

ADMIN_USER = 0
_SIZE = {"type": "integer", "minimum": 0, "maximum": 1_000_000}
_CREATE = {
    "type": "object",
    "required": ["name", "size"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 255},
        "size": {**_SIZE, "description": "slots its tasks may hold at once"},
        "project": {"type": "string", "minLength": 1, "maxLength": 255, "description": "only this project's tasks"},
        "description": {"type": "string"},
    },
}
_UPDATE = {
    "type": "object",
    "additionalProperties": False,
    "minProperties": 1,
    "properties": {"size": _SIZE, "description": {"type": "string"}},
}
_GROUP = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": "string"},
        "project": {"type": ["string", "null"]},
        "size": {"type": "integer"},
        "used": {"type": "integer", "description": "slots held now (may exceed size after a force start)"},
        "waiting": {"type": "integer", "description": "tasks waiting in its queue"},
        "description": {"type": ["string", "null"]},
    },
}
_ENTRY = {
    "type": "object",
    "properties": {
        "task_instance_id": {"type": ["integer", "null"], "description": "null: a project you may not see"},
        "workflow_instance_id": {"type": ["integer", "null"], "description": "null: a project you may not see"},
        "task": {"type": ["string", "null"], "description": "null: a project you may not see"},
        "status": {"enum": ["WAITING", "HOLDING"]},
        "position": {"type": ["integer", "null"], "description": "1 = next to be admitted; null when holding"},
        "priority": {"type": "integer"},
        "slots": {"type": "integer"},
        "forced": {"type": "boolean"},
    },
}

_GROUPS = (
    "SELECT g.id, g.name, p.name AS project, g.group_size, g.description,"
    " coalesce((SELECT sum(q.slots) FROM task_group_queue q WHERE q.task_group_id = g.id AND q.status = 1), 0)"
    " AS used, (SELECT count(*) FROM task_group_queue q WHERE q.task_group_id = g.id AND q.status = 0) AS waiting"
    " FROM task_group g LEFT JOIN project p ON p.code = g.project_code"
)
#: a group's queue with each waiting row's position (1 = next)
QUEUE = (
    "SELECT q.task_instance_id, q.workflow_instance_id, q.status, q.priority, q.slots, q.forced, t.name AS task,"
    " g.name AS task_group, CASE WHEN q.status = 0 THEN row_number() OVER (PARTITION BY q.task_group_id, q.status"
    " ORDER BY q.priority DESC, q.id) END AS position FROM task_group_queue q"
    " JOIN task_group g ON g.id = q.task_group_id LEFT JOIN task_instance t ON t.id = q.task_instance_id"
)


def _group(row: Any) -> dict[str, Any]:
    return {"id": row["id"], "name": row["name"], "project": row["project"], "size": row["group_size"],
            "used": int(row["used"]), "waiting": int(row["waiting"]), "description": row["description"]}  # fmt: skip


def entry(row: Any) -> dict[str, Any]:
    return {
        "task_instance_id": row["task_instance_id"],
        "workflow_instance_id": row["workflow_instance_id"],
        "task": row["task"],
        "task_group": row["task_group"],
        "status": "WAITING" if row["status"] == task_groups_sql.WAITING else "HOLDING",
        "position": row["position"],
        "priority": row["priority"],
        "slots": row["slots"],
        "forced": bool(row["forced"]),
    }


async def _admin(api: Any, call: Call, what: str) -> None:
    kind = await api.db.fetchval("SELECT user_type FROM users WHERE id = $1", call.user_id)
    if kind != ADMIN_USER:
        raise ApiError(403, f"{what} needs an admin user")


async def _get(api: Any, group_id: int) -> dict[str, Any]:
    row = await api.db.fetchrow(_GROUPS + " WHERE g.id = $1", group_id)
    if row is None:
        raise not_found(f"task group {group_id}")
    return _group(row)


async def list_groups(api: Any, call: Call) -> dict[str, Any]:
    total = await api.db.fetchval("SELECT count(*) FROM task_group")
    rows = await api.db.fetch(_GROUPS + " ORDER BY g.name LIMIT $1 OFFSET $2", call.query["size"], call.offset)
    return page([_group(r) for r in rows], total, call)


async def get_group(api: Any, call: Call) -> dict[str, Any]:
    return await _get(api, call.path_int("id"))


async def create_group(api: Any, call: Call) -> dict[str, Any]:
    await _admin(api, call, "creating a task group")
    body = call.body
    async with api.db.acquire() as conn, conn.transaction():
        project = await ensure_project(conn, body["project"]) if body.get("project") else None
        group_id = await conn.fetchval(
            "INSERT INTO task_group (name, project_code, group_size, description, user_id)"
            " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (name) DO NOTHING RETURNING id",
            body["name"],
            project,
            body["size"],
            body.get("description"),
            call.user_id,
        )
    if group_id is None:
        raise ApiError(409, f"a task group named {body['name']!r} exists", "name")
    return await _get(api, int(group_id))


async def update_group(api: Any, call: Call) -> dict[str, Any]:
    """Resize live: a larger group admits waiting tasks at once; a smaller one lets holders finish and
    admits nothing until the use is below the new size."""
    await _admin(api, call, "changing a task group")
    group_id = call.path_int("id")
    async with api.db.acquire() as conn, conn.transaction():
        found = await conn.fetchval(
            "UPDATE task_group SET group_size = coalesce($2, group_size), description = coalesce($3, description),"
            " update_time = now() WHERE id = $1 RETURNING id",
            group_id,
            call.body.get("size"),
            call.body.get("description"),
        )
        if found is None:
            raise not_found(f"task group {group_id}")
        await task_groups_sql.admit(conn, group_id)
    return await _get(api, group_id)


async def delete_group(api: Any, call: Call) -> dict[str, Any]:
    await _admin(api, call, "deleting a task group")
    group_id = call.path_int("id")
    async with api.db.acquire() as conn, conn.transaction():
        if await conn.fetchval("SELECT 1 FROM task_group WHERE id = $1 FOR UPDATE", group_id) is None:
            raise not_found(f"task group {group_id}")
        if await conn.fetchval("SELECT 1 FROM task_group_queue WHERE task_group_id = $1 LIMIT 1", group_id):
            raise ApiError(409, f"task group {group_id} has tasks waiting or running")
        if await conn.fetchval("SELECT 1 FROM task_definition WHERE task_group_id = $1 LIMIT 1", group_id):
            raise ApiError(409, f"task group {group_id} is named by tasks of current workflow versions")
        await conn.execute("DELETE FROM task_group WHERE id = $1", group_id)
    return {"deleted": group_id}


async def group_queue(api: Any, call: Call) -> dict[str, Any]:
    group_id = call.path_int("id")
    await _get(api, group_id)
    total = await api.db.fetchval("SELECT count(*) FROM task_group_queue WHERE task_group_id = $1", group_id)
    rows = await api.db.fetch(
        QUEUE + " WHERE q.task_group_id = $1 ORDER BY q.status DESC, q.priority DESC, q.id LIMIT $2 OFFSET $3",
        group_id,
        call.query["size"],
        call.offset,
    )
    who = access.principal_of(call)
    visible: set[int] | None = None
    if not who.is_admin:  # another project's tasks: their place in the queue, not what they are
        ids = sorted({int(r["workflow_instance_id"]) for r in rows if r["workflow_instance_id"] is not None})
        found = await api.db.fetch(
            f"SELECT id FROM workflow_instance WHERE id = ANY($1) AND project_code IN {access.visible_projects_sql(2)}",
            ids,
            who.user_id,
        )
        visible = {int(r["id"]) for r in found}
    items = []
    for r in rows:
        item = entry(r)
        if visible is not None and r["workflow_instance_id"] not in visible:
            item.update(task=None, task_instance_id=None, workflow_instance_id=None)
        items.append(item)
    return page(items, total, call)


async def force_start(api: Any, call: Call) -> dict[str, Any]:
    """Admit a waiting task now, beyond its group's size (DolphinScheduler's force start)."""
    tid = call.path_int("task_instance_id")
    async with api.db.acquire() as conn, conn.transaction():
        group_id = await conn.fetchval("SELECT task_group_id FROM task_group_queue WHERE task_instance_id = $1", tid)
        if group_id is None:
            raise not_found(f"a task group queue entry for task instance {tid}")
        await conn.execute("SELECT 1 FROM task_group WHERE id = $1 FOR NO KEY UPDATE", group_id)
        row = await conn.fetchrow(
            "UPDATE task_group_queue SET status = $2, forced = 1, admit_time = now()"
            " WHERE task_instance_id = $1 AND status = $3 RETURNING workflow_instance_id, task_instance_id",
            tid,
            task_groups_sql.HOLDING,
            task_groups_sql.WAITING,
        )
        if row is None:
            raise ApiError(409, f"task instance {tid} is not waiting for its task group")
        payload = json.dumps([[row["workflow_instance_id"], row["task_instance_id"]]])
        await conn.execute("SELECT pg_notify($1, $2)", task_groups_sql.CHANNEL, payload)
    return {"task_instance_id": tid, "forced": True}


_BY_ID = "/api/v1/task-groups/{id}"
ROUTES = [
    Route("GET", "/api/v1/task-groups", list_groups, "Task groups with their use and queue length", "task-groups",
          query=PAGE, response=_GROUP, rule=access.SIGNED_IN),
    Route("POST", "/api/v1/task-groups", create_group, "Create a task group (admin)", "task-groups",
          body=_CREATE, response=_GROUP, rule=access.ADMIN),
    Route("GET", _BY_ID, get_group, "One task group", "task-groups", response=_GROUP, rule=access.SIGNED_IN),
    Route("PATCH", _BY_ID, update_group, "Resize a task group live or change its description (admin)",
          "task-groups", body=_UPDATE, response=_GROUP, rule=access.ADMIN),
    Route("DELETE", _BY_ID, delete_group, "Delete an unused task group (admin)", "task-groups",
          response={"type": "object", "properties": {"deleted": {"type": "integer"}}}, rule=access.ADMIN),
    Route("GET", _BY_ID + "/queue", group_queue, "Tasks holding and waiting, with positions", "task-groups",
          query=PAGE, response=_ENTRY, rule=access.SIGNED_IN),
    Route("POST", "/api/v1/task-groups/queue/{task_instance_id}/force-start", force_start,
          "Admit a waiting task now, beyond the group's size (admin)", "task-groups",
          response={"type": "object", "properties": {"task_instance_id": {"type": "integer"},
                                                      "forced": {"type": "boolean"}}},
          rule=access.ADMIN),
]  # fmt: skip
