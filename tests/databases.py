"""Databases for tests, made the way a deployment makes them: owned by the schema owner role, the schema
created by ``engine.storage.schema.upgrade`` as that owner, and the nodes (and the tests' own queries)
connected as the runtime role, which may read and write rows but not change the schema."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass

import asyncpg

from engine.infra.postgres import OWNER_ROLE, RUNTIME_ROLE, PostgresServer
from engine.storage.schema import upgrade

#: a database at this code's schema, copied by every fresh_db (CREATE DATABASE ... TEMPLATE)
TEMPLATE = "porpoise_template"


@dataclass(frozen=True)
class EmptyDb:
    """A new database without any schema: the owner's DSN (DDL) and the runtime role's (rows)."""

    name: str
    owner: str
    dsn: str


async def _admin(server: PostgresServer, sql: str) -> None:
    conn = await asyncpg.connect(server.admin_dsn())
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def migrate(server: PostgresServer, name: str) -> str:
    """Bring database ``name`` to this code's schema as the owner, grant the runtime role; its runtime DSN."""
    await upgrade(server.dsn_for(OWNER_ROLE, name), RUNTIME_ROLE)
    return server.dsn_for(RUNTIME_ROLE, name)


def prepare_server(server: PostgresServer) -> None:
    """Once per PostgreSQL server: its own ``porpoise`` database and the template at this code's schema."""

    async def run() -> None:
        await migrate(server, "porpoise")
        await _admin(server, f'DROP DATABASE IF EXISTS "{TEMPLATE}" WITH (FORCE)')
        await server.create_database(TEMPLATE)
        await migrate(server, TEMPLATE)

    asyncio.run(run())


async def create_empty(server: PostgresServer, prefix: str = "t") -> EmptyDb:
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    await server.create_database(name)
    return EmptyDb(name, server.dsn_for(OWNER_ROLE, name), server.dsn_for(RUNTIME_ROLE, name))


async def create_migrated(server: PostgresServer, prefix: str = "t") -> tuple[str, str]:
    """A new database at this code's schema (a copy of the template); (name, runtime DSN)."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    await _admin(server, f'CREATE DATABASE "{name}" TEMPLATE "{TEMPLATE}" OWNER "{OWNER_ROLE}"')
    return name, server.dsn_for(RUNTIME_ROLE, name)


async def drop(server: PostgresServer, name: str) -> None:
    await _admin(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def database_name(dsn: str) -> str:
    return dsn.rsplit("/", 1)[1]


def owner_dsn(server: PostgresServer, dsn: str) -> str:
    """The schema owner's DSN on the database ``dsn`` names (for a test's own DDL: triggers, tables)."""
    return server.dsn_for(OWNER_ROLE, database_name(dsn))
