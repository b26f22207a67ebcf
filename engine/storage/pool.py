"""Open the metadata database pool the way every long-running process does: connect, retrying with backoff
while PostgreSQL is down (a node started before its database waits instead of crashing), then check that
the database holds this code's schema version (no DDL: ``porpoise db upgrade`` changes the schema)."""

from __future__ import annotations

import asyncio
import contextlib

import asyncpg

from engine import logs
from engine.config import DatabaseConfig
from engine.errors import SchemaError, StorageError
from engine.storage.schema import check_schema

log = logs.get(__name__)


async def connect_pool(db: DatabaseConfig, stop: asyncio.Event) -> asyncpg.Pool:
    """Open the pool and check the schema version; retry until PostgreSQL answers or ``stop`` is set
    (StorageError). A schema this code does not know raises SchemaMismatch at once."""
    delay = 0.2
    while True:
        try:
            pool = await asyncpg.create_pool(
                db.url(),
                min_size=db.pool_min,
                max_size=db.pool_max,
                timeout=db.connect_timeout,
                command_timeout=db.command_timeout,
            )
            try:
                async with pool.acquire() as conn:
                    await check_schema(conn)
            except BaseException:
                await pool.close()
                raise
            return pool
        except (StorageError, OSError, asyncpg.PostgresError) as exc:
            if isinstance(exc, SchemaError):
                raise
            log.warning("database unavailable; retrying", error=str(exc), retry_in=delay)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), delay)
            if stop.is_set():
                raise StorageError("stopped before the database became available") from exc
            delay = min(delay * 2, 5.0)
