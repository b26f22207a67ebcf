"""Password login for browsers: ``POST /api/v1/login`` sets an HttpOnly, SameSite=Strict session cookie and
answers a CSRF token; a call authenticated by the cookie that changes something (any method but GET / HEAD /
OPTIONS) must repeat the CSRF token in the ``X-CSRF-Token`` header. Scripts use Bearer tokens instead.

Throttling: after ``api.login_max_failures`` failed logins for one user name, or ``api.login_max_failures_per_address``
from one client address, within ``api.login_window_seconds``, logins are refused with a 429 (Retry-After) until
the window has moved on. A wrong user name and a wrong password get the same answer, after the same work.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import secrets
from typing import Any

import asyncpg
from aiohttp import web

from core import logs
from engine.accounts.passwords import verify_password
from engine.api import access
from engine.api.access import Principal
from engine.api.directory import DirectoryUnavailable, DirectoryUser, grants_of
from engine.api.routing import AUDIT_USER, PRINCIPAL, ApiError, Call, Route, json_response
from engine.states import UserState, UserType

log = logs.get(__name__)

COOKIE = "porpoise_session"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
_LOGIN = {
    "type": "object",
    "required": ["user", "password"],
    "additionalProperties": False,
    "properties": {"user": {"type": "string", "minLength": 1, "maxLength": 64},
                   "password": {"type": "string", "minLength": 1, "maxLength": 1024}},
}  # fmt: skip
_SESSION = {
    "type": "object",
    "properties": {
        "user": {"type": "string"},
        "admin": {"type": "boolean"},
        "csrf_token": {"type": "string", "description": "send it as X-CSRF-Token on calls that change something"},
        "expire_time": {"type": "string", "format": "date-time"},
    },
}


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def client_address(request: web.Request) -> str:
    return (request.remote or "unknown")[:64]


async def session_user(db: asyncpg.Pool, session: str) -> tuple[Principal, str] | None:
    """The user of a live session cookie and the hash of its CSRF token."""
    row = await db.fetchrow(
        "SELECT s.csrf_hash, u.id, u.user_name, u.user_type FROM user_session s JOIN users u ON u.id = s.user_id"
        f" WHERE s.session_hash = $1 AND s.expire_time > now() AND u.state = {int(UserState.ENABLED)}",
        _digest(session),
    )
    if row is None:
        return None
    return Principal(int(row["id"]), row["user_name"], row["user_type"] == UserType.ADMIN, None, "session"), row[
        "csrf_hash"
    ]


def csrf_ok(expected_hash: str, header: str | None) -> bool:
    return bool(header) and hmac.compare_digest(_digest(header or ""), expected_hash)


async def _throttled(api: Any, conn: asyncpg.Connection, user: str, address: str) -> float | None:
    """Seconds to wait when this user name or address failed too often within the window, else None."""
    cfg = api.cfg.api
    row = await conn.fetchrow(
        "SELECT count(*) FILTER (WHERE user_name = $1) AS by_user, count(*) FILTER (WHERE client_addr = $2) AS by_addr,"
        " min(attempt_time) FILTER (WHERE user_name = $1) AS first_user, min(attempt_time) AS first_any"
        " FROM login_attempt WHERE NOT success AND attempt_time > now() - make_interval(secs => $3)"
        " AND (user_name = $1 OR client_addr = $2)",
        user,
        address,
        float(cfg.login_window_seconds),
    )
    if row["by_user"] < cfg.login_max_failures and row["by_addr"] < cfg.login_max_failures_per_address:
        return None
    first = row["first_user"] if row["by_user"] >= cfg.login_max_failures else row["first_any"]
    waited = (dt.datetime.now(dt.UTC) - first).total_seconds()
    return max(1.0, cfg.login_window_seconds - waited)


async def directory_user(api: Any, user: str, found: DirectoryUser) -> asyncpg.Record | None:
    """The Porpoise user of a directory sign-in: created at the first one (unless ``ldap.not_exist_action`` is
    DENY), its e-mail, admin right (when ``ldap.admin_groups`` is set) and project grants from its groups
    brought up to date at each one."""
    cfg = api.cfg.ldap
    admin = bool(cfg.admin_groups) and bool(found.groups & set(cfg.admin_groups))
    admin_changed = False
    async with api.db.acquire() as conn, conn.transaction():
        row = await conn.fetchrow(
            "SELECT id, user_name, user_type, state, auth_source FROM users WHERE user_name = $1 FOR UPDATE", user
        )
        if row is None:
            if cfg.not_exist_action == "DENY":
                return None
            row = await conn.fetchrow(
                "INSERT INTO users (user_name, user_type, email, auth_source) VALUES ($1, $2, $3, 'ldap')"
                " RETURNING id, user_name, user_type, state, auth_source",
                user, 0 if admin else 1, found.email,
            )  # fmt: skip
        elif row["auth_source"] != "ldap":
            return None
        else:
            before = row["user_type"]
            row = await conn.fetchrow(
                "UPDATE users SET email = COALESCE($2, email), user_type = CASE WHEN $3 THEN $4 ELSE user_type END,"
                " update_time = now() WHERE id = $1 RETURNING id, user_name, user_type, state, auth_source",
                row["id"], found.email, bool(cfg.admin_groups), 0 if admin else 1,
            )  # fmt: skip
            admin_changed = row["user_type"] != before
        for project, perms in grants_of(cfg, found.groups).items():
            bits = sum(access.PERM_NAMES[p] for p in perms)
            await conn.execute(
                "INSERT INTO project_user (project_code, user_id, perm) SELECT code, $2, $3 FROM project"
                " WHERE name = $1 ON CONFLICT (project_code, user_id) DO UPDATE SET perm = EXCLUDED.perm,"
                " update_time = now()",
                project, row["id"], bits,
            )  # fmt: skip
    if admin_changed:  # committed: the user's tokens this server remembers carry the old right
        api.forget_user(row["id"])
    return row


#: another user whose name a directory would take for this one (LDAP compares names without case or outer spaces)
_LOOKALIKE = "SELECT 1 FROM users WHERE lower(btrim(user_name)) = lower(btrim($1)) AND user_name <> $1 LIMIT 1"


async def login(api: Any, call: Call) -> web.Response:
    user, password = call.body["user"], call.body["password"]
    call.request[AUDIT_USER] = user[:64]
    address = client_address(call.request)
    # atomic: under locks on the user name and the address, the attempt is counted (as failed until the
    # password proves right) before the password is checked, so concurrent attempts cannot all slip past
    async with api.db.acquire() as conn, conn.transaction():
        await conn.execute(
            "SELECT pg_advisory_xact_lock(hashtext('porpoise-login-user:' || $1)),"
            " pg_advisory_xact_lock(hashtext('porpoise-login-addr:' || $2))",
            user[:64],
            address,
        )
        wait = await _throttled(api, conn, user[:64], address)
        if wait is not None:
            raise ApiError(429, f"too many failed logins; retry in {int(wait) + 1} s", retry_after=int(wait) + 1)
        attempt = await conn.fetchval(
            "INSERT INTO login_attempt (user_name, client_addr, success) VALUES ($1, $2, false) RETURNING id",
            user[:64],
            address,
        )
    row = await api.db.fetchrow(
        "SELECT id, user_name, user_type, state, password_hash, auth_source FROM users WHERE user_name = $1", user
    )
    if api.directory is not None and (row is None or row["auth_source"] == "ldap"):
        # the directory's users sign in there; local users (the first admin among them) never do
        if row is None and (user != user.strip() or await api.db.fetchval(_LOOKALIKE, user)):
            # the directory matches names without case and outer spaces: "Admin " would pass its check for an
            # entry "admin" and become a new user named like another (one person, one user)
            raise ApiError(401, "wrong user name or password (or the user is disabled)")
        try:
            found = await api.directory.authenticate(user, password)
        except DirectoryUnavailable as exc:
            log.warning("sign-in directory unavailable", error=str(exc))
            raise ApiError(
                503, "the sign-in directory is unavailable; try again later (local users can sign in)"
            ) from None
        row = await directory_user(api, user, found) if found is not None else None
        good = row is not None
    else:
        good = await verify_password(row["password_hash"] if row else None, password)
    good = good and row is not None and row["state"] == UserState.ENABLED
    if good:
        await api.db.execute("UPDATE login_attempt SET success = true WHERE id = $1", attempt)
    if not good or row is None:
        raise ApiError(401, "wrong user name or password (or the user is disabled)")
    # housekeeping at login pace: ended sessions and attempts too old to count for throttling
    await api.db.execute("DELETE FROM user_session WHERE expire_time < now()")
    await api.db.execute(
        "DELETE FROM login_attempt WHERE attempt_time < now() - make_interval(secs => $1)",
        max(float(api.cfg.api.login_window_seconds), 86400.0),
    )
    session, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    expires = dt.datetime.now(dt.UTC) + dt.timedelta(hours=api.cfg.api.session_hours)
    await api.db.execute(
        "INSERT INTO user_session (user_id, session_hash, csrf_hash, client_addr, expire_time)"
        " VALUES ($1, $2, $3, $4, $5)",
        row["id"],
        _digest(session),
        _digest(csrf),
        address,
        expires,
    )
    call.request[PRINCIPAL] = Principal(
        int(row["id"]), row["user_name"], row["user_type"] == UserType.ADMIN, None, "session"
    )
    answer = {
        "user": row["user_name"],
        "admin": row["user_type"] == UserType.ADMIN,
        "csrf_token": csrf,
        "expire_time": expires,
    }
    response = json_response(answer)
    response.set_cookie(
        COOKIE,
        session,
        max_age=int(api.cfg.api.session_hours * 3600),
        path="/",
        httponly=True,
        samesite="Strict",
        # always with TLS on; behind a TLS proxy (plain HTTP here) by api.session_cookie_secure
        secure=api.cfg.api.session_cookie_secure or bool(api.cfg.api.tls_cert),
    )
    return response


async def logout(api: Any, call: Call) -> web.Response:
    session = call.request.cookies.get(COOKIE)
    if session:
        await api.db.execute("DELETE FROM user_session WHERE session_hash = $1", _digest(session))
    response = json_response({"signed_out": True})
    response.del_cookie(COOKIE, path="/")
    return response


ROUTES = [
    Route("POST", "/api/v1/login", login, "Sign in with a password: session cookie + CSRF token (browsers)",
          "users", body=_LOGIN, response=_SESSION, auth=False, rule=access.PUBLIC),
    Route("POST", "/api/v1/logout", logout, "End this browser session", "users", response={"type": "object"},
          rule=access.SIGNED_IN),
]  # fmt: skip
