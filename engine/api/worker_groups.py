"""Worker groups managed in the cluster (DolphinScheduler's Security > Worker Group): an admin creates a group
and assigns workers to it by address (``host:port``, as ``GET /api/v1/cluster`` lists them); each address must
be a registered worker when saved (DolphinScheduler's WORKER_ADDRESS_INVALID). Masters read the assignments
from the database (engine/master/worker_groups.py), so a change takes effect within
``master.worker_group_refresh_interval`` without a restart. A worker also stays in the group of its own
configuration (``worker.group``). Delete is refused while a workflow's task names the group.
"""

from __future__ import annotations

from typing import Any

from engine.api import access
from engine.api.cluster import _membership
from engine.api.routing import PAGE, ApiError, Call, Route, not_found, page
from engine.master.worker_groups import parse_addresses

NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$"
_ADDRESSES = {
    "type": "array",
    "items": {"type": "string", "minLength": 1, "maxLength": 300},
    "maxItems": 1000,
    "uniqueItems": True,
    "description": "worker addresses (host:port, as GET /api/v1/cluster lists them), each registered now",
}
_CREATE = {
    "type": "object",
    "required": ["name", "addresses"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "pattern": NAME_PATTERN},
        "addresses": _ADDRESSES,
        "description": {"type": "string", "maxLength": 1000},
    },
}
_CHANGE = {
    "type": "object",
    "additionalProperties": False,
    "minProperties": 1,
    "properties": {"addresses": _ADDRESSES, "description": {"type": "string", "maxLength": 1000}},
}
_GROUP = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "addresses": {"type": "array", "items": {"type": "string"}, "description": "assigned workers"},
        "live": {"type": "array", "items": {"type": "string"}, "description": "its registered workers now"},
        "managed": {"type": "boolean", "description": "false: only workers' own configuration names it"},
        "description": {"type": ["string", "null"]},
    },
}


def _live(api: Any) -> list[Any]:
    return list(_membership(api).workers())


def _out(name: str, addresses: frozenset[str], description: Any, live: list[Any], managed: bool) -> dict[str, Any]:
    members = sorted(w.address for w in live if w.node.group == name or w.address in addresses)
    return {"name": name, "addresses": sorted(addresses), "live": members, "managed": managed,
            "description": description}  # fmt: skip


async def list_groups(api: Any, call: Call) -> dict[str, Any]:
    """The managed groups and those only workers' configuration names, with their live workers."""
    live = _live(api)
    rows = {r["name"]: r for r in await api.db.fetch("SELECT name, addr_list, description FROM worker_group")}
    names = sorted(set(rows) | {w.node.group for w in live})
    items = [
        _out(n, parse_addresses(rows[n]["addr_list"]), rows[n]["description"], live, True)
        if n in rows
        else _out(n, frozenset(), None, live, False)
        for n in names
    ]
    size, offset = call.query["size"], call.offset
    return page(items[offset : offset + size], len(items), call)


def _check_addresses(api: Any, addresses: list[str]) -> list[Any]:
    live = _live(api)
    known = {w.address for w in live}
    for i, address in enumerate(addresses):
        if address not in known:
            raise ApiError(400, f"{address!r} is not a registered worker (GET /api/v1/cluster)", f"addresses[{i}]")
    return live


async def create_group(api: Any, call: Call) -> dict[str, Any]:
    body = call.body
    if body["name"] == "default":
        raise ApiError(400, "'default' is every worker configured without a group; it cannot be created", "name")
    live = _check_addresses(api, body["addresses"])
    row = await api.db.fetchrow(
        "INSERT INTO worker_group (name, addr_list, description) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING"
        " RETURNING name, addr_list, description",
        body["name"],
        ",".join(body["addresses"]),
        body.get("description"),
    )
    if row is None:
        raise ApiError(409, f"worker group {body['name']!r} exists already", "name")
    return _out(row["name"], parse_addresses(row["addr_list"]), row["description"], live, True)


async def change_group(api: Any, call: Call) -> dict[str, Any]:
    body = call.body
    live = _check_addresses(api, body.get("addresses", []))
    row = await api.db.fetchrow(
        "UPDATE worker_group SET addr_list = coalesce($2, addr_list), description = coalesce($3, description),"
        " update_time = now() WHERE name = $1 RETURNING name, addr_list, description",
        call.path["name"],
        ",".join(body["addresses"]) if "addresses" in body else None,
        body.get("description"),
    )
    if row is None:
        raise not_found(f"worker group {call.path['name']!r}")
    return _out(row["name"], parse_addresses(row["addr_list"]), row["description"], live, True)


async def delete_group(api: Any, call: Call) -> dict[str, Any]:
    name = call.path["name"]
    async with api.db.acquire() as conn, conn.transaction():
        if not await conn.fetchval("SELECT 1 FROM worker_group WHERE name = $1 FOR UPDATE", name):
            raise not_found(f"worker group {name!r}")
        users = await conn.fetch(
            "SELECT DISTINCT p.name AS project, d.name FROM task_definition t"
            " JOIN workflow_task_relation r ON r.post_task_code = t.code"
            " JOIN workflow_definition d ON d.code = r.workflow_definition_code"
            " JOIN project p ON p.code = d.project_code WHERE t.worker_group = $1 ORDER BY 1, 2 LIMIT 5",
            name,
        )
        if users:
            listed = ", ".join(f"{r['project']}/{r['name']}" for r in users)
            raise ApiError(409, f"worker group {name!r} is used by workflow(s) {listed}: change them first", "name")
        await conn.execute("DELETE FROM worker_group WHERE name = $1", name)
    return {"deleted": name}


ROUTES = [
    Route("GET", "/api/v1/worker-groups", list_groups, "Worker groups with their assigned and live workers",
          "worker-groups", query=PAGE, response=_GROUP, rule=access.SIGNED_IN),
    Route("POST", "/api/v1/worker-groups", create_group, "Create a worker group of registered workers (admins)",
          "worker-groups", body=_CREATE, response=_GROUP, status=201, rule=access.ADMIN),
    Route("PATCH", "/api/v1/worker-groups/{name}", change_group,
          "Change a worker group's workers or description (admins)", "worker-groups", body=_CHANGE,
          response=_GROUP, rule=access.ADMIN),
    Route("DELETE", "/api/v1/worker-groups/{name}", delete_group, "Delete a worker group no workflow uses (admins)",
          "worker-groups", response={"type": "object", "properties": {"deleted": {"type": "string"}}},
          rule=access.ADMIN),
]  # fmt: skip
