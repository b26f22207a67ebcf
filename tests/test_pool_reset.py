"""The master's pool hands a released connection on without asyncpg's session reset (a round trip per use),
real PostgreSQL: the session is kept as it is, a transaction left open is still rolled back."""

from __future__ import annotations

import asyncpg
import pytest

from engine.storage.pool import _keep_session


@pytest.mark.parametrize("keep", [False, True])
async def test_a_released_connection_keeps_its_session_only_without_the_reset(fresh_db: str, keep: bool) -> None:
    pool = await asyncpg.create_pool(fresh_db, min_size=1, max_size=1, **({"reset": _keep_session} if keep else {}))
    try:
        async with pool.acquire() as conn:
            await conn.execute("SET application_name = 'kept'")
        assert await pool.fetchval("SHOW application_name") == ("kept" if keep else "")
        async with pool.acquire() as conn:  # a transaction left open (as a cancelled write leaves it)
            await conn.execute("BEGIN")
            await conn.execute("CREATE TEMP TABLE t (x int)")
        async with pool.acquire() as conn:
            assert not conn.is_in_transaction()
            assert await conn.fetchval("SELECT to_regclass('pg_temp.t')") is None  # rolled back
    finally:
        await pool.close()
