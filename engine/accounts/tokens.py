"""API tokens as rows: only a token's SHA-256 is stored; the token itself is shown once, when created. The
routes that manage them, and what a token lets its holder do, are engine/api/tokens.py's."""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets

import asyncpg

from engine.states import UserState, UserType

ADMIN = "admin"
DEFAULT_DAYS = 90
MAX_DAYS = 365


def new_token() -> str:
    return "pp_" + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


async def ensure_user(conn: asyncpg.Connection, name: str = ADMIN, admin: bool = True) -> int:
    """The id of user ``name``, created (an admin by default) when missing."""
    return int(
        await conn.fetchval(
            "INSERT INTO users (user_name, user_type) VALUES ($1, $2)"
            " ON CONFLICT (user_name) DO UPDATE SET user_name = EXCLUDED.user_name RETURNING id",
            name,
            int(UserType.ADMIN if admin else UserType.GENERAL),
        )
    )


async def create_token(
    conn: asyncpg.Connection,
    user_id: int,
    name: str,
    expires: dt.datetime | None = None,
    perm: int | None = None,
    created_by: int | None = None,
    parent: int | None = None,
) -> tuple[int, str]:
    token = new_token()
    token_id = await conn.fetchval(
        "INSERT INTO access_token (user_id, name, token_hash, expire_time, perm, created_by, parent_id)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
        user_id,
        name,
        token_hash(token),
        expires,
        perm,
        created_by,
        parent,
    )
    return int(token_id), token


async def valid_token(db: asyncpg.Pool | asyncpg.Connection, digest: str) -> asyncpg.Record | None:
    """The token (by its hash) with its user, if it exists, has not expired and its user is enabled;
    ``valid_for``: the seconds until it expires (None: never)."""
    return await db.fetchrow(
        "SELECT t.id, t.perm, u.id AS user_id, u.user_name, u.user_type,"
        " extract(epoch FROM t.expire_time - now())::float8 AS valid_for FROM access_token t"
        " JOIN users u ON u.id = t.user_id"
        " WHERE t.token_hash = $1 AND (t.expire_time IS NULL OR t.expire_time > now())"
        f" AND u.state = {int(UserState.ENABLED)}",
        digest,
    )


async def mark_used(db: asyncpg.Pool | asyncpg.Connection, token_id: int) -> None:
    """Note when a token was last used (to the minute: one write per token and minute at most)."""
    await db.execute(
        "UPDATE access_token SET last_used_time = now() WHERE id = $1"
        " AND (last_used_time IS NULL OR last_used_time < now() - interval '1 minute')",
        token_id,
    )
