"""A run's end written as one statement (engine/master/store.py ``_write_one``) only when it needs none of
``serial_sql.on_run_ended``'s work: ``serial_sql.RUN_END_FREE`` decides as ``Rule.of(...).limited`` and
``on_run_ended`` do, and a row another transaction holds sends the end to the transaction, which wakes a run a
claim made wait meanwhile. Against a real PostgreSQL."""

from __future__ import annotations

import asyncio
import itertools

import asyncpg
import pytest

from engine.concurrency import serial_sql
from engine.concurrency.serial import Rule
from engine.master import store as store_mod
from engine.master.store import MasterStore, WriteBatch
from engine.states import WorkflowState
from tests.cluster_harness import save, shell
from tests.test_store_write import _end, attempt, backend_waiting

ME, EPOCH = "127.0.0.1:5678", 5


async def _instance(conn: asyncpg.Pool | asyncpg.Connection, code: int, state: int = 1, owned: bool = True) -> int:
    return int(
        await conn.fetchval(
            "INSERT INTO workflow_instance (name, workflow_definition_code, workflow_definition_version,"
            " project_code, state, command_type, host, epoch) VALUES ('w', $1, 1, 1, $2, 0, $3, $4) RETURNING id",
            code,
            state,
            ME if owned else None,
            EPOCH if owned else 0,
        )
    )


async def test_the_gate_decides_as_the_rule_and_on_run_ended_do(pool: asyncpg.Pool, fresh_db: str) -> None:
    code = await save(fresh_db, "gate", [shell("t", "true")])
    wid = await _instance(pool, code)
    wrong = []
    modes, caps = [-1, 0, 1, 2, 3, 4, 99], [-5, -1, 0, 1, 2]
    for mode, cap, waiting, deleted in itertools.product(modes, caps, [False, True], [False, True]):
        await pool.execute("DELETE FROM workflow_instance WHERE state = $1", serial_sql.WAIT)
        await pool.execute(
            "UPDATE workflow_definition SET execution_type = $2, max_active_runs = $3 WHERE code = $1", code, mode, cap
        )
        target = code + 1_000_000 if deleted else code  # a definition that is gone: no rule, as on_run_ended reads
        await pool.execute("UPDATE workflow_instance SET workflow_definition_code = $2 WHERE id = $1", wid, target)
        if waiting:
            await _instance(pool, target, state=serial_sql.WAIT, owned=False)
        want = not ((not deleted and Rule.of(mode, cap).limited) or waiting)
        free = await pool.fetchval(serial_sql.RUN_END_FREE, wid)
        if free is not want:
            wrong.append((mode, cap, waiting, deleted, free))
    assert wrong == []
    assert await pool.fetchval(serial_sql.RUN_END_FREE, 10**12) is None  # no instance: fenced out


@pytest.mark.parametrize("path", ["one statement", "transaction"])
async def test_a_run_made_to_wait_while_the_end_waited_for_its_row_is_woken(
    pool: asyncpg.Pool, fresh_db: str, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ending run's row is held (a rerun being queued holds it FOR UPDATE); meanwhile its workflow turns
    serial and a claim, reading the run as active, makes another wait. Once the row is free the run ends and
    the waiting one is woken (a RECOVER_SERIAL_WAIT command), on either path."""
    if path == "transaction":
        monkeypatch.setattr(store_mod, "_one_statement", lambda _batch: False)
    code = await save(fresh_db, "turns-serial", [shell("t", "true")])
    wid = await _instance(pool, code)
    store = MasterStore(pool, ME)
    (first,) = await store.write(wid, EPOCH, WriteBatch(new_attempts=[attempt(1)], grouped=False))
    holder = await asyncpg.connect(fresh_db)
    claim = await asyncpg.connect(fresh_db)
    try:
        await holder.execute("BEGIN")
        await holder.execute("SELECT 1 FROM workflow_instance WHERE id = $1 FOR UPDATE", wid)
        end = asyncio.create_task(store.write(wid, EPOCH, _end(first)))
        await backend_waiting(claim, "Lock")  # the end waits for the row
        await claim.execute("UPDATE workflow_definition SET execution_type = 1 WHERE code = $1", code)
        async with claim.transaction():  # a claim under the new rule: the ending run is still active
            await serial_sql.lock(claim, code)
            active, _, _ = await serial_sql._runs(claim, code)
            assert active == [wid]
            waiter = await _instance(claim, code, state=serial_sql.WAIT, owned=False)
        await holder.execute("COMMIT")
        await asyncio.wait_for(end, 10)
    finally:
        await holder.close()
        await claim.close()
    assert await pool.fetchval("SELECT state FROM workflow_instance WHERE id = $1", wid) == WorkflowState.SUCCESS
    assert await pool.fetchval("SELECT count(*) FROM command WHERE workflow_instance_id = $1", waiter) == 1
