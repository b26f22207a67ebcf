"""Users: admins create, change, disable and delete them; everyone reads and changes their own password.

A user is an admin (``user_type`` 0) or a general user (1), enabled (``state`` 1) or disabled (0: its tokens
and sessions stop working at once, within the API's token cache time). Passwords are argon2id hashes.
"""

from __future__ import annotations

from typing import Any

import asyncpg

from engine.accounts.passwords import hash_password, password_problem, verify_password
from engine.api import access
from engine.api.access import Principal
from engine.api.routing import PAGE, ApiError, Call, Route, not_found, page
from engine.states import UserState, UserType

_NAME = {"type": "string", "minLength": 1, "maxLength": 64, "pattern": "^[A-Za-z0-9_.@-]+$"}
_PASSWORD = {"type": "string", "minLength": 1, "maxLength": 1024}
_CREATE = {
    "type": "object",
    "required": ["name", "password"],
    "additionalProperties": False,
    "properties": {
        "name": _NAME,
        "password": _PASSWORD,
        "admin": {"type": "boolean"},
        "email": {"type": "string", "maxLength": 255},
    },
}
_UPDATE = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "password": _PASSWORD,
        "admin": {"type": "boolean"},
        "enabled": {"type": "boolean"},
        "email": {"type": ["string", "null"], "maxLength": 255},
    },
}
_PASSWD = {
    "type": "object",
    "required": ["old_password", "new_password"],
    "additionalProperties": False,
    "properties": {"old_password": _PASSWORD, "new_password": _PASSWORD},
}
_USER = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": "string"},
        "admin": {"type": "boolean"},
        "enabled": {"type": "boolean"},
        "email": {"type": ["string", "null"]},
        "auth_source": {"enum": ["local", "ldap"], "description": "where the user signs in"},
    },
}
_ME = {
    "type": "object",
    "required": ["id", "name", "admin", "via", "projects"],
    "properties": {
        **_USER["properties"],
        "admin": {"type": "boolean", "description": "admin rights on this call (an admin's reduced token: false)"},
        "via": {"enum": ["token", "session"]},
        "token_perms": {"type": ["array", "null"], "items": {"enum": list(access.PERM_NAMES)}},
        "projects": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["code", "name", "perms"],
                "properties": {
                    "code": {"type": "integer"},
                    "name": {"type": "string"},
                    "perms": {
                        "type": "array",
                        "items": {"enum": list(access.PERM_NAMES)},
                        "description": "the rights this call may use on the project",
                    },
                },
            },
        },
    },
}
_COLUMNS = "id, user_name, user_type, state, email, create_time, auth_source"


def user_out(row: Any) -> dict[str, Any]:
    return {
        "id": row["id"],
        "name": row["user_name"],
        "admin": row["user_type"] == UserType.ADMIN,
        "auth_source": row["auth_source"],
        "enabled": row["state"] == UserState.ENABLED,
        "email": row["email"],
        "create_time": row["create_time"],
    }


def _checked(password: str, field: str) -> str:
    problem = password_problem(password)
    if problem:
        raise ApiError(400, problem, field)
    return password


async def create_user(
    conn: asyncpg.Connection, name: str, password: str, admin: bool = False, email: str | None = None
) -> int:
    """Insert a user with an argon2id password hash; ApiError 409 when the name is taken."""
    digest = await hash_password(_checked(password, "password"))
    user_id = await conn.fetchval(
        "INSERT INTO users (user_name, password_hash, user_type, email) VALUES ($1, $2, $3, $4)"
        " ON CONFLICT (user_name) DO NOTHING RETURNING id",
        name,
        digest,
        0 if admin else 1,
        email,
    )
    if user_id is None:
        raise ApiError(409, f"user {name!r} already exists", "name")
    return int(user_id)


async def _row(db: Any, name: str) -> Any:
    row = await db.fetchrow(f"SELECT {_COLUMNS} FROM users WHERE user_name = $1", name)
    if row is None:
        raise not_found(f"user {name!r}")
    return row


async def list_users(api: Any, call: Call) -> dict[str, Any]:
    total = await api.db.fetchval("SELECT count(*) FROM users")
    rows = await api.db.fetch(
        f"SELECT {_COLUMNS} FROM users ORDER BY user_name LIMIT $1 OFFSET $2", call.query["size"], call.offset
    )
    return page([user_out(r) for r in rows], total, call)


async def post_user(api: Any, call: Call) -> dict[str, Any]:
    body = call.body
    async with api.db.acquire() as conn:
        await create_user(conn, body["name"], body["password"], body.get("admin", False), body.get("email"))
        return user_out(await _row(conn, body["name"]))


async def get_user(api: Any, call: Call) -> dict[str, Any]:
    return user_out(await _row(api.db, call.path["name"]))


async def _last_admin(conn: asyncpg.Connection, user_id: int) -> bool:
    return not await conn.fetchval(
        f"SELECT 1 FROM users WHERE user_type = {int(UserType.ADMIN)} AND state = {int(UserState.ENABLED)}"
        " AND id <> $1 LIMIT 1",
        user_id,
    )


async def put_user(api: Any, call: Call) -> dict[str, Any]:
    body = call.body
    async with api.db.acquire() as conn, conn.transaction():
        row = await _row(conn, call.path["name"])
        demoted = body.get("admin") is False or body.get("enabled") is False
        if demoted and row["user_type"] == UserType.ADMIN and await _last_admin(conn, row["id"]):
            raise ApiError(409, "this is the last enabled admin; make another admin first")
        sets: dict[str, Any] = {}
        if "password" in body:
            sets["password_hash"] = await hash_password(_checked(body["password"], "password"))
        if "admin" in body:
            sets["user_type"] = UserType.ADMIN if body["admin"] else UserType.GENERAL
        if "enabled" in body:
            sets["state"] = UserState.ENABLED if body["enabled"] else UserState.DISABLED
        if "email" in body:
            sets["email"] = body["email"]
        if sets:
            assign = ", ".join(f"{c} = ${i}" for i, c in enumerate(sets, start=2))
            await conn.execute(
                f"UPDATE users SET {assign}, update_time = now() WHERE id = $1", row["id"], *sets.values()
            )
        if body.get("enabled") is False or "password" in body:
            await conn.execute("DELETE FROM user_session WHERE user_id = $1", row["id"])
        row = await _row(conn, call.path["name"])
    api.forget_user(row["id"])
    return user_out(row)


async def delete_user(api: Any, call: Call) -> dict[str, Any]:
    who: Principal = call.principal
    async with api.db.acquire() as conn, conn.transaction():
        row = await _row(conn, call.path["name"])
        if row["id"] == who.user_id:
            raise ApiError(409, "you cannot delete yourself")
        if row["user_type"] == UserType.ADMIN and await _last_admin(conn, row["id"]):
            raise ApiError(409, "this is the last enabled admin; make another admin first")
        owned = [r["name"] for r in await conn.fetch("SELECT name FROM project WHERE user_id = $1", row["id"])]
        if owned:
            raise ApiError(
                409, f"user {row['user_name']!r} owns project(s) {', '.join(owned)}; delete or hand them over"
            )
        await conn.execute("DELETE FROM users WHERE id = $1", row["id"])
    api.forget_user(row["id"])
    return {"deleted": row["user_name"]}


async def _my_projects(db: Any, who: Principal) -> list[dict[str, Any]]:
    """The projects ``who`` sees, with the rights this call may use on each (a token may carry fewer)."""
    if who.is_admin:
        found = await db.fetch("SELECT code, name, $1::int AS perm FROM project ORDER BY name", access.ALL)
    else:
        found = await db.fetch(
            "SELECT p.code, p.name, CASE WHEN p.user_id = $1 THEN $2::int ELSE pu.perm | $3::int END AS perm"
            " FROM project p LEFT JOIN project_user pu ON pu.project_code = p.code AND pu.user_id = $1"
            " WHERE p.user_id = $1 OR pu.user_id IS NOT NULL ORDER BY p.name",
            who.user_id,
            access.ALL,
            access.READ,
        )
    cap = access.ALL if who.perm_cap is None else who.perm_cap
    return [{"code": r["code"], "name": r["name"], "perms": access.perm_names(int(r["perm"]) & cap)} for r in found]


async def get_me(api: Any, call: Call) -> dict[str, Any]:
    who: Principal = call.principal
    out = user_out(await _row(api.db, who.user_name))
    caps = None if who.perm_cap is None else access.perm_names(who.perm_cap)
    projects = await _my_projects(api.db, who)
    return {**out, "admin": who.admin, "via": who.via, "token_perms": caps, "projects": projects}


async def change_password(api: Any, call: Call) -> dict[str, Any]:
    who: Principal = call.principal
    if who.perm_cap is not None:
        raise ApiError(403, "a token of reduced rights cannot change the password")
    row = await api.db.fetchrow("SELECT password_hash, auth_source FROM users WHERE id = $1", who.user_id)
    if row is not None and row["auth_source"] == "ldap":
        raise ApiError(400, "this user signs in through the LDAP directory: change the password there", "new_password")
    stored = row["password_hash"] if row else None
    if not await verify_password(stored, call.body["old_password"]):
        raise ApiError(403, "the old password is wrong", "old_password")
    digest = await hash_password(_checked(call.body["new_password"], "new_password"))
    async with api.db.acquire() as conn, conn.transaction():
        await conn.execute(
            "UPDATE users SET password_hash = $2, update_time = now() WHERE id = $1", who.user_id, digest
        )
        # other browser sessions end; tokens stay (revoke them with DELETE /api/v1/tokens/{id})
        await conn.execute("DELETE FROM user_session WHERE user_id = $1", who.user_id)
    return {"changed": True}


_ONE = "/api/v1/users/{name}"
ROUTES = [
    Route("GET", "/api/v1/users", list_users, "Users (admins)", "users", query=PAGE, response=_USER,
          rule=access.ADMIN),
    Route("POST", "/api/v1/users", post_user, "Create a user (admins)", "users", body=_CREATE, response=_USER,
          status=201, rule=access.ADMIN),
    Route("GET", _ONE, get_user, "A user (admins)", "users", response=_USER, rule=access.ADMIN),
    Route("PUT", _ONE, put_user, "Change a user: password, admin, enabled, email (admins)", "users",
          body=_UPDATE, response=_USER, rule=access.ADMIN),
    Route("DELETE", _ONE, delete_user, "Delete a user owning no project (admins)", "users",
          response={"type": "object", "properties": {"deleted": {"type": "string"}}}, rule=access.ADMIN),
    Route("GET", "/api/v1/me", get_me, "Who you are signed in as, and your rights on each project you see", "users",
          response=_ME, rule=access.SIGNED_IN),
    Route("POST", "/api/v1/me/password", change_password, "Change your password (ends your browser sessions)",
          "users", body=_PASSWD, response={"type": "object"}, rule=access.SIGNED_IN),
]  # fmt: skip
