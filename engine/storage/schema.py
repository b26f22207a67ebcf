"""Apply schema.sql idempotently (``porpoise db init``; every node also does it at start-up)."""

from __future__ import annotations

from pathlib import Path

import asyncpg

from engine import logs
from engine.errors import SchemaError, StorageError

log = logs.get(__name__)

#: Serialises concurrent initialisations (three masters starting at once).
_LOCK_KEY = 0x706F72706F697365  # "porpoise"


def schema_path() -> Path:
    return Path(__file__).resolve().parents[2] / "schema.sql"


async def apply_schema(dsn: str, timeout: float = 30) -> int:
    """Apply schema.sql in one transaction under an advisory lock; return the schema version."""
    sql = schema_path().read_text()
    try:
        conn = await asyncpg.connect(dsn, timeout=timeout)
    except (OSError, asyncpg.PostgresError) as exc:
        raise StorageError(f"cannot connect to the database: {exc}") from exc
    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _LOCK_KEY)
            try:
                await conn.execute(sql)
            except asyncpg.PostgresError as exc:
                raise SchemaError(f"schema.sql failed to apply: {exc}") from exc
        version = int(await conn.fetchval("SELECT max(version) FROM schema_version"))
    finally:
        await conn.close()
    log.info("schema applied", version=version)
    return version
