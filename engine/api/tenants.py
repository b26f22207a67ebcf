"""Tenants: the OS users tasks run as, listed by admins and granted by them to projects.

A workflow names its tenant (``tenant:``); it may name only ``default`` or a tenant an admin granted to its
project (``POST /api/v1/grants {"resource_type": "tenant", "resource": NAME, "project": P}``). That is checked
when the workflow is saved (created, updated, imported) and again when it is started or backfilled, so a
revoked grant stops new runs. ``default`` is the worker's own OS user, which a worker refuses unless
``worker.allow_root_tenant`` (engine/worker/taskenv.py); the worker also refuses a tenant that is no OS user
on it, each as a failed task with the reason in its log.
"""

from __future__ import annotations

from typing import Any

import asyncpg

from engine.api import access
from engine.api.routing import PAGE, ApiError, Call, Route, not_found, page

#: the tenant every project may use: the worker's own OS user (refused by workers unless configured)
DEFAULT = "default"
#: a portable OS user name (useradd's default rule, at most 32 characters)
NAME_PATTERN = r"^[a-z_][a-z0-9_-]{0,31}$"

_CREATE = {
    "type": "object",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "pattern": NAME_PATTERN, "description": "the OS user on the workers"},
        "description": {"type": "string", "maxLength": 1000},
    },
}
_TENANT = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "description": {"type": ["string", "null"]},
        "projects": {"type": "array", "items": {"type": "string"}, "description": "projects it is granted to"},
    },
}


async def tenant_usable(db: asyncpg.Pool | asyncpg.Connection, tenant: str, project: str) -> bool:
    """Whether a workflow of ``project`` may run as ``tenant``: ``default``, or granted to the project."""
    if tenant == DEFAULT:
        return True
    return bool(
        await db.fetchval(
            "SELECT 1 FROM tenant t JOIN resource_grant g ON g.resource_type = 'tenant' AND g.resource_id = t.id"
            " JOIN project p ON p.code = g.project_code WHERE t.tenant_code = $1 AND p.name = $2",
            tenant,
            project,
        )
    )


async def check_tenant(db: asyncpg.Pool | asyncpg.Connection, tenant: Any, project: str) -> None:
    """403 naming the field ``tenant`` when a workflow of ``project`` may not run as ``tenant`` (the same
    answer whether the tenant exists or not)."""
    if not isinstance(tenant, str):
        return  # the document's schema check answers 400
    if not await tenant_usable(db, tenant, project):
        raise ApiError(
            403,
            f"tenant {tenant!r} is not granted to project {project!r} (an admin creates tenants and grants them"
            " to projects; 'default' is the worker's own user)",
            "tenant",
        )


def _out(row: Any) -> dict[str, Any]:
    return {"name": row["tenant_code"], "description": row["description"], "projects": list(row["projects"] or [])}


_COLS = (
    "t.tenant_code, t.description, (SELECT array_agg(p.name ORDER BY p.name) FROM resource_grant g"
    " JOIN project p ON p.code = g.project_code WHERE g.resource_type = 'tenant' AND g.resource_id = t.id)"
    " AS projects"
)


async def list_tenants(api: Any, call: Call) -> dict[str, Any]:
    """Admins see every tenant; a user those granted to the projects they see."""
    who = access.principal_of(call)
    visible = f"WHERE t.id IN {access.visible_granted_sql('tenant', 1)}"
    cond, args = ("", []) if who.is_admin else (visible, [who.user_id])
    total = await api.db.fetchval(f"SELECT count(*) FROM tenant t {cond}", *args)
    rows = await api.db.fetch(
        f"SELECT {_COLS} FROM tenant t {cond} ORDER BY t.tenant_code LIMIT {int(call.query['size'])}"
        f" OFFSET {call.offset}",
        *args,
    )
    return page([_out(r) for r in rows], total, call)


async def create_tenant(api: Any, call: Call) -> dict[str, Any]:
    name = call.body["name"]
    if name == DEFAULT:
        raise ApiError(400, "'default' is built in (the worker's own user) and cannot be created", "name")
    row = await api.db.fetchrow(
        f"WITH t AS (INSERT INTO tenant (tenant_code, description) VALUES ($1, $2) ON CONFLICT (tenant_code)"
        f" DO NOTHING RETURNING *) SELECT {_COLS} FROM t",
        name,
        call.body.get("description"),
    )
    if row is None:
        raise ApiError(409, f"tenant {name!r} exists already", "name")
    return _out(row)


async def delete_tenant(api: Any, call: Call) -> dict[str, Any]:
    """Refused while a workflow names the tenant; its grants go with it."""
    name = call.path["name"]
    async with api.db.acquire() as conn, conn.transaction():
        tenant_id = await conn.fetchval("SELECT id FROM tenant WHERE tenant_code = $1 FOR UPDATE", name)
        if tenant_id is None:
            raise not_found(f"tenant {name!r}")
        users = await conn.fetch(
            "SELECT p.name AS project, d.name FROM workflow_definition d JOIN project p ON p.code = d.project_code"
            " WHERE d.tenant_code = $1 ORDER BY 1, 2 LIMIT 5",
            name,
        )
        if users:
            listed = ", ".join(f"{r['project']}/{r['name']}" for r in users)
            raise ApiError(409, f"tenant {name!r} is used by workflow(s) {listed}: change them first", "name")
        await conn.execute("DELETE FROM resource_grant WHERE resource_type = 'tenant' AND resource_id = $1", tenant_id)
        await conn.execute("UPDATE users SET tenant_id = NULL WHERE tenant_id = $1", tenant_id)
        await conn.execute("DELETE FROM tenant WHERE id = $1", tenant_id)
    return {"deleted": name}


ROUTES = [
    Route("GET", "/api/v1/tenants", list_tenants, "Tenants (OS users tasks run as) and the projects granted them",
          "tenants", query=PAGE, response=_TENANT, rule=access.SIGNED_IN),
    Route("POST", "/api/v1/tenants", create_tenant, "Create a tenant (admins); grant it with POST /api/v1/grants",
          "tenants", body=_CREATE, response=_TENANT, status=201, rule=access.ADMIN),
    Route("DELETE", "/api/v1/tenants/{name}", delete_tenant, "Delete a tenant no workflow uses (admins)", "tenants",
          response={"type": "object", "properties": {"deleted": {"type": "string"}}}, rule=access.ADMIN),
]  # fmt: skip
