"""The versioned schema: which version a database holds, how it reaches this code's version, and the check
every node makes at start.

Versions are the numbered files of engine/storage/migrations/ (``NNNN_slug.sql``, contiguous from 0001);
``schema_version`` holds one row per version applied. Only ``porpoise db init|upgrade`` (and the
launchers and test fixtures, once, before any node starts) change the schema, connected as the schema
owner: an empty database gets the generated schema.sql with every version recorded, any other database
the migrations above its version, each in its own transaction, under an advisory lock. Nodes run no DDL:
they check the version at start and refuse an unknown one (:class:`SchemaMismatch`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

import asyncpg

from core import logs
from core.errors import SchemaError, SchemaMismatch, StorageError
from engine.storage import roles
from engine.storage.schema_sql import schema_text

log = logs.get(__name__)

#: Serialises concurrent upgrades (three launchers, or an operator and a launcher, at once).
_LOCK_KEY = 0x706F72706F697365  # "porpoise"
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


@dataclass(frozen=True)
class Upgrade:
    """What an upgrade did: the version before (None: the database was empty) and after."""

    before: int | None
    after: int
    #: the runtime role granted its rights ("" when none was)
    granted: str = ""

    def describe(self) -> str:
        if self.before is None:
            return f"schema created at version {self.after}"
        if self.before == self.after:
            return f"schema at version {self.after}, up to date"
        return f"schema upgraded from version {self.before} to {self.after}"


@cache
def migrations() -> tuple[Migration, ...]:
    """The migrations shipped with this code, in order. Files not named ``NNNN_slug.sql`` (a helper's
    ``pending_<name>.sql`` before it is numbered) are not migrations."""
    found = []
    for entry in resources.files("engine.storage").joinpath("migrations").iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise SchemaError(f"engine/storage/migrations: versions must run 1, 2, 3 ... without gaps, found {versions}")
    return tuple(found)


def head() -> int:
    """The schema version this code is written for: its last migration."""
    return migrations()[-1].version


async def database_version(conn: asyncpg.Connection) -> int | None:
    """The version a database holds; None when it holds no Porpoise schema at all."""
    if not await conn.fetchval("SELECT to_regclass('schema_version') IS NOT NULL"):
        return None
    version = await conn.fetchval("SELECT max(version) FROM schema_version")
    return None if version is None else int(version)


async def check_schema(conn: asyncpg.Connection) -> int:
    """A node's start-up check: the database holds exactly this code's schema version (else
    :class:`SchemaMismatch`, one line saying what to do). Warns when the node's role could change the schema."""
    try:
        version = await database_version(conn)
    except asyncpg.InsufficientPrivilegeError as exc:
        raise SchemaMismatch(
            f"the node's database role may not read the schema version ({exc}): run `porpoise db upgrade`"
            " as the schema owner with database.dsn naming this role, which grants it its rights"
        ) from exc
    expected = head()
    if version is None:
        raise SchemaMismatch("the database holds no Porpoise schema: run `porpoise db init` as the schema owner")
    if version < expected:
        raise SchemaMismatch(
            f"the database schema is at version {version}, this node needs {expected}: "
            "run `porpoise db upgrade` as the schema owner"
        )
    if version > expected:
        raise SchemaMismatch(
            f"the database schema is at version {version}, newer than this node's {expected}: "
            "this node is older than the database; run the release that matches it"
        )
    powers = await roles.ddl_powers(conn)
    if powers:
        log.warning("the node's database role can change the schema (use a runtime role: docs/DEPLOY.md)",
                    role=powers)  # fmt: skip
    return version


async def upgrade(owner_dsn: str, runtime_role: str = "", timeout: float = 30, role_required: bool = True) -> Upgrade:
    """Bring the database to this code's version, connected as the schema owner (``porpoise db init``
    and ``porpoise db upgrade``); then grant ``runtime_role`` the run-time rights (roles.grant_runtime;
    a missing role is an error only when ``role_required``)."""
    try:
        conn = await asyncpg.connect(owner_dsn, timeout=timeout)
    except (OSError, asyncpg.PostgresError) as exc:
        raise StorageError(f"cannot connect to the database: {exc}") from exc
    try:
        await conn.execute("SELECT pg_advisory_lock($1)", _LOCK_KEY)
        try:
            result = await _upgrade_locked(conn)
            if runtime_role and await roles.grant_runtime(conn, runtime_role, role_required):
                result = Upgrade(result.before, result.after, runtime_role)
        finally:
            await conn.execute("SELECT pg_advisory_unlock($1)", _LOCK_KEY)
    finally:
        await conn.close()
    log.info("schema ready", before=result.before, version=result.after, granted=result.granted or None)
    return result


async def _upgrade_locked(conn: asyncpg.Connection) -> Upgrade:
    before = await database_version(conn)
    target = head()
    if before is None:
        if await conn.fetchval("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"):
            raise SchemaError(
                "the database has tables but no schema_version table: not a Porpoise database (use an empty one)"
            )
        async with conn.transaction():
            await _run(conn, schema_text(), "schema.sql")
            await conn.executemany(
                "INSERT INTO schema_version (version) VALUES ($1)", [(m.version,) for m in migrations()]
            )
        return Upgrade(None, target)
    if before > target:
        raise SchemaMismatch(
            f"the database schema is at version {before}, newer than this release's {target}: nothing to upgrade"
        )
    for migration in migrations()[before:]:
        async with conn.transaction():
            await _run(conn, migration.sql, f"migration {migration.version:04d}_{migration.name}")
            await conn.execute(
                "INSERT INTO schema_version (version) VALUES ($1) ON CONFLICT DO NOTHING", migration.version
            )
        log.info("migration applied", version=migration.version, name=migration.name)
    return Upgrade(before, target)


async def _run(conn: asyncpg.Connection, sql: str, what: str) -> None:
    try:
        await conn.execute(sql)
    except asyncpg.PostgresError as exc:
        raise SchemaError(f"{what} failed: {exc}") from exc
