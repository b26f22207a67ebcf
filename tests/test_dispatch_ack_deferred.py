"""An accepted dispatch's DISPATCH and host are written with the attempt's next write (its RUNNING or its
result: one statement instead of two), or on their own once ``actor.DEFER_SECONDS`` pass without one; a
takeover meanwhile finds the attempt SUBMITTED and settles it by asking the live workers (one a worker
names is driven as dispatched there). Real actors,
dispatcher and PostgreSQL; the workers are faked at the RPC (tests/test_failover_takeover.py's)."""

from __future__ import annotations

import time

import asyncpg
import pytest

from engine.master import actor as actor_mod
from engine.master.commands import DefinitionCache
from engine.master.failover import FailoverService
from engine.master.store import WriteBatch
from engine.master.workflow_messages import TaskRunningEvent
from engine.states import TaskState
from tests.cluster_harness import save, shell
from tests.helpers import eventually
from tests.test_failover_takeover import DEAD, ME, _Driving, _Workers, instance

W1 = "127.0.0.1:7101"
ATTEMPT = "SELECT id, state, host FROM task_instance WHERE workflow_instance_id = $1"


def _free_workers() -> _Workers:
    """W1 as the master's RPC sees it, with room: it takes every dispatch."""
    workers = _Workers({})
    workers.full = False
    return workers


def _service(pool: asyncpg.Pool, driving: _Driving, workers: _Workers) -> FailoverService:
    return FailoverService(ME, driving.store, DefinitionCache(pool), workers, lambda: None, driving.actors,  # type: ignore[arg-type]
                           driving.start_actor, 5.0)  # fmt: skip


async def _driven(pool: asyncpg.Pool, fresh_db: str, driving: _Driving, workers: _Workers, name: str) -> int:
    """A one-task instance of a dead master, taken over and driven here; its attempt accepted by W1."""
    code = await save(fresh_db, name, [shell("a", "sleep 60")])
    wid, epoch = await instance(pool, DEAD, code)
    assert await _service(pool, driving, workers)._take(wid, DEAD, epoch, {W1})
    await eventually(lambda: workers.took, 10, "the attempt dispatched")
    return wid


async def _taken_again(pool: asyncpg.Pool, driving: _Driving, workers: _Workers, wid: int) -> FailoverService:
    """Our actor of ``wid`` stops as a dead master's would (nothing more of it is written) and the instance
    is taken over again while W1 runs its attempt, its RUNNING not sent yet; the service that took it."""
    await driving.actors[wid].stop()
    ti, attempt, _ = workers.took[0]
    epoch = await pool.fetchval("SELECT epoch FROM workflow_instance WHERE id = $1", wid)
    workers.running[W1] = [[ti, attempt]]
    svc = _service(pool, driving, workers)
    assert await svc._take(wid, ME, epoch, {W1})
    return svc


def _acknowledged(actor: actor_mod.WorkflowActor) -> bool:
    return [a.state for a in actor.run.attempts()] == [TaskState.DISPATCH]


async def test_the_dispatch_acknowledgement_travels_with_the_running_report(
    pool: asyncpg.Pool, fresh_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(actor_mod, "DEFER_SECONDS", 60.0)
    workers = _free_workers()
    async with _Driving(pool, workers, [W1]) as driving:
        writes: list[WriteBatch] = []
        real = driving.store.write_retrying

        async def recorded(instance_id: int, epoch: int, batch: WriteBatch, max_delay: float = 5.0) -> list[int]:
            writes.append(batch)
            return await real(instance_id, epoch, batch, max_delay)

        driving.store.write_retrying = recorded  # type: ignore[method-assign]
        wid = await _driven(pool, fresh_db, driving, workers, "ack-with-running")
        actor = driving.actors[wid]
        ti = workers.took[0][0]
        await eventually(lambda: _acknowledged(actor), 10, "the acknowledgement handled")
        row = await pool.fetchrow(ATTEMPT, wid)
        assert TaskState(row["state"]) is TaskState.SUBMITTED_SUCCESS and not row["host"], "written on its own"
        done = actor.post(TaskRunningEvent(ti, 1, W1, 4242, "/l", "/x", int(time.time() * 1000)), wait=True)
        assert done is not None and await done
        row = await pool.fetchrow(ATTEMPT, wid)
        assert (TaskState(row["state"]), row["host"]) == (TaskState.RUNNING_EXECUTION, W1)
        ours = [[(u.state, u.fields.get("host")) for u in w.updates if u.task_instance_id == ti] for w in writes]
        ours = [u for u in ours if u]
        assert ours == [[(int(TaskState.DISPATCH), W1), (int(TaskState.RUNNING_EXECUTION), W1)]], ours


async def test_a_dispatch_acknowledgement_nothing_follows_is_written_on_its_own(
    pool: asyncpg.Pool, fresh_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(actor_mod, "DEFER_SECONDS", 0.05)
    workers = _free_workers()
    async with _Driving(pool, workers, [W1]) as driving:
        wid = await _driven(pool, fresh_db, driving, workers, "ack-alone")

        async def dispatched() -> bool:
            row = await pool.fetchrow(ATTEMPT, wid)
            return TaskState(row["state"]) is TaskState.DISPATCH and row["host"] == W1

        await eventually(dispatched, 10, "DISPATCH and the host written")
        assert driving.actors[wid].task is not None, "the actor stopped"


async def test_a_takeover_before_the_acknowledgement_is_written_keeps_the_attempt_the_worker_runs(
    pool: asyncpg.Pool, fresh_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the master that dispatched dies inside the deferral: the row says SUBMITTED with no host; the next
    # owner asks every live worker, W1 says it runs the attempt, and it is not run again
    monkeypatch.setattr(actor_mod, "DEFER_SECONDS", 60.0)
    workers = _free_workers()
    async with _Driving(pool, workers, [W1]) as driving:
        wid = await _driven(pool, fresh_db, driving, workers, "ack-takeover")
        actor = driving.actors[wid]
        await eventually(lambda: _acknowledged(actor), 10, "the acknowledgement handled")
        await _taken_again(pool, driving, workers, wid)
        ti = workers.took[0][0]
        again = driving.actors[wid]
        assert again is not actor
        row = await pool.fetchrow(ATTEMPT, wid)
        # the takeover writes no attempt it keeps: the row is as the dead master left it, never acknowledged
        assert row["id"] == ti and TaskState(row["state"]) is TaskState.SUBMITTED_SUCCESS and not row["host"]
        assert len(workers.took) == 1, "the attempt was dispatched again"
        assert await pool.fetchval("SELECT count(*) FROM task_instance WHERE workflow_instance_id = $1", wid) == 1


@pytest.mark.parametrize("written", [True, False], ids=["written", "deferred"])
async def test_the_worker_of_an_attempt_taken_over_inside_the_deferral_is_lost_it_runs_again(
    pool: asyncpg.Pool, fresh_db: str, monkeypatch: pytest.MonkeyPatch, written: bool
) -> None:
    # a hostile review's case: the next owner adopted the attempt W1 named as SUBMITTED with no host, so
    # W1's loss passed it by (only attempts dispatched to the lost host are), and the instance waited forever
    monkeypatch.setattr(actor_mod, "DEFER_SECONDS", 0.05 if written else 60.0)
    workers = _free_workers()
    async with _Driving(pool, workers, [W1]) as driving:
        wid = await _driven(pool, fresh_db, driving, workers, f"lost-after-takeover-{written}")
        actor = driving.actors[wid]
        await eventually(lambda: _acknowledged(actor), 10, "the acknowledgement handled")
        if written:

            async def on_disk() -> bool:
                return (await pool.fetchrow(ATTEMPT, wid))["host"] == W1

            await eventually(on_disk, 10, "DISPATCH written")
        svc = await _taken_again(pool, driving, workers, wid)
        ti = workers.took[0][0]
        assert [(a.state, a.host) for a in driving.actors[wid].run.attempts()] == [(TaskState.DISPATCH, W1)]
        workers.running[W1] = []
        svc.worker_lost(W1)
        await eventually(lambda: len(workers.took) == 2, 10, "the attempt run again after its worker was lost")
        assert workers.took[1][1] == 2 and workers.took[1][0] != ti, workers.took
        state = await pool.fetchval("SELECT state FROM task_instance WHERE id = $1", ti)
        assert TaskState(state) is TaskState.NEED_FAULT_TOLERANCE
