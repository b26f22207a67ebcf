"""``porpoise db init|upgrade|version``: the metadata schema, run as its owner (engine/storage/schema.py).

    porpoise db init [--dsn OWNER_DSN] [--runtime-role ROLE]     create the schema in an empty database
    porpoise db upgrade [--dsn OWNER_DSN] [--runtime-role ROLE]  apply the migrations it lacks
    porpoise db version [--dsn DSN]                              its version and this release's

The owner DSN is ``--dsn``, else ``database.owner_dsn``, else the runtime DSN. init and upgrade grant the
runtime role (``--runtime-role``, else the user of the runtime DSN, ``database.dsn`` / ``database.user``)
its rights: rows only, no DDL.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import asyncpg

from core.errors import StorageError
from engine.config import Config
from engine.storage import roles, schema


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    db = sub.add_parser("db", help="metadata database schema (run as the schema owner)")
    db_sub = db.add_subparsers(dest="action", required=True)
    for action, text in (
        ("init", "create the schema in an empty database (an existing one is upgraded)"),
        ("upgrade", "apply the migrations the database lacks"),
        ("version", "the database's schema version and this release's"),
    ):
        p = db_sub.add_parser(action, parents=[common], help=text)
        p.add_argument("--dsn", help="PostgreSQL DSN of the schema owner (default: database.owner_dsn)")
        if action != "version":
            p.add_argument(
                "--runtime-role", help="role the nodes log in as, granted DML rights (default: database.dsn's user)"
            )


def run(args: argparse.Namespace, cfg: Config) -> int:
    dsn = args.dsn or cfg.database.owner_url()
    timeout = cfg.database.connect_timeout
    if args.action == "version":
        current = asyncio.run(_version(dsn, timeout))
        head = schema.head()
        if current is None:
            state = "none (empty database): run porpoise db init"
        elif current < head:
            state = f"{current}: run porpoise db upgrade"
        else:
            state = f"{current}: up to date" if current == head else f"{current}: newer than this release"
        print(f"database schema version {state} (this release: {head})")
        return 0
    role = args.runtime_role
    required = role is not None
    if role is None:
        role = roles.dsn_user(cfg.database.url()) or cfg.database.user
    result = asyncio.run(schema.upgrade(dsn, role, timeout, role_required=required))
    granted = f"; runtime role {result.granted} granted DML rights" if result.granted else ""
    print(result.describe() + granted)
    return 0


async def _version(dsn: str, timeout: float) -> int | None:
    try:
        conn = await asyncpg.connect(dsn, timeout=timeout)
    except (OSError, asyncpg.PostgresError) as exc:
        raise StorageError(f"cannot connect to the database: {exc}") from exc
    try:
        return await schema.database_version(conn)
    finally:
        await conn.close()
