"""The takeover of one instance against a real PostgreSQL (no registry, no workers): what the failover
service leaves behind when something between the takeover's commit and the actor's start goes wrong;
and a backfill chain whose date ends twice (recovered, or resumed, after a failover or not)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from engine.master.commands import DefinitionCache
from engine.master.failover import FailoverService
from engine.master.store import MasterStore, WriteBatch
from engine.scheduling.backfill import backfill_param
from engine.states import WorkflowState
from rpc import RpcClient
from tests.cluster_harness import save, shell

ME, DEAD = "127.0.0.1:5678", "127.0.0.1:5679"


@pytest.fixture
async def pool(fresh_db: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await asyncpg.create_pool(fresh_db, min_size=1, max_size=4)
    yield pool
    await pool.close()


class Started:
    """The service's start_actor: records what it was asked to drive."""

    def __init__(self) -> None:
        self.instances: list[tuple[int, int]] = []

    def __call__(self, info: Any, *_: Any, **__: Any) -> None:
        self.instances.append((info.id, info.epoch))


def service(pool: asyncpg.Pool, started: Started, actors: dict[int, Any] | None = None) -> FailoverService:
    return FailoverService(
        ME,
        MasterStore(pool, ME),
        DefinitionCache(pool),
        RpcClient("test-secret"),
        lambda: None,
        actors or {},
        started,
        5.0,
    )


async def instance(pool: asyncpg.Pool, host: str, code: int = 404, version: int = 1) -> tuple[int, int]:
    row = await pool.fetchrow(
        "INSERT INTO workflow_instance (name, workflow_definition_code, workflow_definition_version, project_code,"
        " state, command_type, host, epoch) VALUES ('w', $1, $2, 1, 1, 0, $3, nextval('workflow_epoch_seq'))"
        " RETURNING id, epoch",
        code,
        version,
        host,
    )
    return int(row["id"]), int(row["epoch"])


async def test_an_instance_whose_definition_is_gone_ends_failure_with_the_reason(pool: asyncpg.Pool) -> None:
    started = Started()
    svc = service(pool, started)
    wid, epoch = await instance(pool, DEAD)
    try:
        await svc._take(wid, DEAD, epoch, set())
    finally:
        await svc.rpc.close()
    row = await pool.fetchrow("SELECT state, end_time, state_history, host FROM workflow_instance WHERE id = $1", wid)
    assert started.instances == []
    assert WorkflowState(row["state"]) is WorkflowState.FAILURE, "owned by a live master and never driven"
    assert row["end_time"] is not None
    history = json.loads(row["state_history"]) if isinstance(row["state_history"], str) else row["state_history"]
    assert any("404" in h["desc"] and "does not exist" in h["desc"] for h in history), history


async def test_an_instance_of_ours_that_no_actor_drives_is_taken_back(pool: asyncpg.Pool, fresh_db: str) -> None:
    # the takeover (or a claim) committed host = me and a new epoch, then the master lost track of it
    # before an actor started (the database restarted, or the commit's outcome was unknown)
    code = await save(fresh_db, "undriven", [shell("a", "true")])
    floor = int(await pool.fetchval("SELECT nextval('workflow_epoch_seq')"))
    undriven, epoch = await instance(pool, ME, code)
    driven, _ = await instance(pool, ME, code)
    theirs, _ = await instance(pool, DEAD, code)
    started = Started()
    svc = service(pool, started, actors={driven: object()})
    try:
        assert await svc.take_back_undriven(floor, set()) == 1
    finally:
        await svc.rpc.close()
    ((wid, new_epoch),) = started.instances
    assert wid == undriven and new_epoch > epoch
    assert await pool.fetchval("SELECT epoch FROM workflow_instance WHERE id = $1", undriven) == new_epoch
    assert await pool.fetchval("SELECT host FROM workflow_instance WHERE id = $1", theirs) == DEAD


async def test_no_instance_is_taken_back_while_an_actor_may_be_starting(pool: asyncpg.Pool, fresh_db: str) -> None:
    code = await save(fresh_db, "starting", [shell("a", "true")])
    floor = int(await pool.fetchval("SELECT nextval('workflow_epoch_seq')"))
    await instance(pool, ME, code)  # claimed: its actor is about to start
    started = Started()
    svc = service(pool, started)
    try:
        with svc.starting.begin():
            assert await svc.take_back_undriven(floor, set()) == 0
        assert await svc.take_back_undriven(floor, set()) == 1
    finally:
        await svc.rpc.close()


async def test_a_takeover_whose_definition_load_fails_is_retaken_later(pool: asyncpg.Pool, fresh_db: str) -> None:
    code = await save(fresh_db, "retake", [shell("a", "true")])
    wid, epoch = await instance(pool, DEAD, code)
    started = Started()
    svc = service(pool, started)
    gone = await asyncpg.create_pool(fresh_db, min_size=1, max_size=1)
    await gone.close()  # the database went away right after the takeover committed
    svc.cache = DefinitionCache(gone)
    try:
        with pytest.raises(asyncpg.InterfaceError):
            await svc._take(wid, DEAD, epoch, set())
        new_epoch = await pool.fetchval("SELECT epoch FROM workflow_instance WHERE id = $1", wid)
        assert svc._retake == {wid: new_epoch}, "owned by us, driven by nobody, and not retaken"
    finally:
        await svc.rpc.close()


async def test_a_backfill_date_ended_twice_queues_the_next_date_once(pool: asyncpg.Pool) -> None:
    # complementOnFailure CONTINUE: a failed date queues the next; recovering it and ending it again
    # (or a pause and resume) must not queue the next date a second time: the chain would fork
    backfill = await pool.fetchval(
        "INSERT INTO backfill (workflow_definition_code, dates) VALUES (1, ARRAY[now(), now() + interval '1 day',"
        " now() + interval '2 days']) RETURNING id"
    )
    wid, epoch = await instance(pool, ME, code=1)
    store = MasterStore(pool, ME)
    nxt = {**backfill_param(backfill, 1, 2), "complementOnFailure": "CONTINUE"}
    for _ in range(2):  # the date's first end, then its end after a recovery
        await store.write(wid, epoch, WriteBatch(workflow_state=6, workflow_finished=True, next_backfill=(nxt, [])))
    rows = await pool.fetch("SELECT command_param FROM command WHERE command_type = 5")
    assert len(rows) == 1
    await pool.execute("DELETE FROM command")  # claimed meanwhile: the next date runs, its command is gone
    await store.write(wid, epoch, WriteBatch(workflow_state=6, workflow_finished=True, next_backfill=(nxt, [])))
    assert await pool.fetchval("SELECT count(*) FROM command") == 0


async def test_a_sub_workflow_stopped_before_its_child_was_claimed_never_starts_it(pool: asyncpg.Pool) -> None:
    parent, _ = await instance(pool, ME, code=1)
    command = await pool.fetchval(
        "INSERT INTO command (command_type, workflow_definition_code) VALUES (0, 2) RETURNING id"
    )
    await pool.execute(
        "INSERT INTO sub_workflow_relation (parent_workflow_instance_id, parent_task_instance_id, command_id)"
        " VALUES ($1, 77, $2)",
        parent,
        command,
    )
    store = MasterStore(pool, ME)
    assert await store.cancel_child_command(77, "parent stopped before the sub-workflow started")
    assert await pool.fetchval("SELECT count(*) FROM command") == 0
    assert await pool.fetchval("SELECT message FROM error_command WHERE id = $1", command) == (
        "parent stopped before the sub-workflow started"
    )
    assert not await store.cancel_child_command(77, "again")  # claimed (or cancelled) already: nothing to take
