"""The schema against a real PostgreSQL: schema.sql is the one generated from the tables, an upgrade runs
once however many run it at once, nodes refuse a schema they do not know, the runtime role cannot change
the schema, and the constraints enforce the invariants they claim to."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import structlog

from core.errors import SchemaError, SchemaMismatch
from engine.infra.etcd import EtcdServer
from engine.infra.postgres import OWNER_ROLE, RUNTIME_ROLE, PostgresServer
from engine.node import EXIT_SCHEMA
from engine.storage.schema import Upgrade, check_schema, head, migrations, upgrade
from engine.storage.schema_sql import render, schema_text
from tests import databases
from tests.databases import EmptyDb
from tests.helpers import ROOT, node_env


def test_schema_sql_is_generated_from_the_tables() -> None:
    """The committed schema.sql (package data) is exactly what the tables generate."""
    assert schema_text() == render(), "schema.sql is stale: python -m engine.storage.schema_sql --write"
    check = subprocess.run([sys.executable, "-m", "engine.storage.schema_sql", "--check"], cwd=ROOT, check=False)
    assert check.returncode == 0


def test_migrations_are_numbered_without_gaps() -> None:
    assert [m.version for m in migrations()] == list(range(1, head() + 1))
    assert migrations()[0].name == "baseline"


def test_upgrade_runs_once_however_many_run_it_at_once(empty_db: EmptyDb) -> None:
    async def run() -> list[Upgrade]:
        return list(await asyncio.gather(*(upgrade(empty_db.owner, RUNTIME_ROLE) for _ in range(4))))

    results = asyncio.run(run())
    assert sorted(r.before or 0 for r in results) == [0, head(), head(), head()]
    assert {r.after for r in results} == {head()}

    async def versions() -> list[int]:
        conn = await asyncpg.connect(empty_db.dsn)
        try:
            return [r[0] for r in await conn.fetch("SELECT version FROM schema_version ORDER BY version")]
        finally:
            await conn.close()

    assert asyncio.run(versions()) == list(range(1, head() + 1))
    assert asyncio.run(upgrade(empty_db.owner)) == Upgrade(head(), head())


def test_upgrade_refuses_a_database_that_is_not_porpoise_s(empty_db: EmptyDb) -> None:
    async def run() -> None:
        conn = await asyncpg.connect(empty_db.owner)
        try:
            await conn.execute("CREATE TABLE someone_elses (id int)")
        finally:
            await conn.close()
        await upgrade(empty_db.owner)

    with pytest.raises(SchemaError, match="not a Porpoise database"):
        asyncio.run(run())


async def _set_version(owner: str, version: int) -> None:
    conn = await asyncpg.connect(owner)
    try:
        await conn.execute("DELETE FROM schema_version WHERE version > $1", version)
        await conn.execute("INSERT INTO schema_version (version) VALUES ($1) ON CONFLICT DO NOTHING", version)
    finally:
        await conn.close()


@pytest.mark.parametrize(
    ("version", "message"),
    [
        (None, "holds no Porpoise schema: run `porpoise db init`"),
        (-1, "run `porpoise db upgrade`"),
        (+1, "this node is older than the database"),
    ],
)
def test_nodes_refuse_a_schema_they_do_not_know(
    empty_db: EmptyDb, etcd_server: EtcdServer, etcd_root: str, workdir: Path, version: int | None, message: str
) -> None:
    """No DDL at start: a master and an API server against an empty, older or newer schema exit at once with
    one line saying what to do, and the exit code that says restarting will not help."""
    if version is not None:
        asyncio.run(upgrade(empty_db.owner, RUNTIME_ROLE))
        asyncio.run(_set_version(empty_db.owner, head() + version))
    env = node_env(etcd_server.endpoint, etcd_root, PORPOISE_DATABASE_DSN=empty_db.dsn, PORPOISE_LOGGING_LEVEL="error")
    for role in ("master", "api"):
        done = subprocess.run(
            [sys.executable, "-m", f"engine.{role}", "--set", f"{role}.listen_port=0"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == EXIT_SCHEMA, (role, done.returncode, done.stderr[-2000:])
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith(f"porpoise {role}: ") and message in last, last
        assert "Traceback" not in done.stderr

    async def tables() -> int:
        conn = await asyncpg.connect(empty_db.owner)
        try:
            return int(await conn.fetchval("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"))
        finally:
            await conn.close()

    if version is None:
        assert asyncio.run(tables()) == 0  # the nodes created nothing


def test_the_runtime_role_cannot_change_the_schema(fresh_db: str) -> None:
    """What the nodes log in as reads and writes rows, and every attempt at DDL is refused."""

    async def run() -> list[str]:
        conn = await asyncpg.connect(fresh_db)
        refused = []
        try:
            assert await conn.fetchval("SELECT current_user") == RUNTIME_ROLE
            assert not await conn.fetchval("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
            await conn.execute("INSERT INTO project (code, name) VALUES (1, 'p')")
            assert await conn.fetchval("SELECT nextval('definition_code_seq')") >= 1000000
            await conn.execute("UPDATE project SET description = 'd' WHERE code = 1")
            await conn.execute("DELETE FROM project WHERE code = 1")
            for ddl in (
                "CREATE TABLE intruder (id int)",
                "ALTER TABLE command ADD COLUMN intruder int",
                "DROP TABLE schedule_fire",
                "CREATE INDEX intruder_idx ON command (command_type)",
                "DROP TRIGGER command_notify ON command",
                "CREATE OR REPLACE FUNCTION porpoise_notify_command() RETURNS trigger LANGUAGE plpgsql"
                " AS $$ BEGIN RETURN NULL; END $$",
                "TRUNCATE audit_log",
                "ALTER SEQUENCE workflow_epoch_seq RESTART",
                "COMMENT ON TABLE users IS 'intruder'",
            ):
                with pytest.raises(asyncpg.InsufficientPrivilegeError):
                    await conn.execute(ddl)
                refused.append(ddl.split()[0])
        finally:
            await conn.close()
        return refused

    assert len(asyncio.run(run())) == 9


def test_a_node_s_check_takes_no_lock_next_to_running_masters(fresh_db: str) -> None:
    """A node (re)starting only reads the version: it neither waits for nor blocks the row locks running
    masters hold on the hot tables (applying DDL at start did, under load)."""

    async def run() -> int:
        busy = await asyncpg.connect(fresh_db)
        conn = await asyncpg.connect(fresh_db)
        try:
            async with busy.transaction():  # what a running master's write holds
                for table in ("command", "workflow_instance", "task_instance"):
                    await busy.execute(f"LOCK TABLE {table} IN ROW EXCLUSIVE MODE")
                return await asyncio.wait_for(check_schema(conn), 10)
        finally:
            await busy.close()
            await conn.close()

    assert asyncio.run(run()) == head()


def test_check_schema_names_the_missing_rights(empty_db: EmptyDb) -> None:
    """A runtime role never granted its rights (an upgrade run without it) gets a clear refusal."""

    async def run() -> None:
        await upgrade(empty_db.owner)  # no runtime role named: nothing granted
        conn = await asyncpg.connect(empty_db.dsn)
        try:
            await check_schema(conn)
        finally:
            await conn.close()

    with pytest.raises(SchemaMismatch, match="may not read the schema version"):
        asyncio.run(run())


async def _seed(conn: asyncpg.Connection) -> int:
    await conn.execute("INSERT INTO project (code, name) VALUES (1, 'p')")
    await conn.execute("INSERT INTO workflow_definition (code, name, project_code) VALUES (10, 'wf', 1)")
    return int(
        await conn.fetchval(
            "INSERT INTO workflow_instance (name, workflow_definition_code, workflow_definition_version,"
            " project_code, state, command_type, command_id, host, epoch)"
            " VALUES ('wf-1', 10, 1, 1, 1, 0, 500, 'm1:1', 1) RETURNING id"
        )
    )


def test_constraints_encode_the_invariants(fresh_db: str) -> None:
    async def run() -> None:
        conn = await asyncpg.connect(fresh_db)
        try:
            wi = await _seed(conn)
            # invariant 1: one command -> at most one instance
            with pytest.raises(asyncpg.UniqueViolationError):
                await conn.execute(
                    "INSERT INTO workflow_instance (name, workflow_definition_code,"
                    " workflow_definition_version, project_code, state, command_type, command_id)"
                    " VALUES ('dup', 10, 1, 1, 1, 0, 500)"
                )
            # invariant 5: one command per (schedule, fire time)
            sid = await conn.fetchval(
                "INSERT INTO schedule (workflow_definition_code, start_time, end_time, crontab)"
                " VALUES (10, now(), now() + interval '1 day', '0 * * * *') RETURNING id"
            )
            await conn.execute(
                "INSERT INTO schedule_fire (schedule_id, fire_time, command_id) VALUES ($1, 'epoch', 1)", sid
            )
            with pytest.raises(asyncpg.UniqueViolationError):
                await conn.execute(
                    "INSERT INTO schedule_fire (schedule_id, fire_time, command_id) VALUES ($1, 'epoch', 2)",
                    sid,
                )
            # invariant 3 (storage side): one current attempt per task of an instance
            insert_ti = (
                "INSERT INTO task_instance (name, task_type, task_code, task_definition_version,"
                " workflow_instance_id, state, attempt, flag) VALUES ('t', 'SHELL', 7, 1, $1, 1, $2, $3)"
            )
            await conn.execute(insert_ti, wi, 1, 1)
            with pytest.raises(asyncpg.UniqueViolationError):
                await conn.execute(insert_ti, wi, 2, 1)
            await conn.execute("UPDATE task_instance SET flag = 0 WHERE workflow_instance_id = $1", wi)
            await conn.execute(insert_ti, wi, 2, 1)
            with pytest.raises(asyncpg.UniqueViolationError):  # attempt numbers never repeat
                await conn.execute(insert_ti, wi, 2, 0)
            # task groups: sizes and slots are checked
            with pytest.raises(asyncpg.CheckViolationError):
                await conn.execute("INSERT INTO task_group (name, group_size) VALUES ('g', -1)")
        finally:
            await conn.close()

    asyncio.run(run())


def test_no_role_but_the_owner_and_the_runtime_role_connects(empty_db: EmptyDb, pg_server: PostgresServer) -> None:
    """Another role of the same server cannot connect, so it cannot LISTEN to the commands' rows either."""

    async def run() -> None:
        await upgrade(empty_db.owner, RUNTIME_ROLE)
        admin = await asyncpg.connect(pg_server.admin_dsn())
        try:
            await pg_server.ensure_role(admin, "outsider")
        finally:
            await admin.close()
        for dsn in (empty_db.owner, empty_db.dsn):
            await (await asyncpg.connect(dsn)).close()
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="permission denied for database"):
            await asyncpg.connect(pg_server.dsn_for("outsider", empty_db.name))

    asyncio.run(run())


def test_an_owner_that_cannot_revoke_connect_is_told_so(pg_server: PostgresServer) -> None:
    """The schema owner does not own the database: PUBLIC keeps CONNECT, and the upgrade says so."""

    async def run() -> list[dict[str, Any]]:
        name = f"r_{uuid.uuid4().hex[:10]}"
        admin = await asyncpg.connect(pg_server.admin_dsn())
        try:
            await pg_server.ensure_role(admin, "dbowner")
            await pg_server.ensure_role(admin, "outsider")
            await admin.execute(f'CREATE DATABASE "{name}" OWNER dbowner')
        finally:
            await admin.close()
        try:
            superuser = await asyncpg.connect(pg_server.dsn_for("porpoise", name))
            try:
                await superuser.execute(f"GRANT ALL ON SCHEMA public TO {OWNER_ROLE}")
            finally:
                await superuser.close()
            with structlog.testing.capture_logs() as captured:
                await upgrade(pg_server.dsn_for(OWNER_ROLE, name), RUNTIME_ROLE)
            await (await asyncpg.connect(pg_server.dsn_for("outsider", name))).close()  # still connects
            return [e for e in captured if e["log_level"] == "warning"]
        finally:
            await databases.drop(pg_server, name)

    (warning,) = asyncio.run(run())
    assert "every role of the server may connect" in warning["event"]
    assert warning["statement"].startswith("REVOKE CONNECT ON DATABASE")


def test_command_insert_notifies_listeners(fresh_db: str) -> None:
    async def run() -> list[str]:
        listener = await asyncpg.connect(fresh_db)
        writer = await asyncpg.connect(fresh_db)
        got: asyncio.Queue[str] = asyncio.Queue()
        try:
            await listener.add_listener("porpoise_command", lambda *args: got.put_nowait(args[2]))
            await writer.execute(
                "INSERT INTO command (command_type, workflow_definition_code) SELECT 0, g FROM generate_series(1, 50) g"
            )
            first = await asyncio.wait_for(got.get(), 5)
            return [first]
        finally:
            await listener.close()
            await writer.close()

    assert asyncio.run(run()) == ["porpoise_command"]


def test_the_launcher_s_roles(pg_server: PostgresServer) -> None:
    """The private PostgreSQL's login roles: neither the owner nor the runtime role is a superuser or may
    create roles or databases; the metadata database belongs to the owner."""

    async def run() -> tuple[list[tuple[str, bool, bool, bool]], str]:
        conn = await asyncpg.connect(pg_server.admin_dsn())
        try:
            rows = await conn.fetch(
                "SELECT rolname, rolsuper, rolcreatedb, rolcreaterole FROM pg_roles WHERE rolname = ANY($1)"
                " ORDER BY rolname",
                [OWNER_ROLE, RUNTIME_ROLE],
            )
            owner = await conn.fetchval("SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'porpoise'")
            return [tuple(r.values()) for r in rows], owner
        finally:
            await conn.close()

    roles, owner = asyncio.run(run())
    assert roles == [(RUNTIME_ROLE, False, False, False), (OWNER_ROLE, False, False, False)]
    assert owner == OWNER_ROLE
