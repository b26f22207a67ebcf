"""Grants: a project's owner (or an admin) gives users READ / EXECUTE / WRITE on the project; an admin grants
data sources and alert groups to users or to projects (every member of the project may then use them), and
tenants to projects (the project's workflows may then run as that OS user: engine/api/tenants.py), and
environments to users or projects (their workflows may then name it: engine/api/environments.py)."""

from __future__ import annotations

from typing import Any

from engine.api import access
from engine.api.access import perm_bits, perm_names
from engine.api.routing import PAGE, ApiError, Call, Param, Route, not_found, page

_PERMS = {"type": "array", "items": {"enum": list(access.PERM_NAMES)}, "minItems": 1, "uniqueItems": True}
_PROJECT_GRANT = {
    "type": "object",
    "required": ["perms"],
    "additionalProperties": False,
    "properties": {"perms": {**_PERMS, "description": "READ to see; EXECUTE to start and control; WRITE to edit"}},
}
_RESOURCE_GRANT = {
    "type": "object",
    "required": ["resource_type", "resource"],
    "additionalProperties": False,
    "properties": {
        "resource_type": {"enum": list(access.GRANTED)},
        "resource": {
            "type": ["string", "integer"],
            "description": "data source name, alert group id, tenant or environment name",
        },
        "user": {"type": "string", "minLength": 1},
        "project": {"type": "string", "minLength": 1},
    },
    "oneOf": [{"required": ["user"]}, {"required": ["project"]}],
}
_GRANT = {
    "type": "object",
    "properties": {"user": {"type": "string"}, "perms": {"type": "array", "items": {"type": "string"}}},
}
_GRANTS = {
    "type": "object",
    "required": ["project", "items"],
    "properties": {"project": {"type": "string"}, "owner": {"type": ["string", "null"]},
                   "items": {"type": "array", "items": _GRANT}},
}  # fmt: skip


async def _project_code(api: Any, name: str) -> int:
    code = await api.db.fetchval("SELECT code FROM project WHERE name = $1", name)
    if code is None:
        raise not_found(f"project {name!r}")
    return int(code)


async def _user_id(api: Any, name: str, field: str) -> int:
    user_id = await api.db.fetchval("SELECT id FROM users WHERE user_name = $1", name)
    if user_id is None:
        raise ApiError(404, f"user {name!r} does not exist", field)
    return int(user_id)


async def list_project_grants(api: Any, call: Call) -> dict[str, Any]:
    code = await _project_code(api, call.path["name"])
    rows = await api.db.fetch(
        "SELECT u.user_name, g.perm FROM project_user g JOIN users u ON u.id = g.user_id"
        " WHERE g.project_code = $1 ORDER BY u.user_name",
        code,
    )
    owner = await api.db.fetchval(
        "SELECT u.user_name FROM project p JOIN users u ON u.id = p.user_id WHERE p.code = $1", code
    )
    items = [{"user": r["user_name"], "perms": perm_names(r["perm"] | access.READ)} for r in rows]
    return {"project": call.path["name"], "owner": owner, "items": items}


async def put_project_grant(api: Any, call: Call) -> dict[str, Any]:
    code = await _project_code(api, call.path["name"])
    user_id = await _user_id(api, call.path["user"], "path.user")
    perm = perm_bits(call.body["perms"])
    await api.db.execute(
        "INSERT INTO project_user (project_code, user_id, perm) VALUES ($1, $2, $3)"
        " ON CONFLICT (project_code, user_id) DO UPDATE SET perm = EXCLUDED.perm, update_time = now()",
        code,
        user_id,
        perm,
    )
    return {"user": call.path["user"], "perms": perm_names(perm | access.READ)}


async def delete_project_grant(api: Any, call: Call) -> dict[str, Any]:
    code = await _project_code(api, call.path["name"])
    user_id = await _user_id(api, call.path["user"], "path.user")
    if not await api.db.fetchval(
        "DELETE FROM project_user WHERE project_code = $1 AND user_id = $2 RETURNING id", code, user_id
    ):
        raise not_found(f"a grant of {call.path['name']!r} to {call.path['user']!r}")
    return {"revoked": call.path["user"]}


async def _resource_id(api: Any, kind: str, resource: Any) -> int:
    if kind == "datasource":
        found = await api.db.fetchval("SELECT id FROM datasource WHERE name = $1", str(resource))
    elif kind == "tenant":
        found = await api.db.fetchval("SELECT id FROM tenant WHERE tenant_code = $1", str(resource))
    elif kind == "environment":
        found = await api.db.fetchval("SELECT id FROM environment WHERE name = $1", str(resource))
    else:
        try:
            found = await api.db.fetchval("SELECT id FROM alert_group WHERE id = $1", int(resource))
        except ValueError:
            raise ApiError(400, "must be an alert group id", "resource") from None
    if found is None:
        raise ApiError(404, f"{kind} {resource!r} does not exist", "resource")
    return int(found)


_RESOURCE_COLS = (
    "g.id, g.resource_type, g.resource_id, u.user_name, p.name AS project,"
    " coalesce(d.name, a.group_name, t.tenant_code, e.name) AS resource_name"
)
_RESOURCE_FROM = (
    "resource_grant g LEFT JOIN users u ON u.id = g.user_id LEFT JOIN project p ON p.code = g.project_code"
    " LEFT JOIN datasource d ON g.resource_type = 'datasource' AND d.id = g.resource_id"
    " LEFT JOIN alert_group a ON g.resource_type = 'alert_group' AND a.id = g.resource_id"
    " LEFT JOIN tenant t ON g.resource_type = 'tenant' AND t.id = g.resource_id"
    " LEFT JOIN environment e ON g.resource_type = 'environment' AND e.id = g.resource_id"
)


def _grant_out(row: Any) -> dict[str, Any]:
    return {"id": row["id"], "resource_type": row["resource_type"], "resource_id": row["resource_id"],
            "resource": row["resource_name"], "user": row["user_name"], "project": row["project"]}  # fmt: skip


async def list_resource_grants(api: Any, call: Call) -> dict[str, Any]:
    kind = call.query["resource_type"]
    cond, args = ("WHERE g.resource_type = $1", [kind]) if kind else ("", [])
    total = await api.db.fetchval(f"SELECT count(*) FROM resource_grant g {cond}", *args)
    rows = await api.db.fetch(
        f"SELECT {_RESOURCE_COLS} FROM {_RESOURCE_FROM} {cond} ORDER BY g.id"
        f" LIMIT {int(call.query['size'])} OFFSET {call.offset}",
        *args,
    )
    return page([_grant_out(r) for r in rows], total, call)


async def post_resource_grant(api: Any, call: Call) -> dict[str, Any]:
    body = call.body
    kind = body["resource_type"]
    if kind == "tenant" and "user" in body:
        raise ApiError(400, "tenants are granted to projects (their workflows run as the tenant), not to users", "user")
    resource_id = await _resource_id(api, kind, body["resource"])
    user_id = await _user_id(api, body["user"], "user") if "user" in body else None
    project = await _project_code(api, body["project"]) if "project" in body else None
    grant_id = await api.db.fetchval(
        "INSERT INTO resource_grant (resource_type, resource_id, user_id, project_code) VALUES ($1, $2, $3, $4)"
        " ON CONFLICT DO NOTHING RETURNING id",
        kind,
        resource_id,
        user_id,
        project,
    )
    if grant_id is None:
        raise ApiError(409, "this grant exists already")
    row = await api.db.fetchrow(f"SELECT {_RESOURCE_COLS} FROM {_RESOURCE_FROM} WHERE g.id = $1", grant_id)
    return _grant_out(row)


async def delete_resource_grant(api: Any, call: Call) -> dict[str, Any]:
    grant_id = call.path_int("id")
    if not await api.db.fetchval("DELETE FROM resource_grant WHERE id = $1 RETURNING id", grant_id):
        raise not_found(f"grant {grant_id}")
    return {"revoked": grant_id}


_OWNER = access.owner("project", "path.name")
_ONE = "/api/v1/projects/{name}/grants/{user}"
ROUTES = [
    Route("GET", "/api/v1/projects/{name}/grants", list_project_grants, "Who may do what in a project (owner, admins)",
          "grants", response=_GRANTS, rule=_OWNER),
    Route("PUT", _ONE, put_project_grant, "Give a user rights on a project (owner, admins)", "grants",
          body=_PROJECT_GRANT, response=_GRANT, rule=_OWNER),
    Route("DELETE", _ONE, delete_project_grant, "Take a user's rights on a project away (owner, admins)", "grants",
          response={"type": "object"}, rule=_OWNER),
    Route("GET", "/api/v1/grants", list_resource_grants,
          "Grants of data sources, alert groups, tenants and environments (admins)", "grants",
          query=(Param("resource_type", str, "datasource, alert_group, tenant or environment",
                       choices=access.GRANTED), *PAGE),
          rule=access.ADMIN),
    Route("POST", "/api/v1/grants", post_resource_grant,
          "Grant a data source, alert group or environment to a user or a project, a tenant to a project (admins)",
          "grants", body=_RESOURCE_GRANT, status=201, rule=access.ADMIN),
    Route("DELETE", "/api/v1/grants/{id}", delete_resource_grant,
          "Revoke a data source / alert group / tenant / environment grant (admins)", "grants",
          response={"type": "object"}, rule=access.ADMIN),
]  # fmt: skip
