"""schema.sql against a real PostgreSQL: idempotent, mirrored by engine/storage/tables.py, and its
constraints enforce the invariants they claim to."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import asyncpg
import pytest
from sqlalchemy import inspect
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import create_async_engine

from engine.storage import tables
from engine.storage.db import sqlalchemy_url
from engine.storage.schema import apply_schema, schema_path


def _type_name(t: object) -> str:
    """Comparable spelling of a column type, reflected or declared."""
    if t.__class__.__name__ == "TIMESTAMP" and getattr(t, "timezone", False):
        return "TIMESTAMPTZ"
    return re.sub(r"\s+", "", str(t.compile(dialect=postgresql.dialect())).upper())  # type: ignore[attr-defined]


async def _reflect(dsn: str) -> dict:
    engine = create_async_engine(sqlalchemy_url(dsn))
    try:
        async with engine.connect() as conn:

            def grab(sync_conn: object) -> dict:
                insp = inspect(sync_conn)
                out = {}
                for name in insp.get_table_names():
                    out[name] = {
                        "columns": {c["name"]: c for c in insp.get_columns(name)},
                        "pk": insp.get_pk_constraint(name)["constrained_columns"],
                        "unique": {tuple(u["column_names"]) for u in insp.get_unique_constraints(name)},
                        "indexes": {i["name"]: i for i in insp.get_indexes(name)},
                        "fks": {
                            (tuple(f["constrained_columns"]), f["referred_table"]) for f in insp.get_foreign_keys(name)
                        },
                    }
                return out

            return await conn.run_sync(grab)
    finally:
        await engine.dispose()


def test_tables_py_matches_schema_sql(fresh_db: str) -> None:
    asyncio.run(apply_schema(fresh_db))
    live = asyncio.run(_reflect(fresh_db))
    assert set(live) == set(tables.metadata.tables), "tables in schema.sql and tables.py differ"
    for name, table in tables.metadata.tables.items():
        got = live[name]
        assert list(got["columns"]) == [c.name for c in table.columns], f"{name}: column names/order differ"
        for col in table.columns:
            db_col = got["columns"][col.name]
            assert _type_name(db_col["type"]) == _type_name(col.type), f"{name}.{col.name} type"
            assert db_col["nullable"] == col.nullable, f"{name}.{col.name} nullability"
            assert (db_col["default"] is not None or db_col.get("identity") is not None) == (
                col.server_default is not None or col.identity is not None
            ), f"{name}.{col.name} default"
        assert got["pk"] == [c.name for c in table.primary_key.columns], f"{name}: primary key"
        uniques = {
            tuple(c.name for c in u.columns) for u in table.constraints if u.__class__.__name__ == "UniqueConstraint"
        }
        uniques |= {(c.name,) for c in table.columns if c.unique}
        assert got["unique"] == uniques, f"{name}: unique constraints"
        fks = {((fk.parent.name,), fk.column.table.name) for fk in table.foreign_keys}
        assert got["fks"] == fks, f"{name}: foreign keys"
        index_names = {i.name for i in table.indexes}
        db_indexes = {n for n, i in got["indexes"].items() if not i.get("duplicates_constraint")}
        assert db_indexes == index_names, f"{name}: indexes"
        for index in table.indexes:
            db_index = got["indexes"][index.name]
            assert db_index["column_names"] == [c.name for c in index.columns], f"{index.name} columns"
            assert bool(db_index["unique"]) == bool(index.unique), f"{index.name} uniqueness"


def test_schema_applies_twice_and_concurrently(fresh_db: str) -> None:
    async def run() -> list[int]:
        return await asyncio.gather(*(apply_schema(fresh_db) for _ in range(4)))

    assert asyncio.run(run()) == [1, 1, 1, 1]
    assert asyncio.run(apply_schema(fresh_db)) == 1


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
        await apply_schema(fresh_db)
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
        finally:
            await conn.close()

    asyncio.run(run())


def test_command_insert_notifies_listeners(fresh_db: str) -> None:
    async def run() -> list[str]:
        await apply_schema(fresh_db)
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


def test_schema_sql_is_the_file_applied() -> None:
    assert schema_path().name == "schema.sql" and "CREATE TABLE IF NOT EXISTS command" in schema_path().read_text()


def test_upgrade_in_place_keeps_admin_tokens_and_projects(fresh_db: str) -> None:
    """A database made by the schema before users and grants: applying today's schema.sql keeps the admin an
    admin, its token valid with full rights, and gives the existing project (and so its workflows) an owner."""
    import subprocess

    from engine.api.tokens import token_hash, token_user

    old = subprocess.run(
        ["git", "show", "49f4bc1:schema.sql"], capture_output=True, text=True, check=True, cwd=schema_path().parent
    ).stdout
    assert "project_user" not in old

    async def run() -> tuple[Any, Any, Any]:
        conn = await asyncpg.connect(fresh_db)
        try:
            await conn.execute(old)
            admin = await conn.fetchval("INSERT INTO users (user_name, user_type) VALUES ('admin', 0) RETURNING id")
            await conn.execute(
                "INSERT INTO access_token (user_id, name, token_hash) VALUES ($1, 'old', $2)", admin, token_hash("t0")
            )
            await _seed(conn)
            await apply_schema(fresh_db)
            await apply_schema(fresh_db)
            user = await token_user(conn, token_hash("t0"))
            owner = await conn.fetchval("SELECT user_id FROM project WHERE code = 1")
            return admin, user, owner
        finally:
            await conn.close()

    admin, principal, owner = asyncio.run(run())
    assert principal is not None and principal.user_id == admin and principal.is_admin and principal.perm_cap is None
    assert owner == admin


def test_a_node_starting_next_to_running_masters_takes_no_ddl_lock(fresh_db: str) -> None:
    """A node (re)starting applies schema.sql only when the database does not hold that exact text yet:
    with it applied, a restart must not wait for (or deadlock with) the row locks running masters hold on
    the hot tables (CREATE TRIGGER / ALTER TABLE on them did, under load)."""

    async def run() -> None:
        await apply_schema(fresh_db)
        busy = await asyncpg.connect(fresh_db)
        try:
            async with busy.transaction():  # what a running master's write holds
                for table in ("command", "workflow_instance", "task_instance"):
                    await busy.execute(f"LOCK TABLE {table} IN ROW EXCLUSIVE MODE")
                await asyncio.wait_for(apply_schema(fresh_db), 10)
        finally:
            await busy.close()
        conn = await asyncpg.connect(fresh_db)
        try:
            assert await conn.fetchval("SELECT count(*) FROM schema_digest") == 1
        finally:
            await conn.close()

    asyncio.run(run())
