"""Data sources SQL tasks name (PostgreSQL). Passwords and DSNs are sealed with the secrets keyring before
they are stored (engine/secretbox.py) and never returned: shown as ``***``, and a PUT that sends ``***``
back keeps the stored one (an edit form that never saw it)."""

from __future__ import annotations

import json
from typing import Any

from engine.api import access
from engine.api.routing import PAGE, ApiError, Call, Route, not_found, page, select_page
from engine.secretbox import DATASOURCE_SECRETS, MASK, SecretError, seal_params

_SECRET_KEYS = DATASOURCE_SECRETS
_PARAMS = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "host": {"type": "string"},
        "port": {"type": "integer", "minimum": 1, "maximum": 65535},
        "database": {"type": "string"},
        "user": {"type": "string"},
        "password": {"type": "string", "description": "*** keeps the stored password"},
        "dsn": {"type": "string", "description": "a full postgresql:// URL instead of the fields"},
    },
}
_PUT = {
    "type": "object",
    "required": ["params"],
    "additionalProperties": False,
    "properties": {"type": {"enum": ["POSTGRESQL"]}, "params": _PARAMS, "note": {"type": "string"}},
}
_SOURCE = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "type": {"type": "string"}, "params": {"type": "object"}},
}


def _public(row: Any) -> dict[str, Any]:
    params = row["connection_params"]
    params = json.loads(params) if isinstance(params, str) else dict(params)
    shown = {k: (MASK if k in _SECRET_KEYS else v) for k, v in params.items()}
    return {"name": row["name"], "type": row["type"], "params": shown, "note": row["note"]}


async def list_sources(api: Any, call: Call) -> dict[str, Any]:
    rows, total = await select_page(api.db, call, "datasource", {}, "name", access.granted_filter(call, "datasource"))
    return page([_public(r) for r in rows], total, call)


async def _kept_secrets(api: Any, name: str, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with each secret sent back as its mask ("***", what GET shows) replaced by the stored value:
    an edit form that never saw the password keeps it."""
    masked = [k for k in _SECRET_KEYS if params.get(k) == MASK]
    if not masked:
        return params
    stored = await api.db.fetchval("SELECT connection_params FROM datasource WHERE name = $1", name)
    old = (json.loads(stored) if isinstance(stored, str) else dict(stored)) if stored is not None else {}
    for key in masked:
        if key not in old:
            raise ApiError(400, f"no stored {key} to keep: give the {key} itself", f"params.{key}")
        params = {**params, key: old[key]}
    return params


async def put_source(api: Any, call: Call) -> dict[str, Any]:
    params = await _kept_secrets(api, call.path["name"], call.body["params"])
    try:
        params = seal_params(api.keyring, params, DATASOURCE_SECRETS, "datasource")
    except SecretError as exc:
        raise ApiError(503, str(exc), "params") from None
    row = await api.db.fetchrow(
        "INSERT INTO datasource (name, type, connection_params, note, user_id) VALUES ($1, $2, $3::jsonb, $4, $5)"
        " ON CONFLICT (name) DO UPDATE SET type = EXCLUDED.type, connection_params = EXCLUDED.connection_params,"
        " note = EXCLUDED.note, update_time = now() RETURNING name, type, connection_params, note",
        call.path["name"],
        call.body.get("type", "POSTGRESQL"),
        json.dumps(params),
        call.body.get("note"),
        call.user_id,
    )
    return _public(row)


async def delete_source(api: Any, call: Call) -> dict[str, Any]:
    deleted = await api.db.fetchval("DELETE FROM datasource WHERE name = $1 RETURNING name", call.path["name"])
    if deleted is None:
        raise not_found(f"data source {call.path['name']!r}")
    return {"deleted": deleted}


ROUTES = [
    Route("GET", "/api/v1/datasources", list_sources, "Data sources (secrets masked)", "datasources",
          query=PAGE, response=_SOURCE, rule=access.SIGNED_IN),
    Route("PUT", "/api/v1/datasources/{name}", put_source, "Create or replace a data source", "datasources",
          body=_PUT, response=_SOURCE, rule=access.ADMIN),
    Route("DELETE", "/api/v1/datasources/{name}", delete_source, "Delete a data source", "datasources",
          response={"type": "object", "properties": {"deleted": {"type": "string"}}}, rule=access.ADMIN),
]  # fmt: skip
