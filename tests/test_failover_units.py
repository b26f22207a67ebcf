"""Which instances a failover sweep may take (no processes): judged against the live masters read after
the candidate orphans, so a master that registered during a long sweep keeps what it took meanwhile."""

from __future__ import annotations

import asyncio

from engine.master.actor import InstanceInfo
from engine.master.failover import FailoverService, still_orphaned
from engine.master.workflow_messages import Attempt
from engine.states import TaskState
from rpc.errors import RpcTimeout
from rpc.messages import HostUpdate, HostUpdateReply


def _row(instance_id: int, host: str, epoch: int) -> dict[str, object]:
    return {"id": instance_id, "host": host, "epoch": epoch}


def test_an_instance_of_a_master_that_registered_since_is_not_taken() -> None:
    # read first: only m1 lived; then m2 registered and took instance 2 from a dead master (epoch 457)
    candidates = [_row(1, "dead:1", 10), _row(2, "m2:1", 457)]
    floors_now = {"m1:1": 0, "m2:1": 450}
    assert [r["id"] for r in still_orphaned(candidates, floors_now)] == [1]


def test_an_earlier_incarnation_s_instance_is_taken_and_the_current_one_s_kept() -> None:
    candidates = [_row(1, "m1:1", 99), _row(2, "m1:1", 100), _row(3, "m1:1", 101)]
    assert [r["id"] for r in still_orphaned(candidates, {"m1:1": 100})] == [1]


class _BarrierRpc:
    """Answers host updates only once ``n`` of them are in flight together."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.in_flight = 0
        self.all_in = asyncio.Event()

    async def call(self, host: str, msg: HostUpdate, *, timeout: float | None = None) -> object:
        self.in_flight += 1
        if self.in_flight == self.n:
            self.all_in.set()
        await self.all_in.wait()
        return HostUpdateReply(known=[[int(host[1]), 1]])


async def test_host_updates_to_the_workers_of_a_taken_over_instance_are_sent_together() -> None:
    # one registered but silent worker must not hold the others (and the rest of the failover) up in turn
    rpc = _BarrierRpc(3)
    svc = FailoverService("m:1", None, None, rpc, lambda: None, {}, lambda *_: None, 5.0)  # type: ignore[arg-type]
    running = [Attempt(i, 1, 0, TaskState.RUNNING_EXECUTION, id=i, host=f"w{i}:1") for i in (1, 2, 3)]
    info = InstanceInfo(7, 100, "w", 0, None, [], "", 0, "default", 1)
    lost, unsure = await asyncio.wait_for(svc._adopt(info, running, {"w1:1", "w2:1", "w3:1"}), 10)
    assert lost == [] and not unsure


class _SilentRpc:
    """One worker never answers (each call to it times out); the others answer."""

    def __init__(self, silent: str) -> None:
        self.silent = silent
        self.calls: list[str] = []

    async def call(self, host: str, msg: HostUpdate, *, timeout: float | None = None) -> object:
        self.calls.append(host)
        if host == self.silent:
            raise RpcTimeout("timed out", maybe_delivered=True)
        return HostUpdateReply(known=[])


async def test_a_worker_silent_once_in_a_sweep_is_not_waited_for_again() -> None:
    rpc = _SilentRpc("w1:1")
    svc = FailoverService("m:1", None, None, rpc, lambda: None, {}, lambda *_: None, 5.0)  # type: ignore[arg-type]
    for instance_id in (7, 8, 9):
        a = Attempt(1, 1, 0, TaskState.RUNNING_EXECUTION, id=instance_id, host="w1:1")
        info = InstanceInfo(instance_id, 100, "w", 0, None, [], "", 0, "default", 1)
        lost, unsure = await svc._adopt(info, [a], {"w1:1"})
        assert lost == [] and unsure  # kept, and asked about again on a later sweep
    assert rpc.calls == ["w1:1"]


class _Run:
    def __init__(self, attempts: list[Attempt]) -> None:
        self.attempts = attempts
        self.logic: set[int] = set()

    def active(self) -> list[Attempt]:
        return self.attempts


class _Actor:
    def __init__(self, attempts: list[Attempt]) -> None:
        self.run = _Run(attempts)


async def test_a_worker_that_registered_while_the_sweep_looked_is_not_judged_lost(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The look for attempts on lost workers lets the loop go between slices of actors; a worker that
    registered meanwhile and was sent an attempt is live, as etcd says when read again after the look."""
    monkeypatch.setattr("engine.master.failover.SWEEP_SLICE", 1)
    on_a = Attempt(1, 1, 0, TaskState.RUNNING_EXECUTION, id=1, host="a:1")
    on_dead = Attempt(1, 1, 0, TaskState.RUNNING_EXECUTION, id=2, host="dead:1")
    later = _Actor([])
    actors = {1: _Actor([on_a]), 2: _Actor([on_dead]), 3: later}
    svc = FailoverService("m:1", None, None, None, lambda: None, actors, lambda *_: None, 5.0)  # type: ignore[arg-type]
    reads = [({"m:1": 1}, {"a:1", "b:1"})]  # etcd read again after the look: b:1 registered meanwhile

    async def live_nodes(node: object) -> tuple[dict[str, int], set[str]]:
        return reads.pop(0)

    monkeypatch.setattr(svc, "_live_nodes", live_nodes)
    real_sleep = asyncio.sleep

    async def a_dispatch_meanwhile(delay: float) -> None:  # the loop runs the dispatcher's ack of b:1
        later.run.attempts = [Attempt(1, 1, 0, TaskState.DISPATCH, id=3, host="b:1")]
        await real_sleep(delay)

    monkeypatch.setattr("engine.master.failover.asyncio.sleep", a_dispatch_meanwhile)
    assert await svc._lost_hosts({"a:1"}) == {"dead:1", "b:1"}  # what the look alone would conclude
    later.run.attempts = []
    assert await svc._hosts_gone(object(), {"a:1"}) == {"dead:1"}  # type: ignore[arg-type]
    assert reads == []


async def test_a_retake_for_workers_that_did_not_answer_is_dropped_once_they_have_all_left() -> None:
    """Taken over while a worker was registered but silent, an instance is taken again to ask it; once every
    such worker has left and the actor holds no active attempt on them (the worker-lost path settled them
    under the actor's epoch), a retake (which would stop the actor and mark an attempt it had queued for a
    live worker lost) is not made. Made all the same: one asked for because our actor failed, one whose
    actor still has an attempt on a silent worker (a worker-lost event it never got), one whose actor is
    stopping (it takes no event) or gone."""
    on_w1 = Attempt(1, 1, 0, TaskState.RUNNING_EXECUTION, id=11, host="w1:1")
    queued = Attempt(2, 1, 0, TaskState.SUBMITTED_SUCCESS, id=12)
    actors = {n: _Actor([queued]) for n in (7, 8, 9, 10, 11)}
    for actor in actors.values():
        actor.task = object()  # type: ignore[attr-defined]
    actors[10].run.attempts.append(on_w1)
    actors[11].task = None  # type: ignore[attr-defined]
    svc = FailoverService("m:1", None, None, None, lambda: None, actors, lambda *_: None, 5.0)  # type: ignore[arg-type]
    svc.retake(7, 100, frozenset({"w1:1", "w2:1"}))
    svc.retake(8, 101)  # its actor failed
    svc.retake(9, 102, frozenset({"w1:1"}))
    svc.retake(10, 103, frozenset({"w1:1"}))
    svc.retake(11, 104, frozenset({"w1:1"}))
    del actors[9]  # no actor drives it any more
    pending = list(svc._retake.items())
    assert svc._due(pending, {"w2:1"}) == pending  # w2:1 is still registered: 7 is asked again too
    assert svc._due(pending, set()) == [(8, 101), (9, 102), (10, 103), (11, 104)]
    assert 7 not in svc._retake and 7 not in svc._unsure
    svc.retake(8, 105, frozenset({"w1:1"}))  # asked again for silence: the earlier reason is replaced
    svc.retake(8, 106)
    assert svc._due([(8, 106)], set()) == [(8, 106)]


async def test_a_submitted_attempt_a_silent_worker_may_hold_is_settled_only_by_asking_again() -> None:
    """Its old owner may have sent it to the worker that did not answer: no leaving settles it (our actor
    never sends an attempt it inherited), so its retake is kept whatever the workers (unsure is None)."""
    svc = FailoverService("m:1", None, None, _SilentRpc("w1:1"), lambda: None, {}, lambda *_: None, 5.0)  # type: ignore[arg-type]
    queued = Attempt(1, 1, 0, TaskState.SUBMITTED_SUCCESS, id=7)
    running = Attempt(2, 1, 0, TaskState.RUNNING_EXECUTION, id=8, host="w1:1")
    info = InstanceInfo(7, 100, "w", 0, None, [], "", 0, "default", 1)
    assert await svc._adopt(info, [queued], {"w1:1", "w2:1"}) == ([], None)
    assert await svc._adopt(info, [running], {"w1:1", "w2:1"}) == ([], {"w1:1"})
