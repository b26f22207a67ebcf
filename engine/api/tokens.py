"""API tokens. Only a token's SHA-256 is stored; the token is shown once, when created.

A token belongs to a user, expires (at most ``MAX_DAYS`` after creation when made through the API), and
carries its user's rights or fewer (``perms``; a token of reduced rights never has admin rights). A user
creates, lists and revokes their own tokens; an admin anyone's. Managing tokens needs a browser session or a
token of full rights. A token minting one for its own user is the new one's parent: the child carries the
parent's rights or fewer, expires no later than it, and is revoked with it (``access_token.parent_id``).

The tokens as rows (``create_token``, ``ensure_user``, ``valid_token``) are engine/accounts/tokens.py's: the
launchers make the first admin and its token with them, without the API.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import asyncpg

from engine.accounts.tokens import DEFAULT_DAYS, MAX_DAYS, create_token, valid_token
from engine.api import access
from engine.api.access import Principal, perm_bits, perm_names
from engine.api.routing import PAGE, ApiError, Call, Param, Route, not_found, page
from engine.states import UserType

_PERMS = {"type": "array", "items": {"enum": list(access.PERM_NAMES)}, "uniqueItems": True}
_CREATE = {
    "type": "object",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 128},
        "expires_in_days": {"type": "integer", "minimum": 1, "maximum": MAX_DAYS},
        "user": {"type": "string", "minLength": 1, "description": "whose token (admins only; default: yours)"},
        "perms": {**_PERMS, "description": "limit the token to these project rights (default: all of the user's)"},
    },
}
_TOKEN = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": "string"},
        "user": {"type": "string"},
        "perms": {"type": ["array", "null"], "items": {"type": "string"}},
        "expire_time": {"type": ["string", "null"], "format": "date-time"},
        "token": {"type": "string", "description": "only in the answer to create"},
    },
}


async def token_user(db: asyncpg.Pool | asyncpg.Connection, digest: str) -> Principal | None:
    """Who a token (by its hash) acts for, if it exists, has not expired and its user is enabled."""
    row = await valid_token(db, digest)
    if row is None:
        return None
    return Principal(
        int(row["user_id"]), row["user_name"], row["user_type"] == UserType.ADMIN, row["perm"], "token", row["id"],
        row["valid_for"],
    )  # fmt: skip


def _out(row: Any) -> dict[str, Any]:
    return {
        "id": row["id"],
        "name": row["name"],
        "user": row["user_name"],
        "perms": None if row["perm"] is None else perm_names(row["perm"]),
        "expire_time": row["expire_time"],
        "create_time": row["create_time"],
        "last_used_time": row["last_used_time"],
    }


async def _user_id(api: Any, who: Principal, name: str | None) -> int:
    """The user a token call is about: the caller, or (admins only) the user named. Only a session or a
    token of full rights manages tokens."""
    if who.perm_cap is not None:
        raise ApiError(403, "managing tokens needs a signed-in session or a token of full rights")
    if name is None or name == who.user_name:
        return who.user_id
    if not who.admin:
        raise ApiError(403, "only an admin may manage another user's tokens", "user")
    user_id = await api.db.fetchval("SELECT id FROM users WHERE user_name = $1", name)
    if user_id is None:
        raise ApiError(404, f"user {name!r} does not exist", "user")
    return int(user_id)


async def list_tokens(api: Any, call: Call) -> dict[str, Any]:
    user_id = await _user_id(api, call.principal, call.query["user"])
    total = await api.db.fetchval("SELECT count(*) FROM access_token WHERE user_id = $1", user_id)
    rows = await api.db.fetch(
        "SELECT t.id, t.name, t.perm, t.expire_time, t.create_time, t.last_used_time, u.user_name FROM access_token t"
        " JOIN users u ON u.id = t.user_id WHERE t.user_id = $1 ORDER BY t.id LIMIT $2 OFFSET $3",
        user_id,
        call.query["size"],
        call.offset,
    )
    return page([_out(r) for r in rows], total, call)


async def post_token(api: Any, call: Call) -> dict[str, Any]:
    who: Principal = call.principal
    user_id = await _user_id(api, who, call.body.get("user"))
    # as with grants, any right implies seeing the project (READ)
    perm = perm_bits(call.body["perms"]) | access.READ if "perms" in call.body else None
    # a token of reduced rights mints only tokens within them
    if who.perm_cap is not None and (perm is None or perm & ~who.perm_cap):
        raise ApiError(403, f"this token carries only {perm_names(who.perm_cap)}; ask for no more", "perms")
    days = call.body.get("expires_in_days", DEFAULT_DAYS)
    expires = dt.datetime.now(dt.UTC) + dt.timedelta(days=days)
    # a token minting for its own user: the new one is its child, expiring no later than it
    parent = who.token_id if who.via == "token" and user_id == who.user_id else None
    if parent is not None:
        limit = await api.db.fetchval("SELECT expire_time FROM access_token WHERE id = $1", parent)
        if limit is not None and expires > limit:
            if "expires_in_days" in call.body:
                raise ApiError(400, f"must not outlast the token making it (it expires {limit.isoformat()})",
                               "expires_in_days")  # fmt: skip
            expires = limit
    async with api.db.acquire() as conn:
        token_id, token = await create_token(conn, user_id, call.body["name"], expires, perm, who.user_id, parent)
        user = await conn.fetchval("SELECT user_name FROM users WHERE id = $1", user_id)
    perms = None if perm is None else perm_names(perm)
    return {"id": token_id, "name": call.body["name"], "user": user, "perms": perms, "expire_time": expires,
            "token": token}  # fmt: skip


#: a token and every token it minted, transitively
_FAMILY = (
    "WITH RECURSIVE family AS (SELECT id FROM access_token WHERE id = $1 AND (user_id = $2 OR $3)"
    " UNION SELECT t.id FROM access_token t JOIN family f ON t.parent_id = f.id)"
    " DELETE FROM access_token WHERE id IN (SELECT id FROM family) RETURNING id, token_hash"
)


async def delete_token(api: Any, call: Call) -> dict[str, Any]:
    """Revoke a token and the tokens it minted (each forgotten by this server's cache at once)."""
    who: Principal = call.principal
    await _user_id(api, who, None)
    token_id = call.path_int("id")
    rows = await api.db.fetch(_FAMILY, token_id, who.user_id, who.admin)
    if not rows:
        raise not_found(f"token {call.path['id']}")
    for row in rows:
        api.forget_token(row["token_hash"])
    return {"deleted": token_id, "revoked": sorted(int(r["id"]) for r in rows)}


ROUTES = [
    Route("GET", "/api/v1/tokens", list_tokens, "Your API tokens (without the secrets); admins: ?user=", "tokens",
          query=(Param("user", str, "whose tokens (admins only)"), *PAGE), response=_TOKEN, rule=access.SIGNED_IN),
    Route("POST", "/api/v1/tokens", post_token, "Create a token; the answer is the only time it is shown",
          "tokens", body=_CREATE, response=_TOKEN, status=201, rule=access.SIGNED_IN),
    Route("DELETE", "/api/v1/tokens/{id}", delete_token, "Revoke a token (yours; admins: anyone's)", "tokens",
          response={"type": "object", "properties": {"deleted": {"type": "integer"}, "revoked": {
              "type": "array", "items": {"type": "integer"}, "description": "it and the tokens it minted"}}},
          rule=access.SIGNED_IN),
]  # fmt: skip
