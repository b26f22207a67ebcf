"""The standalone's first ``admin`` password (engine/infra/access.py): written 0600 whatever file was there,
kept while it signs in, forgotten once the user set their own."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import asyncpg

from engine.accounts.passwords import hash_password, verify_password
from engine.accounts.tokens import ADMIN
from engine.infra.access import ensure_first_password


async def test_the_first_password_is_private_kept_while_it_works_and_forgotten_once_changed(
    fresh_db: str, tmp_path: Path
) -> None:
    path = tmp_path / "first-password"
    path.write_text("left from an earlier run\n")
    path.chmod(0o644)  # a file another user could read
    conn = await asyncpg.connect(fresh_db)
    try:
        first = await ensure_first_password(conn, path)
        assert first and path.read_text().strip() == first
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        stored = await conn.fetchval("SELECT password_hash FROM users WHERE user_name = $1", ADMIN)
        assert await verify_password(stored, first)
        assert await ensure_first_password(conn, path) == first  # the next start shows the same one
        await conn.execute(
            "UPDATE users SET password_hash = $2 WHERE user_name = $1", ADMIN, await hash_password("mine-now-42")
        )
        assert await ensure_first_password(conn, path) is None and not path.exists()
        assert os.listdir(tmp_path) == []  # no temporary file left behind
    finally:
        await conn.close()
