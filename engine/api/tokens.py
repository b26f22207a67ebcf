"""API tokens. Only a token's SHA-256 is stored; the token is shown once, when created.

``ensure_admin_token`` is what the standalone launcher calls to create the first token for the CLI.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
from typing import Any

import asyncpg

from engine.api.routing import PAGE, Call, Route, not_found, page

ADMIN = "admin"
_CREATE = {
    "type": "object",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 128},
        "expires_in_days": {"type": "integer", "minimum": 1, "maximum": 3650},
    },
}
_TOKEN = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": "string"},
        "expire_time": {"type": ["string", "null"], "format": "date-time"},
        "token": {"type": "string", "description": "only in the answer to create"},
    },
}


def new_token() -> str:
    return "pp_" + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


async def ensure_user(conn: asyncpg.Connection, name: str = ADMIN) -> int:
    return int(
        await conn.fetchval(
            "INSERT INTO users (user_name, user_type) VALUES ($1, 0)"
            " ON CONFLICT (user_name) DO UPDATE SET user_name = EXCLUDED.user_name RETURNING id",
            name,
        )
    )


async def create_token(
    conn: asyncpg.Connection, user_id: int, name: str, expires: dt.datetime | None = None
) -> tuple[int, str]:
    token = new_token()
    token_id = await conn.fetchval(
        "INSERT INTO access_token (user_id, name, token_hash, expire_time) VALUES ($1, $2, $3, $4) RETURNING id",
        user_id,
        name,
        token_hash(token),
        expires,
    )
    return int(token_id), token


async def token_user(db: asyncpg.Pool | asyncpg.Connection, digest: str) -> int | None:
    """The user a token (by its hash) belongs to, if it exists and has not expired."""
    user_id = await db.fetchval(
        "SELECT user_id FROM access_token WHERE token_hash = $1 AND (expire_time IS NULL OR expire_time > now())",
        digest,
    )
    return None if user_id is None else int(user_id)


async def list_tokens(api: Any, call: Call) -> dict[str, Any]:
    total = await api.db.fetchval("SELECT count(*) FROM access_token WHERE user_id = $1", call.user_id)
    rows = await api.db.fetch(
        "SELECT id, name, expire_time, create_time FROM access_token WHERE user_id = $1 ORDER BY id LIMIT $2 OFFSET $3",
        call.user_id,
        call.query["size"],
        call.offset,
    )
    return page([dict(r) for r in rows], total, call)


async def post_token(api: Any, call: Call) -> dict[str, Any]:
    days = call.body.get("expires_in_days")
    expires = dt.datetime.now(dt.UTC) + dt.timedelta(days=days) if days else None
    async with api.db.acquire() as conn:
        token_id, token = await create_token(conn, call.user_id, call.body["name"], expires)
    return {"id": token_id, "name": call.body["name"], "expire_time": expires, "token": token}


async def delete_token(api: Any, call: Call) -> dict[str, Any]:
    deleted = await api.db.fetchval(
        "DELETE FROM access_token WHERE id = $1 AND user_id = $2 RETURNING id", call.path_int("id"), call.user_id
    )
    if deleted is None:
        raise not_found(f"token {call.path['id']}")
    return {"deleted": deleted}


ROUTES = [
    Route("GET", "/api/v1/tokens", list_tokens, "Your API tokens (without the secrets)", "tokens",
          query=PAGE, response=_TOKEN),
    Route("POST", "/api/v1/tokens", post_token, "Create a token; the answer is the only time it is shown",
          "tokens", body=_CREATE, response=_TOKEN, status=201),
    Route("DELETE", "/api/v1/tokens/{id}", delete_token, "Revoke a token", "tokens",
          response={"type": "object", "properties": {"deleted": {"type": "integer"}}}),
]  # fmt: skip
