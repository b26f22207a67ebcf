"""Environments (DolphinScheduler's "environment"): a named block of shell lines (``export JAVA_HOME=...``,
``export SPARK_HOME=...``, ``export PYTHONPATH=...``) that a task's script runs before its own, bound to
worker groups.

Admins create, edit and delete them and grant them to users or projects (``POST /api/v1/grants
{"resource_type": "environment", ...}``) as data sources. A workflow names one for all of its tasks
(``environment: spark3``) or a task for itself (the task's wins); that is checked when the workflow is saved:
a name that does not exist or is not granted to the caller or to the workflow's project is a 400 naming the
field (the same answer either way; admins may name any). The master copies the environment's config into
each dispatch (engine/master/store.py ``environment_config``), and the worker's SHELL, PYTHON, SPARK and MR
plugins put it at the head of the task's script, run as the tenant: the exports change the task's own
environment only, which the worker still builds from its allow-list (engine/worker/taskenv.py). An edit
reaches the next task dispatched. Delete is refused while a task definition names the environment.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

import asyncpg

from engine.api import access
from engine.api.routing import PAGE, ApiError, Call, Route, not_found, page
from engine.workflows.definitions import next_code
from engine.workflows.model import WorkflowDef

#: a name a document can hold: letters, digits, ``_ . -``
NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"
#: bytes of shell lines at most
MAX_CONFIG = 65536

_GROUPS = {
    "type": "array",
    "items": {"type": "string", "minLength": 1, "maxLength": 64},
    "maxItems": 100,
    "uniqueItems": True,
    "description": "worker groups it is meant for",
}
_CREATE = {
    "type": "object",
    "required": ["name", "config"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "pattern": NAME_PATTERN},
        "config": {"type": "string", "minLength": 1, "maxLength": MAX_CONFIG, "description": "shell lines"},
        "description": {"type": "string", "maxLength": 1000},
        "worker_groups": _GROUPS,
    },
}
_CHANGE = {
    "type": "object",
    "additionalProperties": False,
    "minProperties": 1,
    "properties": {
        "config": {"type": "string", "minLength": 1, "maxLength": MAX_CONFIG},
        "description": {"type": "string", "maxLength": 1000},
        "worker_groups": _GROUPS,
    },
}
_ENVIRONMENT = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "code": {"type": "integer"},
        "config": {"type": "string"},
        "description": {"type": ["string", "null"]},
        "worker_groups": {"type": "array", "items": {"type": "string"}},
        "projects": {"type": "array", "items": {"type": "string"}, "description": "projects it is granted to"},
    },
}
_COLS = (
    "e.id, e.code, e.name, e.config, e.description,"
    " (SELECT array_agg(r.worker_group ORDER BY r.worker_group) FROM environment_worker_group_relation r"
    " WHERE r.environment_code = e.code) AS worker_groups,"
    " (SELECT array_agg(p.name ORDER BY p.name) FROM resource_grant g JOIN project p ON p.code = g.project_code"
    " WHERE g.resource_type = 'environment' AND g.resource_id = e.id) AS projects"
)


def _out(row: Any) -> dict[str, Any]:
    return {
        "name": row["name"],
        "code": row["code"],
        "config": row["config"] or "",
        "description": row["description"],
        "worker_groups": list(row["worker_groups"] or []),
        "projects": list(row["projects"] or []),
    }


async def _one(db: asyncpg.Pool | asyncpg.Connection, name: str) -> Any:
    row = await db.fetchrow(f"SELECT {_COLS} FROM environment e WHERE e.name = $1", name)
    if row is None:
        raise not_found(f"environment {name!r}")
    return row


async def list_environments(api: Any, call: Call) -> dict[str, Any]:
    """Admins see every environment; a user those granted to them or to the projects they see."""
    who = access.principal_of(call)
    visible = f"WHERE e.id IN {access.visible_granted_sql('environment', 1)}"
    cond, args = ("", []) if who.is_admin else (visible, [who.user_id])
    total = await api.db.fetchval(f"SELECT count(*) FROM environment e {cond}", *args)
    rows = await api.db.fetch(
        f"SELECT {_COLS} FROM environment e {cond} ORDER BY e.name LIMIT {int(call.query['size'])}"
        f" OFFSET {call.offset}",
        *args,
    )
    return page([_out(r) for r in rows], total, call)


async def get_environment(api: Any, call: Call) -> dict[str, Any]:
    row = await _one(api.db, call.path["name"])
    who = access.principal_of(call)
    if not who.is_admin and not await api.db.fetchval(
        f"SELECT $2::bigint IN {access.visible_granted_sql('environment', 1)}", who.user_id, row["id"]
    ):
        raise not_found(f"environment {call.path['name']!r}")
    return _out(row)


async def _set_groups(conn: asyncpg.Connection, code: int, groups: list[str], user_id: int | None) -> None:
    await conn.execute("DELETE FROM environment_worker_group_relation WHERE environment_code = $1", code)
    await conn.executemany(
        "INSERT INTO environment_worker_group_relation (environment_code, worker_group, operator) VALUES ($1, $2, $3)",
        [(code, g, user_id) for g in groups],
    )


async def create_environment(api: Any, call: Call) -> dict[str, Any]:
    body = call.body
    async with api.db.acquire() as conn, conn.transaction():
        code = await conn.fetchval(
            "INSERT INTO environment (code, name, config, description, operator) VALUES ($1, $2, $3, $4, $5)"
            " ON CONFLICT (name) DO NOTHING RETURNING code",
            await next_code(conn),
            body["name"],
            body["config"],
            body.get("description"),
            call.user_id,
        )
        if code is None:
            raise ApiError(409, f"environment {body['name']!r} exists already", "name")
        await _set_groups(conn, code, body.get("worker_groups", []), call.user_id)
        return _out(await _one(conn, body["name"]))


async def change_environment(api: Any, call: Call) -> dict[str, Any]:
    body = call.body
    async with api.db.acquire() as conn, conn.transaction():
        row = await _one(conn, call.path["name"])
        for column in ("config", "description"):
            if column in body:
                await conn.execute(
                    f"UPDATE environment SET {column} = $2, operator = $3, update_time = now() WHERE code = $1",
                    row["code"],
                    body[column],
                    call.user_id,
                )
        if "worker_groups" in body:
            await _set_groups(conn, row["code"], body["worker_groups"], call.user_id)
        return _out(await _one(conn, call.path["name"]))


async def delete_environment(api: Any, call: Call) -> dict[str, Any]:
    """Refused while a task definition names the environment; its grants go with it."""
    name = call.path["name"]
    async with api.db.acquire() as conn, conn.transaction():
        row = await conn.fetchrow("SELECT id, code FROM environment WHERE name = $1 FOR UPDATE", name)
        if row is None:
            raise not_found(f"environment {name!r}")
        users = await conn.fetch(
            "SELECT DISTINCT p.name AS project, d.name FROM task_definition t"
            " JOIN workflow_task_relation r ON r.post_task_code = t.code"
            " JOIN workflow_definition d ON d.code = r.workflow_definition_code"
            " JOIN project p ON p.code = d.project_code WHERE t.environment_code = $1 ORDER BY 1, 2 LIMIT 5",
            row["code"],
        )
        if users:
            listed = ", ".join(f"{r['project']}/{r['name']}" for r in users)
            raise ApiError(409, f"environment {name!r} is used by workflow(s) {listed}: change them first", "name")
        await conn.execute(
            "DELETE FROM resource_grant WHERE resource_type = 'environment' AND resource_id = $1", row["id"]
        )
        await conn.execute("DELETE FROM environment WHERE id = $1", row["id"])
    return {"deleted": name}


# -- workflow documents --------------------------------------------------------------------------------------


def _named(doc: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(environment name, field) of a document: the workflow's and each task's."""
    if isinstance(doc.get("environment"), str):
        yield doc["environment"], "environment"
    tasks = doc.get("tasks")
    for i, task in enumerate(tasks if isinstance(tasks, list) else []):
        if isinstance(task, Mapping) and isinstance(task.get("environment"), str):
            yield task["environment"], f"tasks[{i}].environment"


async def check_environments(
    db: asyncpg.Pool | asyncpg.Connection, who: access.Principal, doc: Mapping[str, Any], project: str
) -> None:
    """400 naming the field of an environment that does not exist or that neither the caller nor ``project``
    was granted (one answer for both; an admin may name any existing one)."""
    for name, field in _named(doc):
        if who.is_admin:
            usable = await db.fetchval("SELECT 1 FROM environment WHERE name = $1", name)
        else:
            usable = await db.fetchval(
                "SELECT 1 FROM environment e JOIN resource_grant g ON g.resource_type = 'environment'"
                " AND g.resource_id = e.id WHERE e.name = $1"
                " AND (g.user_id = $2 OR g.project_code = (SELECT code FROM project WHERE name = $3))",
                name,
                who.user_id,
                project,
            )
        if not usable:
            raise ApiError(
                400,
                f"environment {name!r} does not exist or is not granted to you or to project {project!r}",
                field,
            )


async def with_codes(db: asyncpg.Pool | asyncpg.Connection, wf: WorkflowDef) -> WorkflowDef:
    """``wf`` with each task's environment code from its environment's name (400 for an unknown name)."""
    names = sorted({t.environment for t in wf.tasks if t.environment})
    if not names:
        return wf
    rows = await db.fetch("SELECT name, code FROM environment WHERE name = ANY($1::text[])", names)
    codes = {r["name"]: int(r["code"]) for r in rows}
    tasks = []
    for i, t in enumerate(wf.tasks):
        if t.environment and t.environment not in codes:
            raise ApiError(400, f"environment {t.environment!r} does not exist", f"tasks[{i}].environment")
        tasks.append(dataclasses.replace(t, environment_code=codes[t.environment]) if t.environment else t)
    return dataclasses.replace(wf, tasks=tuple(tasks))


async def names_of(db: asyncpg.Pool | asyncpg.Connection, codes: set[int]) -> dict[int, str]:
    """Environment code -> name (for a stored document)."""
    codes = {c for c in codes if c >= 0}
    if not codes:
        return {}
    rows = await db.fetch("SELECT code, name FROM environment WHERE code = ANY($1::bigint[])", list(codes))
    return {int(r["code"]): r["name"] for r in rows}


ROUTES = [
    Route("GET", "/api/v1/environments", list_environments,
          "Environments (shell exports for tasks) you may use, with their worker groups and projects", "environments",
          query=PAGE, response=_ENVIRONMENT, rule=access.SIGNED_IN),
    Route("POST", "/api/v1/environments", create_environment,
          "Create an environment (admins); grant it with POST /api/v1/grants", "environments", body=_CREATE,
          response=_ENVIRONMENT, status=201, rule=access.ADMIN),
    Route("GET", "/api/v1/environments/{name}", get_environment, "An environment you may use", "environments",
          response=_ENVIRONMENT, rule=access.SIGNED_IN),
    Route("PATCH", "/api/v1/environments/{name}", change_environment,
          "Change an environment's config, description or worker groups (admins)", "environments", body=_CHANGE,
          response=_ENVIRONMENT, rule=access.ADMIN),
    Route("DELETE", "/api/v1/environments/{name}", delete_environment,
          "Delete an environment no workflow uses (admins)", "environments",
          response={"type": "object", "properties": {"deleted": {"type": "string"}}}, rule=access.ADMIN),
]  # fmt: skip
