"""The takeover of one instance against a real PostgreSQL (no registry, no worker processes): what the failover
service leaves behind when something between the takeover's commit and the actor's start goes wrong;
what an instance taken again while its actor runs may still send (real actors and dispatcher, workers
faked at the RPC); and a backfill chain whose date ends twice (recovered, or resumed, after a failover or
not)."""

from __future__ import annotations

import json
import time
from typing import Any

import asyncpg
import pytest

from engine.master.actor import InstanceInfo, WorkflowActor
from engine.master.commands import DefinitionCache
from engine.master.dispatcher import Dispatcher
from engine.master.failover import FailoverService
from engine.master.store import MasterStore, WriteBatch
from engine.master.wheel import StateWheel
from engine.master.workflow import WorkflowRun
from engine.master.workflow_messages import Attempt
from engine.scheduling.backfill import backfill_param
from engine.states import TaskState, WorkflowState
from engine.storage.jsoncodec import register_json
from registry import NodeInfo
from registry.heartbeat import Heartbeat
from registry.keys import NodeId
from rpc import RpcClient
from rpc.errors import RpcRefused
from rpc.messages import (
    DispatchBatchReply,
    DispatchReply,
    HostUpdate,
    HostUpdateReply,
    HostUpdates,
    TaskDispatch,
    TaskDispatchBatch,
)
from tests.cluster_harness import Started, save, shell
from tests.helpers import eventually

ME, DEAD = "127.0.0.1:5678", "127.0.0.1:5679"


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


async def test_an_undriven_instance_is_taken_back_while_claims_keep_coming(pool: asyncpg.Pool, fresh_db: str) -> None:
    """Steady claiming (a start under way at every sweep) must not keep an undriven instance waiting for good:
    one seen undriven by two sweeps in a row, with every start under way begun after the first read, is not a
    claim's about to get its actor."""
    code = await save(fresh_db, "steady", [shell("a", "true")])
    floor = int(await pool.fetchval("SELECT nextval('workflow_epoch_seq')"))
    wid, _ = await instance(pool, ME, code)  # a claim's commit the master saw fail: no actor will come
    started = Started()
    svc = service(pool, started)
    try:
        with svc.starting.begin():  # a claim under way during the first sweep
            assert await svc.take_back_undriven(floor, set()) == 0, "it may be this claim's"
        with svc.starting.begin():  # the next claim, begun after that sweep read
            assert await svc.take_back_undriven(floor, set()) == 1
        assert [i for i, _ in started.instances] == [wid]
    finally:
        await svc.rpc.close()


async def test_an_instance_is_not_taken_back_while_the_start_that_may_own_it_is_still_under_way(
    pool: asyncpg.Pool, fresh_db: str
) -> None:
    code = await save(fresh_db, "slow", [shell("a", "true")])
    floor = int(await pool.fetchval("SELECT nextval('workflow_epoch_seq')"))
    await instance(pool, ME, code)  # claimed by a start still under way: its actor is about to start
    started = Started()
    svc = service(pool, started)
    try:
        with svc.starting.begin():  # one slow start, under way through both sweeps
            assert await svc.take_back_undriven(floor, set()) == 0
            assert await svc.take_back_undriven(floor, set()) == 0, "seen twice, but its start began before"
        assert await svc.take_back_undriven(floor, set()) == 1
    finally:
        await svc.rpc.close()


async def test_a_takeover_whose_definition_load_fails_is_retaken_later(pool: asyncpg.Pool, fresh_db: str) -> None:
    code = await save(fresh_db, "retake", [shell("a", "true")])
    wid, epoch = await instance(pool, DEAD, code)
    started = Started()
    svc = service(pool, started)
    gone = await asyncpg.create_pool(fresh_db, min_size=1, max_size=1, init=register_json)
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
        await store.write(
            wid,
            epoch,
            WriteBatch(workflow_state=WorkflowState.FAILURE, workflow_finished=True, next_backfill=(nxt, [])),
        )
    rows = await pool.fetch("SELECT command_param FROM command WHERE command_type = 5")
    assert len(rows) == 1
    await pool.execute("DELETE FROM command")  # claimed meanwhile: the next date runs, its command is gone
    await store.write(
        wid, epoch, WriteBatch(workflow_state=WorkflowState.FAILURE, workflow_finished=True, next_backfill=(nxt, []))
    )
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


class _Workers:
    """Two workers as the master's RPC sees them (no processes). Each refuses dispatches while ``full``
    and answers host updates with what it runs; ``silent`` ones fail their host updates. Like a worker
    that restarted since the instance's last takeover, none remembers owner epochs: whether a stale
    dispatch leaves the master is what is tested, not the worker's own fence."""

    def __init__(self, running: dict[str, list[list[int]]]) -> None:
        self.running = running
        self.full = True
        self.silent: set[str] = set()
        #: (task instance id, attempt, epoch) of every dispatch a worker took
        self.took: list[tuple[int, int, int]] = []
        self.refused = 0

    async def call(self, host: str, msg: object, *, timeout: float | None = None) -> object:
        if isinstance(msg, HostUpdate | HostUpdates):
            if host in self.silent:
                raise RpcRefused(f"{host} refused the connection")
            return HostUpdateReply(known=self.running.get(host, []))
        tasks = msg.tasks if isinstance(msg, TaskDispatchBatch) else [msg]
        replies = [self._one(t) for t in tasks]  # type: ignore[arg-type]
        return DispatchBatchReply(replies, 0 if self.full else 10) if isinstance(msg, TaskDispatchBatch) else replies[0]

    def _one(self, d: TaskDispatch) -> DispatchReply:
        if self.full:
            self.refused += 1
            return DispatchReply(False, "all 16 exec slots are busy", 0)
        self.took.append((d.task_instance_id, d.attempt, d.epoch))
        return DispatchReply(True, "", 10, 1)


def _worker_info(address: str) -> NodeInfo:
    hb = Heartbeat(startup_time=1, report_time=1, cpu_usage=0.1, memory_usage=0.1, load_average=0.1,
                   available_memory_gb=8, disk_available_gb=8, pid=1, exec_slots=16)  # fmt: skip
    return NodeInfo(NodeId("worker", address, "default"), hb, 1)


class _Driving:
    """What a master drives taken-over instances with (as ``Master.start_actor``): real actors, a real
    dispatcher (to ``workers``) and timer wheel, on a real PostgreSQL."""

    def __init__(self, pool: asyncpg.Pool, workers: _Workers, addresses: list[str]) -> None:
        self.store = MasterStore(pool, ME)
        self.wheel = StateWheel()
        valid_until = lambda: int(time.time() * 1000) + 60_000  # noqa: E731
        self.dispatcher = Dispatcher(workers, lambda _group: [_worker_info(w) for w in addresses],  # type: ignore[arg-type]
                                     retry_delay=0.02, valid_until=valid_until)  # fmt: skip
        self.actors: dict[int, WorkflowActor] = {}

    def start_actor(self, info: InstanceInfo, spec: Any, state: WorkflowState, attempts: list[Attempt],
                    **kw: Any) -> WorkflowActor:  # fmt: skip
        run = WorkflowRun(info.id, spec, info.failure_strategy, state, attempts)
        actor = WorkflowActor(info, spec, run, self.store, self.wheel, ME, self.dispatcher.submit, self._kill,
                              self._done, group_waiting=kw.get("group_waiting", frozenset()),
                              cancel_dispatch=self.dispatcher.cancel)  # fmt: skip
        self.actors[info.id] = actor
        actor.start()
        return actor

    def _done(self, actor: WorkflowActor, _final: object) -> None:
        if self.actors.get(actor.id) is actor:
            del self.actors[actor.id]

    @staticmethod
    async def _kill(*_: object) -> None:
        return None

    async def __aenter__(self) -> _Driving:
        self.wheel.start(lambda owner, event: owner.post(event))
        self.dispatcher.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        for actor in list(self.actors.values()):
            await actor.stop()
        await self.dispatcher.close()
        await self.wheel.close()


async def test_a_retake_stops_the_actor_it_replaces_so_its_queued_attempt_never_leaves(
    pool: asyncpg.Pool, fresh_db: str
) -> None:
    # The chaos round with seed 20261121: a master took an instance over while a worker it had to ask was
    # silent, so it drove the instance and queued a retake (asked again under a fresh epoch). Meanwhile
    # its actor queued attempt b#1 (every worker full). The retake found b#1 on no worker, marked it
    # NEED_FAULT_TOLERANCE and started a second actor, which queued b#2: the first actor still ran, and
    # once a worker had room (one that restarted since, knowing no epoch) b#1 left under the old epoch
    # and ran beside b#2 (its task group's slot already given to the next attempt: a size-1 group ran 2).
    w1, w2 = "127.0.0.1:7001", "127.0.0.1:7002"
    code = await save(fresh_db, "retake-queue", [shell("a", "sleep 60"), shell("b", "true")])
    wid, epoch = await instance(pool, DEAD, code)
    cache = DefinitionCache(pool)
    b_code = next(t.code for t in (await cache.spec(code, 1)).tasks.values() if t.name == "b")
    a_id = await pool.fetchval(
        "INSERT INTO task_instance (name, task_type, task_code, task_definition_version, workflow_instance_id,"
        " state, host, attempt) SELECT 'a', 'SHELL', code, 1, $1, 1, $2, 1 FROM task_definition"
        " WHERE name = 'a' RETURNING id",
        wid,
        w2,
    )
    workers = _Workers({w2: [[a_id, 1]]})
    workers.silent.add(w2)
    b_attempt = "SELECT id FROM task_instance WHERE workflow_instance_id = $1 AND task_code = $2 AND attempt = $3"
    async with _Driving(pool, workers, [w1, w2]) as driving:
        svc = FailoverService(ME, driving.store, cache, workers, lambda: None, driving.actors,  # type: ignore[arg-type]
                              driving.start_actor, 5.0)  # fmt: skip
        # the dead master's instance: a runs on w2, which does not answer the host update
        assert await svc._take(wid, DEAD, epoch, {w1, w2})
        first = driving.actors[wid]
        assert svc._retake == {wid: first.info.epoch}
        # its actor queues b#1; every worker is full, so it waits in the dispatch queue
        b1 = await eventually(lambda: pool.fetchval(b_attempt, wid, b_code, 1), 10, "b#1 made")
        await eventually(lambda: workers.refused >= 2 and len(driving.dispatcher) == 1, 10, "b#1 refused by both")
        # the next sweep takes it again; w2 answers now: b#1 is on no worker, so it runs again as b#2
        workers.silent.clear()
        svc._silent.clear()
        assert await svc._take(wid, ME, first.info.epoch, {w1, w2})
        second = driving.actors[wid]
        assert second is not first and second.info.epoch > first.info.epoch
        lost = await pool.fetchval("SELECT state FROM task_instance WHERE id = $1", b1)
        assert TaskState(lost) is TaskState.NEED_FAULT_TOLERANCE
        b2 = await eventually(lambda: pool.fetchval(b_attempt, wid, b_code, 2), 10, "b#2 made")
        # a worker has room again: only b#2 may leave, under the new owner's epoch
        workers.full = False
        await eventually(lambda: (b2, 2, second.info.epoch) in workers.took, 10, "b#2 dispatched")
        await eventually(lambda: not len(driving.dispatcher) and not driving.dispatcher._sends, 10, "queue empty")
        assert workers.took == [(b2, 2, second.info.epoch)], "an attempt the takeover marked lost left"
        assert first.task is None, "the replaced actor still drives the instance"
