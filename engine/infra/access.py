"""The CLI's way into a local stack: an admin API token and the API's URL in ``<run_dir>/client.json``.

Shared by ``make run`` (standalone) and ``make cluster``: the token is kept while it stays valid, so the
client file (and any shell that exported it) keeps working across restarts of the same run directory.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import secrets
from pathlib import Path

import asyncpg

from engine.accounts.passwords import hash_password, verify_password
from engine.accounts.tokens import ADMIN, MAX_DAYS, create_token, ensure_user, token_hash, valid_token
from engine.client import write_client_file


def previous_token(client_path: Path) -> str:
    with contextlib.suppress(OSError, ValueError):
        return str(json.loads(client_path.read_text()).get("token", ""))
    return ""


async def ensure_client_file(conn: asyncpg.Connection, client_path: Path, api_url: str, name: str) -> None:
    """Write ``client_path`` with ``api_url`` and an admin token: the one it already holds when that is
    still valid, else a new one (named ``name``) of the ``admin`` user, made when missing (without a
    password: it signs in with this token; ``porpoise user passwd admin`` sets one). Runs before any node
    starts (asyncio.run in the launcher's thread): blocking file I/O is fine here."""
    token = previous_token(client_path)
    if not token or await valid_token(conn, token_hash(token)) is None:
        user_id = await ensure_user(conn)
        expires = dt.datetime.now(dt.UTC) + dt.timedelta(days=MAX_DAYS)  # made again once it has expired
        _, token = await create_token(conn, user_id, name, expires)
    write_client_file(client_path, api_url, token)


#: the standalone's first password of ``admin``, beside client.json in its run directory
FIRST_PASSWORD_FILE = "admin-password"


def _write_private(path: Path, text: str) -> None:
    """``text`` as the whole of ``path``, mode 0600 whatever file was there (a new file renamed over it:
    an existing file's own mode, say 0644, would be kept by an open with O_TRUNC)."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text + "\n")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _read_kept(path: Path) -> str | None:
    with contextlib.suppress(OSError):
        return path.read_text(encoding="utf-8").strip()
    return None


def _forget(path: Path) -> None:
    path.unlink(missing_ok=True)


async def ensure_first_password(conn: asyncpg.Connection, password_path: Path) -> str | None:
    """The first password of the ``admin`` user, for the standalone's banner: set (random) and written to
    ``password_path`` (mode 0600) when ``admin`` has none; kept while it still signs in; None once the user
    changed it (the file is then removed). Blocking file I/O: runs before any node starts."""
    await ensure_user(conn)
    stored = await conn.fetchval("SELECT password_hash FROM users WHERE user_name = $1", ADMIN)
    if stored is None:
        password = secrets.token_urlsafe(12)
        _write_private(password_path, password)
        done = await conn.execute(
            "UPDATE users SET password_hash = $2, update_time = now() WHERE user_name = $1 AND password_hash IS NULL",
            ADMIN,
            await hash_password(password),
        )
        if done == "UPDATE 1":
            return password
        _forget(password_path)  # a password was set meanwhile (another start, or the user): not this one
        return None
    kept = _read_kept(password_path)
    if kept and await verify_password(stored, kept):
        return kept
    _forget(password_path)
    return None
