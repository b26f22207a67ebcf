"""The actor's fenced write when PostgreSQL drops the connection (real PostgreSQL, real backends
terminated with pg_terminate_backend): lost before COMMIT -> sent again, applied once; lost while
committing -> CommitUnknown, never sent again."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import asyncpg
import pytest

from engine.infra.postgres import PostgresServer
from engine.master.store import CommitUnknown, FencedOut, MasterStore, NewAttempt, TaskUpdate, WriteBatch
from engine.master.workflow_messages import RaiseAlert
from engine.states import WorkflowState
from engine.storage.failures import CONNECTION_LOST
from engine.storage.jsoncodec import register_json
from tests import databases
from tests.cluster_harness import save, shell

ME, EPOCH = "127.0.0.1:5678", 5

# COMMIT runs deferred constraint triggers: this one makes committing a 'slow-commit' alert take 60 s,
# long enough to terminate the backend while its COMMIT is under way.
SLOW_COMMIT = """
CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.title = 'slow-commit' THEN PERFORM pg_sleep(60); END IF;
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON alert DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION slow_commit();
"""


@pytest.fixture
async def db(fresh_db: str, pg_server: PostgresServer) -> AsyncIterator[tuple[asyncpg.Pool, int]]:
    owner = await asyncpg.connect(databases.owner_dsn(pg_server, fresh_db))
    try:  # the test's own trigger: DDL, which the runtime role the pool logs in as may not run
        await owner.execute(SLOW_COMMIT)
        await owner.execute(DEADLOCK_ONCE)
    finally:
        await owner.close()
    pool = await asyncpg.create_pool(fresh_db, min_size=1, max_size=4, init=register_json)
    wid = await pool.fetchval(
        "INSERT INTO workflow_instance (name, workflow_definition_code, workflow_definition_version, project_code,"
        " state, command_type, host, epoch) VALUES ('w', 1, 1, 1, 1, 0, $1, $2) RETURNING id",
        ME,
        EPOCH,
    )
    yield pool, wid
    await pool.close()


def final_batch(title: str) -> WriteBatch:
    alert = RaiseAlert(1, title, "the instance ended")
    return WriteBatch(workflow_state=int(WorkflowState.SUCCESS), workflow_finished=True, alerts=[alert])


async def backend_waiting(admin: asyncpg.Connection, wait_event: str, deadline: float = 10.0) -> int:
    """The pid of the backend of this database waiting on ``wait_event`` (or any event of that type)."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        pid = await admin.fetchval(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND $1 IN (wait_event, wait_event_type)",
            wait_event,
        )
        if pid is not None:
            return int(pid)
        await asyncio.sleep(0.02)
    raise AssertionError(f"no backend reached wait event {wait_event}")


async def test_a_connection_lost_while_committing_is_not_written_again(db: tuple[asyncpg.Pool, int]) -> None:
    pool, wid = db
    store = MasterStore(pool, ME)
    write = asyncio.create_task(store.write_retrying(wid, EPOCH, final_batch("slow-commit"), max_delay=0.05))
    async with pool.acquire() as admin:
        pid = await backend_waiting(admin, "PgSleep")  # inside COMMIT, in the deferred trigger
        assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
    with pytest.raises(CommitUnknown, match="connection lost while committing"):
        await asyncio.wait_for(write, 10)
    # the terminated COMMIT did not apply here; what matters is that nothing was sent a second time
    assert await pool.fetchval("SELECT count(*) FROM alert") == 0
    assert await pool.fetchval("SELECT state FROM workflow_instance WHERE id = $1", wid) == 1


async def test_a_connection_lost_before_commit_is_sent_again_and_applied_once(db: tuple[asyncpg.Pool, int]) -> None:
    pool, wid = db
    store = MasterStore(pool, ME)
    async with pool.acquire() as blocker, pool.acquire() as admin:
        # hold the instance row so the write's ownership lock waits, then kill the waiting backend
        tx = blocker.transaction()
        await tx.start()
        await blocker.execute("SELECT 1 FROM workflow_instance WHERE id = $1 FOR UPDATE", wid)
        write = asyncio.create_task(store.write_retrying(wid, EPOCH, final_batch("ended"), max_delay=0.05))
        first = await backend_waiting(admin, "Lock")
        assert await admin.fetchval("SELECT pg_terminate_backend($1)", first)
        second = await backend_waiting(admin, "Lock")  # sent again on a new connection, waiting again
        assert second != first
        await tx.rollback()
    await asyncio.wait_for(write, 10)
    assert await pool.fetchval("SELECT count(*) FROM alert WHERE title = 'ended'") == 1
    assert await pool.fetchval("SELECT state FROM workflow_instance WHERE id = $1", wid) == WorkflowState.SUCCESS


@pytest.mark.parametrize("me", [ME, "odd'host:5678"])
async def test_a_write_of_an_instance_no_longer_ours_is_fenced_out_and_writes_nothing(
    db: tuple[asyncpg.Pool, int], me: str
) -> None:
    """BEGIN and the ownership lock go in one round trip for a plain address (a statement of their own for
    any other): either way a write at another epoch or from another master writes nothing and leaves no
    transaction open on the pool's connections."""
    pool, wid = db
    await pool.execute("UPDATE workflow_instance SET host = $1 WHERE id = $2", me, wid)
    store = MasterStore(pool, me)
    with pytest.raises(FencedOut):
        await store.write(wid, EPOCH + 1, final_batch("fenced"))
    with pytest.raises(FencedOut):
        await MasterStore(pool, "127.0.0.1:9999").write(wid, EPOCH, final_batch("fenced"))
    assert await pool.fetchval("SELECT count(*) FROM alert") == 0
    for _ in range(4):  # every connection of the pool: none was left inside a transaction
        async with pool.acquire() as conn:
            assert not conn.is_in_transaction()
    await store.write(wid, EPOCH, final_batch("ours"))
    assert await pool.fetchval("SELECT count(*) FROM alert WHERE title = 'ours'") == 1
    assert await pool.fetchval("SELECT state FROM workflow_instance WHERE id = $1", wid) == WorkflowState.SUCCESS


async def test_a_terminated_backend_raises_what_counts_as_a_lost_connection(fresh_db: str) -> None:
    conn = await asyncpg.connect(fresh_db)
    admin = await asyncpg.connect(fresh_db)
    try:
        pid = conn.get_server_pid()
        query = asyncio.create_task(conn.execute("SELECT pg_sleep(60)"))
        await backend_waiting(admin, "PgSleep")
        await admin.execute("SELECT pg_terminate_backend($1)", pid)
        with pytest.raises(CONNECTION_LOST):
            await asyncio.wait_for(query, 10)
    finally:
        conn.terminate()
        await admin.close()


# The first insert of a 'deadlock-victim' alert raises what PostgreSQL raises for a deadlock's victim
# (SQLSTATE 40P01: the whole transaction rolled back); later ones pass.
DEADLOCK_ONCE = """
CREATE SEQUENCE victim_seq;
CREATE FUNCTION deadlock_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- nextval is never rolled back: only the first try is refused
    IF NEW.title = 'deadlock-victim' AND nextval('victim_seq') = 1 THEN
        RAISE EXCEPTION 'deadlock detected (test)' USING ERRCODE = '40P01';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER deadlock_once BEFORE INSERT ON alert FOR EACH ROW EXECUTE FUNCTION deadlock_once();
"""


async def test_a_write_rolled_back_as_a_deadlock_victim_is_sent_again_and_applied_once(
    db: tuple[asyncpg.Pool, int],
) -> None:
    pool, wid = db
    store = MasterStore(pool, ME)
    await asyncio.wait_for(store.write_retrying(wid, EPOCH, final_batch("deadlock-victim"), max_delay=0.05), 10)
    assert await pool.fetchval("SELECT last_value FROM victim_seq") == 2  # refused once, then applied
    assert await pool.fetchval("SELECT count(*) FROM alert WHERE title = 'deadlock-victim'") == 1
    assert await pool.fetchval("SELECT state FROM workflow_instance WHERE id = $1", wid) == WorkflowState.SUCCESS


def attempt(code: int, number: int = 1) -> NewAttempt:
    """Attempt ``number`` of a SHELL task ``code``."""
    return NewAttempt(code, 1, f"t{code}", "SHELL", number, 0, 1, 0, 0, "default", -1, 0, {"rawScript": "true"}, [])


async def test_updates_written_with_new_attempts_in_one_statement_land_as_written_apart(
    db: tuple[asyncpg.Pool, int],
) -> None:
    """A write that ends attempts and makes new ones sends the updates in the INSERT's statement (parameters
    renumbered after its own): one attempt updated alone, two sharing their columns updated together, a
    retry's earlier attempt retired, and the new attempts inserted, each exactly as if written apart."""
    import datetime as dt

    pool, wid = db
    store = MasterStore(pool, ME)

    first = await store.write(wid, EPOCH, WriteBatch(new_attempts=[attempt(c) for c in (1, 2, 3)]))
    end = int(dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC).timestamp() * 1000)
    batch = WriteBatch(
        new_attempts=[attempt(1, 2), attempt(4)],
        updates=[
            TaskUpdate(first[0], 6, {"exit_code": 1, "end_time": end, "var_pool": [{"prop": "x", "value": "1"}]}),
            TaskUpdate(first[1], 7, {"exit_code": 0, "host": "w:1"}),
            TaskUpdate(first[2], 7, {"exit_code": 0, "host": "w:2"}),
        ],
    )
    new = await store.write(wid, EPOCH, batch)
    rows = {
        r["id"]: r
        for r in await pool.fetch(
            "SELECT id, task_code, attempt, flag, state, exit_code, host, end_time, var_pool FROM task_instance"
            " WHERE workflow_instance_id = $1",
            wid,
        )
    }
    assert len(rows) == 5 and len(new) == 2
    failed, one, two = (rows[i] for i in first)
    assert (failed["state"], failed["exit_code"], failed["flag"]) == (6, 1, 0)
    assert failed["end_time"] == dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    assert failed["var_pool"] == [{"prop": "x", "value": "1"}]
    shared = [(r["state"], r["exit_code"], r["host"], r["flag"]) for r in (one, two)]
    assert shared == [(7, 0, "w:1", 1), (7, 0, "w:2", 1)]
    assert [(rows[i]["task_code"], rows[i]["attempt"], rows[i]["flag"], rows[i]["state"]) for i in new] == [
        (1, 2, 1, 0),
        (4, 1, 1, 0),
    ]


@pytest.mark.parametrize("outcome", ["commit", "rollback"])
async def test_a_one_statement_write_waits_for_a_takeover_and_writes_nothing_once_it_committed(
    db: tuple[asyncpg.Pool, int], outcome: str
) -> None:
    """Task updates and first attempts only (a chain's step: grouped False) go as one statement that fences
    itself: it waits on the instance row a takeover holds, and writes nothing (FencedOut) once that takeover
    committed a new epoch — not a row, not an update — or all of it once the takeover rolled back."""
    pool, wid = db
    store = MasterStore(pool, ME)
    (first,) = await store.write(wid, EPOCH, WriteBatch(new_attempts=[attempt(1)], grouped=False))
    batch = WriteBatch(
        new_attempts=[attempt(2), attempt(3)],
        updates=[TaskUpdate(first, 7, {"exit_code": 0, "host": "w:1"})],
        grouped=False,
    )
    async with pool.acquire() as takeover:
        tx = takeover.transaction()
        await tx.start()
        await takeover.execute("UPDATE workflow_instance SET epoch = epoch + 1 WHERE id = $1", wid)
        write = asyncio.create_task(store.write(wid, EPOCH, batch))
        async with pool.acquire() as admin:  # the write waits on the row lock the takeover holds
            await backend_waiting(admin, "Lock")
        assert not write.done()
        await (tx.commit() if outcome == "commit" else tx.rollback())
    rows = "SELECT id, state, host FROM task_instance WHERE workflow_instance_id = $1 ORDER BY id"
    if outcome == "commit":
        with pytest.raises(FencedOut):
            await asyncio.wait_for(write, 10)
        assert [tuple(r) for r in await pool.fetch(rows, wid)] == [(first, 0, None)]
    else:
        new = await asyncio.wait_for(write, 10)
        got = [tuple(r) for r in await pool.fetch(rows, wid)]
        assert got == [(first, 7, "w:1"), (new[0], 0, None), (new[1], 0, None)]


async def test_a_one_statement_write_of_another_master_or_epoch_writes_nothing(db: tuple[asyncpg.Pool, int]) -> None:
    pool, wid = db
    (first,) = await MasterStore(pool, ME).write(wid, EPOCH, WriteBatch(new_attempts=[attempt(1)], grouped=False))
    update = WriteBatch(updates=[TaskUpdate(first, 7, {"exit_code": 0})], grouped=False)
    both = WriteBatch(new_attempts=[attempt(2)], updates=update.updates, grouped=False)
    for store, epoch, batch in [
        (MasterStore(pool, ME), EPOCH + 1, update),
        (MasterStore(pool, "127.0.0.1:9"), EPOCH, both),
    ]:
        with pytest.raises(FencedOut):
            await store.write(wid, epoch, batch)
    assert [
        tuple(r) for r in await pool.fetch("SELECT id, state FROM task_instance WHERE workflow_instance_id = $1", wid)
    ] == [(first, 0)]
    assert await MasterStore(pool, ME).write(wid, EPOCH, update) == []
    assert await pool.fetchval("SELECT state FROM task_instance WHERE id = $1", first) == 7


async def test_a_run_s_start_is_one_statement_that_a_takeover_fences_whole(db: tuple[asyncpg.Pool, int]) -> None:
    """A state change that does not end the run, with the run's first attempts (its start), is one statement
    whose UPDATE of the instance row is the fence: at another epoch it changes neither the state, nor the
    history, nor the variables, and inserts nothing; at ours it does all of it."""
    pool, wid = db
    history = [{"time": "2026-11-28 00:00:00", "state": "RUNNING_EXECUTION", "desc": "start"}]
    start = WriteBatch(
        workflow_state=int(WorkflowState.RUNNING_EXECUTION),
        workflow_var_pool=[{"prop": "v", "value": "1"}],
        workflow_history=history,
        new_attempts=[attempt(1), attempt(2)],
        grouped=False,
    )
    before = await pool.fetchrow("SELECT state, state_history, var_pool FROM workflow_instance WHERE id = $1", wid)
    with pytest.raises(FencedOut):
        await MasterStore(pool, ME).write(wid, EPOCH + 1, start)
    after = await pool.fetchrow("SELECT state, state_history, var_pool FROM workflow_instance WHERE id = $1", wid)
    assert tuple(after) == tuple(before)
    assert await pool.fetchval("SELECT count(*) FROM task_instance WHERE workflow_instance_id = $1", wid) == 0
    ids = await MasterStore(pool, ME).write(wid, EPOCH, start)
    row = await pool.fetchrow("SELECT state, state_history, var_pool FROM workflow_instance WHERE id = $1", wid)
    assert row["state"] == WorkflowState.RUNNING_EXECUTION and row["var_pool"] == [{"prop": "v", "value": "1"}]
    assert list(row["state_history"] or [])[-1:] == history
    codes = await pool.fetch("SELECT id, task_code FROM task_instance WHERE workflow_instance_id = $1 ORDER BY id", wid)
    assert [(r["id"], r["task_code"]) for r in codes] == list(zip(ids, (1, 2), strict=True))


def _end(first: int) -> WriteBatch:
    history = [{"time": "2026-11-29 00:00:00", "state": "SUCCESS", "desc": "done"}]
    return WriteBatch(
        workflow_state=int(WorkflowState.SUCCESS), workflow_finished=True, workflow_history=history,
        updates=[TaskUpdate(first, 7, {"exit_code": 0})], grouped=False,
    )  # fmt: skip


def _transactions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Each write that went through the transaction (MasterStore._apply), by instance id."""
    calls: list[int] = []
    real = MasterStore._apply

    async def apply(self: MasterStore, conn: asyncpg.Connection, instance_id: int, batch: WriteBatch) -> list[int]:
        calls.append(instance_id)
        return await real(self, conn, instance_id, batch)

    monkeypatch.setattr(MasterStore, "_apply", apply)
    return calls


async def test_a_run_s_end_is_one_statement_that_a_takeover_fences_whole(
    db: tuple[asyncpg.Pool, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The end of a run of a workflow that limits no runs, with none waiting: one statement (no transaction),
    fenced by its UPDATE of the instance: at another epoch nothing changes; at ours the state, the end time,
    the history and the last attempt's end land together."""
    pool, wid = db
    transactions = _transactions(monkeypatch)
    (first,) = await MasterStore(pool, ME).write(wid, EPOCH, WriteBatch(new_attempts=[attempt(1)], grouped=False))
    with pytest.raises(FencedOut):
        await MasterStore(pool, ME).write(wid, EPOCH + 1, _end(first))
    row = await pool.fetchrow("SELECT state, end_time FROM workflow_instance WHERE id = $1", wid)
    assert (row["state"], row["end_time"]) == (1, None)
    assert await pool.fetchval("SELECT state FROM task_instance WHERE id = $1", first) == 0
    assert await MasterStore(pool, ME).write(wid, EPOCH, _end(first)) == []
    row = await pool.fetchrow("SELECT state, end_time, state_history FROM workflow_instance WHERE id = $1", wid)
    assert row["state"] == WorkflowState.SUCCESS and row["end_time"] is not None
    assert list(row["state_history"])[-1]["desc"] == "done"
    assert await pool.fetchval("SELECT state FROM task_instance WHERE id = $1", first) == 7
    assert transactions == []


@pytest.mark.parametrize("why", ["a run waits", "the workflow runs serially", "it caps its active runs"])
async def test_a_run_s_end_that_may_wake_a_waiting_run_goes_through_the_transaction(
    db: tuple[asyncpg.Pool, int], fresh_db: str, monkeypatch: pytest.MonkeyPatch, why: str
) -> None:
    """Its workflow limits its runs (serial_sql.RUN_END_FREE reads the definition as Rule.of does) or a run
    of it waits: the one statement writes nothing, and the transaction ends the run (taking the workflow's
    lock and waking the runs that may start, serial_sql.on_run_ended)."""
    pool, wid = db
    transactions = _transactions(monkeypatch)
    code = await save(
        fresh_db,
        "limits",
        [shell("t", "true")],
        execution_type=1 if why == "the workflow runs serially" else 0,
        max_active_runs=2 if why == "it caps its active runs" else 0,
    )
    await pool.execute("UPDATE workflow_instance SET workflow_definition_code = $2 WHERE id = $1", wid, code)
    if why == "a run waits":
        await pool.execute(
            "INSERT INTO workflow_instance (name, workflow_definition_code, workflow_definition_version,"
            " project_code, state, command_type) VALUES ('waiting', $1, 1, 1, $2, 0)",
            code,
            int(WorkflowState.SERIAL_WAIT),
        )
    (first,) = await MasterStore(pool, ME).write(wid, EPOCH, WriteBatch(new_attempts=[attempt(1)], grouped=False))
    assert await MasterStore(pool, ME).write(wid, EPOCH, _end(first)) == []
    row = await pool.fetchrow("SELECT state, end_time FROM workflow_instance WHERE id = $1", wid)
    assert row["state"] == WorkflowState.SUCCESS and row["end_time"] is not None
    assert await pool.fetchval("SELECT state FROM task_instance WHERE id = $1", first) == 7
    assert transactions == [wid]
