"""Alert groups with their senders (webhook, email), and the alert records with their delivery state.
Sender params may hold secrets: they are checked on the way in and never shown on the way out."""

from __future__ import annotations

import json
from typing import Any

from engine.alerts.senders import SECRET_KEYS, masked, validate
from engine.alerts.service import ALERT_TYPES
from engine.api import access
from engine.api.routing import PAGE, ApiError, Call, Param, Route, not_found, page, select_page
from engine.secretbox import SecretError, seal_params
from engine.tasks.base import ParamError

STATUS = ("WAIT_EXECUTION", "EXECUTION_SUCCESS", "EXECUTION_FAILURE", "EXECUTION_PARTIAL_SUCCESS")
_SENDER = {
    "type": "object",
    "additionalProperties": False,
    "required": ["type", "name", "params"],
    "properties": {
        "type": {"type": "string", "description": "WEBHOOK or EMAIL"},
        "name": {"type": "string", "minLength": 1, "maxLength": 255},
        "params": {
            "type": "object",
            "additionalProperties": True,
            "description": "the sender's settings (secrets are never shown back)",
        },
    },
}
_GROUP_IN = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 255},
        "description": {"type": "string"},
        "senders": {"type": "array", "items": _SENDER},
    },
}
_GROUP = {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"},
                                           "senders": {"type": "array", "items": _SENDER}}}  # fmt: skip
_ALERT = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"}, "title": {"type": "string"}, "alert_type": {"type": "string"},
        "status": {"enum": list(STATUS)}, "attempts": {"type": "integer"},
        "workflow_instance_id": {"type": ["integer", "null"]},
    },
}  # fmt: skip


async def _group(api: Any, group_id: int) -> dict[str, Any]:
    row = await api.db.fetchrow("SELECT id, group_name, description FROM alert_group WHERE id = $1", group_id)
    if row is None:
        raise not_found(f"alert group {group_id}")
    senders = await api.db.fetch(
        "SELECT id, plugin_type, name, params FROM alert_sender WHERE alert_group_id = $1 ORDER BY id", group_id
    )
    out = []
    for s in senders:
        params = json.loads(s["params"]) if isinstance(s["params"], str) else dict(s["params"])
        out.append({"id": s["id"], "type": s["plugin_type"], "name": s["name"], "params": masked(params)})
    return {"id": row["id"], "name": row["group_name"], "description": row["description"], "senders": out}


async def create_group(api: Any, call: Call) -> dict[str, Any]:
    body = call.body
    senders = body.get("senders", [])
    for i, sender in enumerate(senders):
        try:
            validate(sender["type"], sender["params"])
        except ParamError as exc:
            field = "type" if exc.field == "type" else f"params.{exc.field}"
            raise ApiError(400, exc.reason, f"senders[{i}].{field}") from None
    try:
        sealed = [seal_params(api.keyring, s["params"], SECRET_KEYS, "alert_sender") for s in senders]
    except SecretError as exc:
        raise ApiError(503, str(exc), "senders") from None
    async with api.db.acquire() as conn, conn.transaction():
        if await conn.fetchval("SELECT 1 FROM alert_group WHERE group_name = $1", body["name"]):
            raise ApiError(409, f"alert group {body['name']!r} exists", "name")
        group_id = await conn.fetchval(
            "INSERT INTO alert_group (group_name, description, create_user_id) VALUES ($1, $2, $3) RETURNING id",
            body["name"],
            body.get("description"),
            call.user_id,
        )
        for sender, params in zip(senders, sealed, strict=True):
            await conn.execute(
                "INSERT INTO alert_sender (alert_group_id, plugin_type, name, params) VALUES ($1, $2, $3, $4::jsonb)",
                group_id,
                sender["type"],
                sender["name"],
                json.dumps(params),
            )
    return await _group(api, group_id)


async def list_groups(api: Any, call: Call) -> dict[str, Any]:
    ids, total = await select_page(api.db, call, "alert_group", {}, "id", access.granted_filter(call, "alert_group"))
    return page([await _group(api, r["id"]) for r in ids], total, call)


async def get_group(api: Any, call: Call) -> dict[str, Any]:
    return await _group(api, call.path_int("id"))


async def delete_group(api: Any, call: Call) -> dict[str, Any]:
    group_id = call.path_int("id")
    if not await api.db.fetchval("DELETE FROM alert_group WHERE id = $1 RETURNING id", group_id):
        raise not_found(f"alert group {group_id}")
    return {"deleted": group_id}


async def list_alerts(api: Any, call: Call) -> dict[str, Any]:
    q = call.query
    status = STATUS.index(q["status"]) if q["status"] else None
    rows, total = await select_page(
        api.db,
        call,
        "alert",
        {"workflow_instance_id": q["instance"] or None, "alert_status": status},
        "id DESC",
        access.project_filter(call, "project_code"),
    )
    items = [
        {"id": r["id"], "title": r["title"], "content": r["content"],
         "alert_type": ALERT_TYPES.get(r["alert_type"], str(r["alert_type"])), "status": STATUS[r["alert_status"]],
         "attempts": r["attempts"], "alert_group_id": r["alert_group_id"],
         "workflow_instance_id": r["workflow_instance_id"], "log": r["log"], "create_time": r["create_time"]}
        for r in rows
    ]  # fmt: skip
    return page(items, total, call)


ROUTES = [
    Route("GET", "/api/v1/alert-groups", list_groups, "Alert groups and their senders", "alerts", query=PAGE,
          response=_GROUP, rule=access.SIGNED_IN),
    Route("POST", "/api/v1/alert-groups", create_group, "Create an alert group with its senders", "alerts",
          body=_GROUP_IN, response=_GROUP, status=201, rule=access.ADMIN),
    Route("GET", "/api/v1/alert-groups/{id}", get_group, "An alert group", "alerts", response=_GROUP,
          rule=access.read("alert_group", "path.id")),
    Route("DELETE", "/api/v1/alert-groups/{id}", delete_group, "Delete an alert group", "alerts",
          response={"type": "object", "properties": {"deleted": {"type": "integer"}}}, rule=access.ADMIN),
    Route("GET", "/api/v1/alerts", list_alerts, "Alerts, newest first, with their delivery state", "alerts",
          query=(Param("instance", int, "workflow instance id"),
                 Param("status", str, "delivery status", choices=STATUS), *PAGE),
          response=_ALERT, rule=access.SIGNED_IN),
]  # fmt: skip
