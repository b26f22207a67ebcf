"""The CLI's way into a local stack: an admin API token and the API's URL in ``<run_dir>/client.json``.

Shared by ``make run`` (standalone) and ``make cluster``: the token is kept while it stays valid, so the
client file (and any shell that exported it) keeps working across restarts of the same run directory.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from pathlib import Path

import asyncpg

from engine.api.tokens import MAX_DAYS, create_token, ensure_user, token_hash, token_user
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
    if not token or await token_user(conn, token_hash(token)) is None:
        user_id = await ensure_user(conn)
        expires = dt.datetime.now(dt.UTC) + dt.timedelta(days=MAX_DAYS)  # made again once it has expired
        _, token = await create_token(conn, user_id, name, expires)
    write_client_file(client_path, api_url, token)
