"""Open the metadata database pool the way every long-running process does: connect, retrying with backoff
while PostgreSQL is down (a node started before its database waits instead of crashing), then check that
the database holds this code's schema version (no DDL: ``porpoise db upgrade`` changes the schema). Its
connections read JSON columns as Python objects (``jsoncodec``)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

import asyncpg

from core import logs
from core.errors import SchemaError, StorageError
from engine.config import DatabaseConfig
from engine.storage.failures import DB_FAILURES
from engine.storage.jsoncodec import register_json
from engine.storage.schema import check_schema

log = logs.get(__name__)


async def _keep_session(_conn: asyncpg.Connection) -> None:
    """A released connection is given to the next user as it is (asyncpg still rolls back a transaction
    left open): no ``RESET ALL; UNLISTEN *; CLOSE ALL; pg_advisory_unlock_all()`` round trip per release."""


async def connect_pool(
    db: DatabaseConfig,
    stop: asyncio.Event,
    observe_wait: Callable[[float], None] | None = None,
    reset_sessions: bool = True,
) -> asyncpg.Pool:
    """Open the pool and check the schema version; retry until PostgreSQL answers or ``stop`` is set
    (StorageError). A schema this code does not know raises SchemaMismatch at once. ``observe_wait`` is
    told how long each acquisition of a connection waited. ``reset_sessions`` False: for a caller that
    never changes a pooled connection's session (no SET, LISTEN, advisory lock or cursor outside a
    transaction; the master and the API server, which LISTEN on connections of their own and take advisory
    locks only for a transaction), a released connection is not reset (that was a round trip and four
    statements per use: about ten per API call)."""
    delay = 0.2
    while True:
        try:
            pool = await asyncpg.create_pool(
                db.url(),
                min_size=db.pool_min,
                max_size=db.pool_max,
                timeout=db.connect_timeout,
                command_timeout=db.command_timeout,
                **({} if reset_sessions else {"reset": _keep_session}),
                init=register_json,
            )
            try:
                async with pool.acquire() as conn:
                    await check_schema(conn)
            except BaseException:
                await pool.close()
                raise
            if observe_wait is not None:
                _time_acquisitions(pool, observe_wait)
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


def _time_acquisitions(pool: asyncpg.Pool, observe: Callable[[float], None]) -> None:
    """Time every acquisition: ``async with pool.acquire()`` and the pool's own fetch/execute all go
    through ``Pool._acquire``. asyncpg has no hook for it and its pool has slots, so the pool becomes an
    instance of a subclass that times it (tests/test_metrics.py fails if asyncpg changes this)."""

    class TimedPool(type(pool)):  # type: ignore[misc]
        __slots__ = ()

        async def _acquire(self, timeout: Any) -> Any:
            start = time.perf_counter()
            try:
                return await super()._acquire(timeout)
            finally:
                observe(time.perf_counter() - start)

    pool.__class__ = TimedPool


async def database_reachable(pool: asyncpg.Pool | None, timeout: float = 2.0) -> bool:
    """Whether a trivial query answers within ``timeout`` (readiness probes)."""
    if pool is None:
        return False
    try:
        return await asyncio.wait_for(pool.fetchval("SELECT true"), timeout) is True
    except (TimeoutError, *DB_FAILURES):
        return False
