"""An attempt's state writes are HOT updates (real PostgreSQL, the migrated schema): the actor's fenced write
creating an attempt and then recording its start and its end touches no index of task_instance, because no
index names a column those writes change and each page keeps room for the row's next version."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from engine.master.store import MasterStore, NewAttempt, TaskUpdate, WriteBatch
from engine.states import TaskState
from engine.storage.jsoncodec import register_json

ME, EPOCH = "127.0.0.1:5678", 5


@pytest.fixture
async def pool(fresh_db: str) -> AsyncIterator[asyncpg.Pool]:
    # one connection: the statistics read below are the ones this backend flushed
    pool = await asyncpg.create_pool(fresh_db, min_size=1, max_size=1, init=register_json)
    yield pool
    await pool.close()


def attempt(code: int) -> NewAttempt:
    return NewAttempt(
        task_code=code,
        task_version=1,
        name=f"t{code}",
        task_type="SHELL",
        attempt=1,
        retry_times=0,
        max_retry_times=0,
        retry_interval=1,
        priority=2,
        worker_group="default",
        environment_code=-1,
        delay_time=0,
        task_params={"rawScript": "true"},
        var_pool=[],
    )


async def updates(pool: asyncpg.Pool) -> tuple[int, int]:
    """(rows updated, of which HOT) in task_instance, with this backend's pending statistics flushed first."""
    async with pool.acquire() as conn:
        await conn.execute("SELECT pg_stat_force_next_flush()")  # flushed when the backend goes idle after it
        await conn.execute("SELECT pg_stat_clear_snapshot()")
        row = await conn.fetchrow(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'task_instance'"
        )
    return int(row["n_tup_upd"]), int(row["n_tup_hot_upd"])


async def owned_instance(pool: asyncpg.Pool) -> int:
    """A running workflow instance this test's master (ME) owns at EPOCH."""
    return int(
        await pool.fetchval(
            "INSERT INTO workflow_instance (name, workflow_definition_code, workflow_definition_version,"
            " project_code, state, command_type, host, epoch) VALUES ('w', 1, 1, 1, 1, 0, $1, $2) RETURNING id",
            ME,
            EPOCH,
        )
    )


async def test_an_attempts_start_and_end_are_written_without_touching_an_index(pool: asyncpg.Pool) -> None:
    wid = await owned_instance(pool)
    store = MasterStore(pool, ME)
    ids = await store.write(wid, EPOCH, WriteBatch(new_attempts=[attempt(1), attempt(2)]))
    before = await updates(pool)
    dispatched = [TaskUpdate(i, int(TaskState.DISPATCH), {"host": "127.0.0.1:1234"}) for i in ids]
    await store.write(wid, EPOCH, WriteBatch(updates=dispatched))
    running = [
        TaskUpdate(i, int(TaskState.RUNNING_EXECUTION), {"start_time": 1_700_000_000_000, "pid": 42}) for i in ids
    ]
    await store.write(wid, EPOCH, WriteBatch(updates=running))
    ended = TaskUpdate(
        ids[0],
        int(TaskState.SUCCESS),
        {"end_time": 1_700_000_001_000, "exit_code": 0, "var_pool": [], "log_path": "/tmp/x.log", "log_tail": "ok"},
    )
    await store.write(wid, EPOCH, WriteBatch(updates=[ended]))
    after = await updates(pool)
    assert (after[0] - before[0], after[1] - before[1]) == (5, 5)
    states = await pool.fetch("SELECT state FROM task_instance WHERE workflow_instance_id = $1 ORDER BY id", wid)
    assert [r["state"] for r in states] == [TaskState.SUCCESS, TaskState.RUNNING_EXECUTION]


async def test_many_attempts_written_in_one_statement_get_the_columns_one_written_alone_gets(
    pool: asyncpg.Pool,
) -> None:
    wid = await owned_instance(pool)
    store = MasterStore(pool, ME)
    ids = await store.write(wid, EPOCH, WriteBatch(new_attempts=[attempt(1), attempt(2), attempt(3)]))
    fields = {
        "host": "127.0.0.1:1234", "pid": 42, "log_path": "/l/x.log", "execute_path": "/e/x",
        "start_time": 1_700_000_000_000, "end_time": 1_700_000_001_000, "exit_code": 3,
        "var_pool": [{"prop": "a", "value": "1"}], "app_id": "app-1", "app_link": "http://x", "log_tail": "bye",
    }  # fmt: skip
    await store.write(wid, EPOCH, WriteBatch(updates=[TaskUpdate(ids[0], int(TaskState.FAILURE), fields)]))
    together = [TaskUpdate(i, int(TaskState.FAILURE), fields) for i in ids[1:]]
    await store.write(wid, EPOCH, WriteBatch(updates=together))
    columns = ", ".join(["state", *sorted(fields)])
    rows = await pool.fetch(f"SELECT {columns} FROM task_instance WHERE workflow_instance_id = $1 ORDER BY id", wid)
    alone, *batched = [dict(r) for r in rows]
    assert alone["state"] == TaskState.FAILURE and alone["var_pool"] == fields["var_pool"] and alone["pid"] == 42
    assert batched == [alone, alone]
    # the log of each ended attempt is queued for archiving, whichever statement ended it
    queued = await pool.fetchval("SELECT count(*) FROM task_log_archive WHERE task_instance_id = ANY($1)", ids)
    assert queued == 3


async def test_each_attempt_of_a_full_page_is_dispatched_in_place_while_an_old_snapshot_keeps_every_old_version(
    pool: asyncpg.Pool, fresh_db: str
) -> None:
    # under load other transactions' snapshots keep a page's old versions from being pruned: the page itself
    # must hold the next version of each of its rows, so an attempt's first write after its insert is HOT
    wid = await owned_instance(pool)
    store = MasterStore(pool, ME)
    ids = await store.write(wid, EPOCH, WriteBatch(new_attempts=[attempt(code) for code in range(1, 101)]))
    reader = await asyncpg.connect(fresh_db)
    try:
        await reader.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        assert await reader.fetchval("SELECT count(*) FROM task_instance WHERE workflow_instance_id = $1", wid) == 100
        before = await updates(pool)
        dispatched = [TaskUpdate(i, int(TaskState.DISPATCH), {"host": "127.0.0.1:1234"}) for i in ids]
        await store.write(wid, EPOCH, WriteBatch(updates=dispatched))
        after = await updates(pool)
    finally:
        await reader.close()
    assert (after[0] - before[0], after[1] - before[1]) == (100, 100)
