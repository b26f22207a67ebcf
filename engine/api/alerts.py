"""Alert groups with their senders (the channels of engine/alerts: webhook, e-mail, chat tools, PagerDuty,
script), and the alert records with their delivery state. Sender params may hold secrets: they are checked
on the way in and never shown on the way out; an edit that sends a secret back masked keeps the stored one."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from engine.alerts.netguard import AddressPolicy
from engine.alerts.senders import SECRET_KEYS, SendError, masked, plugins, redact, validate
from engine.alerts.service import ALERT_TYPES, instance_link
from engine.api import access
from engine.api.routing import PAGE, ApiError, Call, Param, Route, not_found, page, select_page
from engine.secretbox import SecretError, open_params, seal_params
from engine.tasks.base import ParamError

STATUS = ("WAIT_EXECUTION", "EXECUTION_SUCCESS", "EXECUTION_FAILURE", "EXECUTION_PARTIAL_SUCCESS")
_SENDER = {
    "type": "object",
    "additionalProperties": False,
    "required": ["type", "name", "params"],
    "properties": {
        "id": {"type": "integer", "description": "on an edit: the sender kept (its masked secrets stay)"},
        "type": {
            "type": "string",
            "description": "WEBHOOK, EMAIL, SLACK, TEAMS, DINGTALK, WECOM, FEISHU, TELEGRAM, PAGERDUTY or SCRIPT",
        },
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
        out.append({"id": s["id"], "type": s["plugin_type"], "name": s["name"], "params": masked(dict(s["params"]))})
    return {"id": row["id"], "name": row["group_name"], "description": row["description"], "senders": out}


def _checked(api: Any, senders: list[dict[str, Any]]) -> None:
    for i, sender in enumerate(senders):
        try:
            validate(sender["type"], sender["params"])
            if sender["type"] == "SCRIPT" and not api.cfg.api.alert_script_dir:
                raise ParamError("type", "SCRIPT senders are off on this API server (api.alert_script_dir is empty)")
        except ParamError as exc:
            field = "type" if exc.field == "type" else f"params.{exc.field}"
            raise ApiError(400, exc.reason, f"senders[{i}].{field}") from None


def _sealed(api: Any, senders: list[dict[str, Any]]) -> list[dict[str, Any]]:
    try:
        return [seal_params(api.keyring, s["params"], SECRET_KEYS, "alert_sender") for s in senders]
    except SecretError as exc:
        raise ApiError(503, str(exc), "senders") from None


async def create_group(api: Any, call: Call) -> dict[str, Any]:
    body = call.body
    senders = body.get("senders", [])
    _checked(api, senders)
    sealed = _sealed(api, senders)
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


def _unmasked(given: Mapping[str, Any], stored: Mapping[str, Any]) -> dict[str, Any]:
    """An edited sender's params with every secret sent back masked ("***") replaced by the stored value."""
    out = dict(given)
    for key in SECRET_KEYS & given.keys():
        value = given[key]
        if value == "***" and key in stored:
            out[key] = stored[key]
        elif isinstance(value, Mapping) and isinstance(stored.get(key), Mapping):
            out[key] = {k: stored[key].get(k, v) if v == "***" else v for k, v in value.items()}
    return out


#: params saying where a sender sends (and how it authenticates there): a masked secret is not kept once one
#: of them changes, or a stored token would go to the new address (an edit's answer never shows it, a test
#: would send it)
ADDRESS_KEYS = ("url", "webHook", "WebHook", "apiUrl", "host", "port", "sendType")
#: what an address param left out means (a form may send the default, a stored sender may lack it)
_ADDRESS_DEFAULTS: dict[str, Any] = {"port": 25, "sendType": "APP"}


def _masked_secrets(params: Mapping[str, Any]) -> bool:
    for key in SECRET_KEYS & params.keys():
        value = params[key]
        if value == "***" or (isinstance(value, Mapping) and "***" in value.values()):
            return True
    return False


def _moved(sender: Mapping[str, Any], stored_type: str | None, stored: Mapping[str, Any]) -> str:
    """What of an edited sender changed where it sends ("" when nothing did)."""
    if stored_type is None:
        return ""
    if sender["type"] != stored_type:
        return "type"
    given = sender["params"]
    for key in ADDRESS_KEYS:
        default = _ADDRESS_DEFAULTS.get(key)
        now, before = given.get(key) or default, stored.get(key) or default
        if now != before and not (key in SECRET_KEYS and now == "***"):
            return f"params.{key}"
    return ""


async def update_group(api: Any, call: Call) -> dict[str, Any]:
    """Rename, describe, and replace the senders: a sender with an ``id`` of this group is edited in place
    (so an alert being retried still knows it delivered there), one without is added, one left out removed."""
    group_id, body = call.path_int("id"), call.body
    async with api.db.acquire() as conn, conn.transaction():
        row = await conn.fetchrow("SELECT id FROM alert_group WHERE id = $1 FOR UPDATE", group_id)
        if row is None:
            raise not_found(f"alert group {group_id}")
        if "name" in body and await conn.fetchval(
            "SELECT 1 FROM alert_group WHERE group_name = $1 AND id <> $2", body["name"], group_id
        ):
            raise ApiError(409, f"alert group {body['name']!r} exists", "name")
        await conn.execute(
            "UPDATE alert_group SET group_name = COALESCE($2, group_name), description = CASE WHEN $3 THEN $4"
            " ELSE description END, update_time = now() WHERE id = $1",
            group_id,
            body.get("name"),
            "description" in body,
            body.get("description"),
        )
        if "senders" in body:
            rows = await conn.fetch(
                "SELECT id, plugin_type, params FROM alert_sender WHERE alert_group_id = $1", group_id
            )
            stored = {r["id"]: open_params(api.keyring, dict(r["params"]), SECRET_KEYS, "alert_sender") for r in rows}
            types = {r["id"]: r["plugin_type"] for r in rows}
            senders = []
            for i, sender in enumerate(body["senders"]):
                if "id" in sender and sender["id"] not in stored:
                    raise ApiError(400, f"sender {sender['id']} is not a sender of this group", f"senders[{i}].id")
                kept = stored.get(sender.get("id"), {})
                moved = _moved(sender, types.get(sender.get("id")), kept)
                if moved and _masked_secrets(sender["params"]):
                    raise ApiError(
                        400,
                        f"{moved} changed: give the sender's secrets again (a masked secret is kept only while the"
                        " sender sends where it did)",
                        f"senders[{i}].params",
                    )
                params = _unmasked(sender["params"], kept)
                senders.append({**sender, "params": params})
            _checked(api, senders)
            sealed = _sealed(api, senders)
            kept = [s["id"] for s in senders if "id" in s]
            await conn.execute(
                "DELETE FROM alert_sender WHERE alert_group_id = $1 AND NOT (id = ANY($2::bigint[]))", group_id, kept
            )
            for sender, params in zip(senders, sealed, strict=True):
                if "id" in sender:
                    await conn.execute(
                        "UPDATE alert_sender SET plugin_type = $2, name = $3, params = $4::jsonb WHERE id = $1",
                        sender["id"], sender["type"], sender["name"], json.dumps(params),
                    )  # fmt: skip
                else:
                    await conn.execute(
                        "INSERT INTO alert_sender (alert_group_id, plugin_type, name, params)"
                        " VALUES ($1, $2, $3, $4::jsonb)",
                        group_id, sender["type"], sender["name"], json.dumps(params),
                    )  # fmt: skip
    return await _group(api, group_id)


async def test_group(api: Any, call: Call) -> dict[str, Any]:
    """Send a test alert to every sender of the group now (not through the queue) and answer each outcome."""
    group_id = call.path_int("id")
    group = await api.db.fetchrow("SELECT group_name FROM alert_group WHERE id = $1", group_id)
    if group is None:
        raise not_found(f"alert group {group_id}")
    senders = await api.db.fetch(
        "SELECT id, plugin_type, name, params FROM alert_sender WHERE alert_group_id = $1 ORDER BY id", group_id
    )
    cfg = api.cfg.api
    guard = AddressPolicy(cfg.alert_webhook_allow, cfg.alert_webhook_deny)
    alert = {
        "id": 0, "title": f"Porpoise test alert for group {group['group_name']}",
        "content": "This is a test: the alert group's senders can reach this channel.", "alert_type": -1,
        "alert_type_name": "TEST", "workflow_instance_id": None, "project_code": None,
        "workflow_definition_code": None, "create_time": None, "link": instance_link(cfg.public_url, None),
        "task_instance_id": None, "log_link": None,
    }  # fmt: skip

    async def one(sender: Any) -> dict[str, Any]:
        outcome = {"id": sender["id"], "name": sender["name"], "type": sender["plugin_type"], "sent": True}
        params: Mapping[str, Any] = dict(sender["params"])
        try:
            cls = plugins().get(sender["plugin_type"])
            if cls is None:
                raise SendError(f"unknown sender type {sender['plugin_type']}")
            try:
                params = open_params(api.keyring, params, SECRET_KEYS, "alert_sender")
            except SecretError as exc:
                raise SendError(str(exc)) from None
            await cls(guard, cfg.alert_script_dir).send(alert, params, cfg.alert_timeout)
        except SendError as exc:
            outcome.update(sent=False, error=redact(str(exc), params))
        return outcome

    results = await asyncio.gather(*(one(s) for s in senders))
    return {"group": group_id, "senders": list(results)}


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
         "workflow_instance_id": r["workflow_instance_id"], "task_instance_id": r["task_instance_id"],
         "log": r["log"], "create_time": r["create_time"]}
        for r in rows
    ]  # fmt: skip
    return page(items, total, call)


async def resend_alert(api: Any, call: Call) -> dict[str, Any]:
    """Deliver a finished alert again, to every sender of its group: back to WAIT_EXECUTION with a clean
    delivery state (nothing delivered, no errors, no attempt), due now. Admins, or users with WRITE on the
    alert's project; an alert of no project (fault tolerance) only admins."""
    alert_id = call.path_int("id")
    who = access.principal_of(call)
    row = await api.db.fetchrow("SELECT project_code, alert_status FROM alert WHERE id = $1", alert_id)
    held, usable = (0, 0)
    if row is not None and row["project_code"] is not None:
        held, usable = await access.project_rights(api.db, who, int(row["project_code"]))
    if row is None or not (who.admin or held):
        raise not_found(f"alert {alert_id}")
    if not (who.admin or usable & access.WRITE):
        raise ApiError(403, f"you need the WRITE right on the project of alert {alert_id}")
    resent = await api.db.fetchrow(
        "UPDATE alert SET alert_status = 0, attempts = 0, log = $2, next_attempt_time = now(), update_time = now()"
        " WHERE id = $1 AND alert_status <> 0 RETURNING id",
        alert_id,
        json.dumps({"delivered": [], "errors": {}}),
    )
    if resent is None:
        raise ApiError(409, f"alert {alert_id} is still being delivered (WAIT_EXECUTION)")
    return {"id": alert_id, "status": STATUS[0]}


ROUTES = [
    Route("GET", "/api/v1/alert-groups", list_groups, "Alert groups and their senders", "alerts", query=PAGE,
          response=_GROUP, rule=access.SIGNED_IN),
    Route("POST", "/api/v1/alert-groups", create_group, "Create an alert group with its senders", "alerts",
          body=_GROUP_IN, response=_GROUP, status=201, rule=access.ADMIN),
    Route("GET", "/api/v1/alert-groups/{id}", get_group, "An alert group", "alerts", response=_GROUP,
          rule=access.read("alert_group", "path.id")),
    Route("PATCH", "/api/v1/alert-groups/{id}", update_group, "Edit an alert group and its senders", "alerts",
          body={**_GROUP_IN, "required": []}, response=_GROUP, rule=access.ADMIN),
    Route("POST", "/api/v1/alert-groups/{id}/test", test_group, "Send a test alert to each sender of the group now",
          "alerts", response={"type": "object"}, rule=access.ADMIN),
    Route("DELETE", "/api/v1/alert-groups/{id}", delete_group, "Delete an alert group", "alerts",
          response={"type": "object", "properties": {"deleted": {"type": "integer"}}}, rule=access.ADMIN),
    Route("GET", "/api/v1/alerts", list_alerts, "Alerts, newest first, with their delivery state", "alerts",
          query=(Param("instance", int, "workflow instance id"),
                 Param("status", str, "delivery status", choices=STATUS), *PAGE),
          response=_ALERT, rule=access.SIGNED_IN),
    Route("POST", "/api/v1/alerts/{id}/resend", resend_alert, "Deliver a finished alert again to every sender "
          "(admins, or WRITE on the alert's project)", "alerts",
          response={"type": "object", "properties": {"id": {"type": "integer"}, "status": {"enum": list(STATUS)}}},
          rule=access.SIGNED_IN),
]  # fmt: skip
