"""Projects: the namespace workflow definitions live in."""

from __future__ import annotations

from typing import Any

import asyncpg
from sqlalchemy import func, select

from core import logs
from core.errors import PorpoiseError
from engine.api import access
from engine.api.routing import PAGE, ApiError, Call, Param, Route, one, page
from engine.config import check_keep_days
from engine.storage import sql
from engine.storage import tables as t
from engine.workflows.definitions import ensure_project

log = logs.get(__name__)

_COLUMNS = ("code", "name", "description", "keep_days", "create_time", "update_time")
_PROJECT = {
    "type": "object",
    "properties": {
        "code": {"type": "integer"},
        "name": {"type": "string"},
        "description": {"type": ["string", "null"]},
        "keep_days": {
            "type": ["integer", "null"],
            "description": "days its finished runs are kept (null: the cluster's history.keep_days; 0: for ever)",
        },
        "workflows": {"type": "integer"},
    },
}
_CHANGE = {
    "type": "object",
    "additionalProperties": False,
    "minProperties": 1,
    "properties": {
        "description": {"type": "string"},
        "keep_days": {"type": ["integer", "null"], "minimum": 0, "maximum": 36500},
    },
}
_CREATE = {
    "type": "object",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {"name": {"type": "string", "minLength": 1, "maxLength": 255}, "description": {"type": "string"}},
}


def _project(row: Any) -> dict[str, Any]:
    return {**{c: row[c] for c in _COLUMNS}, "workflows": row["workflows"]}


def _select() -> Any:
    n = (
        select(func.count())
        .select_from(t.workflow_definition)
        .where(t.workflow_definition.c.project_code == t.project.c.code)
        .scalar_subquery()
    )
    return select(*(t.project.c[c] for c in _COLUMNS), n.label("workflows"))


async def list_projects(api: Any, call: Call) -> dict[str, Any]:
    where = access.project_clause(call, t.project.c.code)
    if call.query["name"]:
        where.append(t.project.c.name.ilike(f"%{call.query['name']}%"))
    total = await sql.fetchval(api.db, select(func.count()).select_from(t.project).where(*where))
    rows = await sql.fetch(
        api.db, _select().where(*where).order_by(t.project.c.name).limit(call.query["size"]).offset(call.offset)
    )
    return page([_project(r) for r in rows], total, call)


async def create_project(api: Any, call: Call) -> dict[str, Any]:
    access.check_may_create(call.principal, "name")
    async with api.db.acquire() as conn:
        exists = await conn.fetchval("SELECT 1 FROM project WHERE name = $1", call.body["name"])
        if exists:
            raise ApiError(409, f"project {call.body['name']!r} already exists", "name")
        code = await ensure_project(conn, call.body["name"], call.user_id)
        if call.body.get("description"):
            await conn.execute("UPDATE project SET description = $2 WHERE code = $1", code, call.body["description"])
        row = await sql.fetchrow(conn, _select().where(t.project.c.code == code))
    return _project(row)


async def project_by_name(db: asyncpg.Pool | asyncpg.Connection, name: str) -> Any:
    return await one(db, _select().where(t.project.c.name == name), f"project {name!r}")


async def get_project(api: Any, call: Call) -> dict[str, Any]:
    return _project(await project_by_name(api.db, call.path["name"]))


async def change_project(api: Any, call: Call) -> dict[str, Any]:
    """Change a project's description or its history retention (``keep_days``)."""
    row = await project_by_name(api.db, call.path["name"])
    body = call.body
    if body.get("keep_days") is not None:
        reason = check_keep_days("keep_days", int(body["keep_days"]))
        if reason:
            raise ApiError(400, reason, "keep_days")
    sets = [f"{k} = ${i}" for i, k in enumerate(sorted(body), start=2)]
    await api.db.execute(
        f"UPDATE project SET {', '.join(sets)}, update_time = now() WHERE code = $1",
        row["code"],
        *(body[k] for k in sorted(body)),
    )
    return _project(await project_by_name(api.db, call.path["name"]))


async def delete_project(api: Any, call: Call) -> dict[str, Any]:
    row = await project_by_name(api.db, call.path["name"])
    if row["workflows"]:
        raise ApiError(409, f"project {row['name']!r} still has {row['workflows']} workflow(s); delete them first")
    await api.db.execute("DELETE FROM project WHERE code = $1", row["code"])  # its resource rows with it
    try:
        await api.blobs.delete_prefix(f"resources/{row['code']}/")
    except PorpoiseError as exc:  # the rows are gone: orphan contents waste space, nothing more
        log.warning("resource contents of a deleted project not removed", project=row["name"], error=str(exc))
    return {"deleted": row["name"]}


_ONE = {"type": "object", "properties": {"deleted": {"type": "string"}}}

ROUTES = [
    Route("GET", "/api/v1/projects", list_projects, "List the projects you may see", "projects",
          query=(Param("name", str, "substring of the name"), *PAGE), response=_PROJECT, rule=access.SIGNED_IN),
    Route("POST", "/api/v1/projects", create_project, "Create a project (you own it)", "projects", body=_CREATE,
          response=_PROJECT, status=201, rule=access.SIGNED_IN),
    Route("GET", "/api/v1/projects/{name}", get_project, "A project", "projects", response=_PROJECT,
          rule=access.read("project", "path.name")),
    Route("PATCH", "/api/v1/projects/{name}", change_project,
          "Change a project's description or how long its finished runs are kept", "projects", body=_CHANGE,
          response=_PROJECT, rule=access.write("project", "path.name")),
    Route("DELETE", "/api/v1/projects/{name}", delete_project, "Delete an empty project", "projects", response=_ONE,
          rule=access.owner("project", "path.name")),
]  # fmt: skip
