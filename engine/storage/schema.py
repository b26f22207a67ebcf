"""Apply schema.sql idempotently (``porpoise db init``; every node also does it at start-up, which costs
no DDL once the database holds the same text)."""

from __future__ import annotations

import hashlib
import importlib.resources
from pathlib import Path

import asyncpg

from engine import logs
from engine.errors import SchemaError, StorageError

log = logs.get(__name__)

#: Serialises concurrent initialisations (three masters starting at once).
_LOCK_KEY = 0x706F72706F697365  # "porpoise"


def schema_path() -> Path:
    """engine/storage/schema.sql, package data (importlib.resources: the same in a checkout and a wheel)."""
    return Path(str(importlib.resources.files("engine.storage").joinpath("schema.sql")))


async def apply_schema(dsn: str, timeout: float = 30) -> int:
    """Apply schema.sql in one transaction under an advisory lock; return the schema version. A database
    that already holds this exact text (its SHA-256 in ``schema_digest``) gets no DDL: a node restarting
    next to running masters takes no lock on their tables."""
    sql = schema_path().read_text()
    digest = hashlib.sha256(sql.encode()).hexdigest()
    try:
        conn = await asyncpg.connect(dsn, timeout=timeout)
    except (OSError, asyncpg.PostgresError) as exc:
        raise StorageError(f"cannot connect to the database: {exc}") from exc
    try:
        if not await _applied(conn, digest):
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock($1)", _LOCK_KEY)
                if not await _applied(conn, digest):  # another node may have applied it meanwhile
                    try:
                        await conn.execute(sql)
                    except asyncpg.PostgresError as exc:
                        raise SchemaError(f"schema.sql failed to apply: {exc}") from exc
                    await conn.execute("INSERT INTO schema_digest (digest) VALUES ($1) ON CONFLICT DO NOTHING", digest)
        version = int(await conn.fetchval("SELECT max(version) FROM schema_version"))
    finally:
        await conn.close()
    log.info("schema applied", version=version)
    return version


async def _applied(conn: asyncpg.Connection, digest: str) -> bool:
    """Whether this exact schema text was applied already (False on a database without the table)."""
    exists = await conn.fetchval("SELECT to_regclass('schema_digest') IS NOT NULL")
    return bool(exists) and bool(await conn.fetchval("SELECT 1 FROM schema_digest WHERE digest = $1", digest))
