"""Dispatch order, host selectors, which RPC failures may have reached a worker, and what the
dispatcher does with a dispatch in doubt (fake workers: no processes)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import heapq
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.clocks import now_ms
from engine.infra.ports import free_port
from engine.master import dispatcher as dispatcher_module
from engine.master.actor import DispatchRequest
from engine.master.dispatcher import Dispatcher
from engine.master.selectors import (
    WARM_UP_MS,
    Candidate,
    LowerWeightSelector,
    RandomSelector,
    RoundRobinSelector,
    load_weight,
)
from engine.master.workflow_messages import DispatchLost, TaskDispatched, TaskResultEvent
from engine.states import TaskState
from registry import NodeInfo
from registry.heartbeat import Heartbeat
from registry.keys import NodeId
from rpc import RpcClient
from rpc.errors import BadRequest, RpcDisconnected, RpcError, RpcRefused, RpcTimeout, Unauthenticated
from rpc.messages import DispatchBatchReply, DispatchReply, TaskDispatch, TaskDispatchBatch
from tests.helpers import eventually


@given(
    st.lists(st.tuples(st.integers(0, 4), st.integers(1, 50), st.integers(0, 4), st.integers(1, 10_000)), max_size=60)
)
def test_dispatch_queue_follows_dolphinscheduler_order(keys: list[tuple[int, int, int, int]]) -> None:
    heap: list[DispatchRequest] = []
    for key in keys:
        heapq.heappush(heap, DispatchRequest(key, None, "default", None))  # type: ignore[arg-type]
    popped = [heapq.heappop(heap).sort_key for _ in range(len(heap))]
    # workflow priority, then workflow instance id, then task priority, then task instance id
    assert popped == sorted(keys)


def _picks(selector, candidates, n=1000):  # type: ignore[no-untyped-def]
    return collections.Counter(selector.select(candidates).address for _ in range(n))


def test_round_robin_is_smooth_and_weighted() -> None:
    cands = [Candidate("a:1", host_weight=5), Candidate("b:1", host_weight=1), Candidate("c:1", host_weight=1)]
    sel = RoundRobinSelector()
    seq = [sel.select(cands).address for _ in range(7)]
    assert collections.Counter(seq) == {"a:1": 5, "b:1": 1, "c:1": 1}
    assert seq[:3] != ["a:1", "a:1", "a:1"]  # smooth: the heavy host is interleaved, not bunched
    assert _picks(sel, cands, 700) == {"a:1": 500, "b:1": 100, "c:1": 100}


def test_random_is_weighted() -> None:
    cands = [Candidate("a:1", host_weight=300), Candidate("b:1", host_weight=100)]
    counts = _picks(RandomSelector(seed=7), cands, 4000)
    assert 0.70 < counts["a:1"] / 4000 < 0.80
    zero = [Candidate("a:1", host_weight=0), Candidate("b:1", host_weight=0)]
    assert set(_picks(RandomSelector(seed=1), zero, 200)) == {"a:1", "b:1"}


def test_lower_weight_prefers_the_less_loaded_in_proportion() -> None:
    light = Candidate("light:1", cpu_usage=0.1, memory_usage=0.1, load_average=0.5)
    heavy = Candidate("heavy:1", cpu_usage=0.9, memory_usage=0.9, load_average=1.5)
    counts = _picks(LowerWeightSelector(), [light, heavy], 1000)
    ratio = load_weight(heavy) / load_weight(light)
    assert abs(counts["light:1"] / counts["heavy:1"] - ratio) < 0.1 * ratio


def test_lower_weight_rotates_equal_hosts_and_avoids_waiting_ones() -> None:
    idle = [Candidate(f"w{i}:1") for i in range(3)]
    assert _picks(LowerWeightSelector(), idle, 300) == {"w0:1": 100, "w1:1": 100, "w2:1": 100}
    busy = [Candidate("q:1", waiting_tasks=3), Candidate("free:1", load_average=5.0)]
    assert _picks(LowerWeightSelector(), busy, 50) == {"free:1": 50}


def test_warm_up_makes_a_new_worker_look_heavier() -> None:
    old = Candidate("old:1", load_average=1.0)
    new = Candidate("new:1", load_average=1.0, uptime_ms=WARM_UP_MS // 10)
    assert load_weight(new) == 10 * load_weight(old)
    counts = _picks(LowerWeightSelector(), [old, new], 1100)
    assert counts["old:1"] == 1000 and counts["new:1"] == 100


def test_lower_weight_running_totals_start_at_the_hosts_weight() -> None:
    # DolphinScheduler 3.1.9 dispatch/host/assign/HostWeight.java (constructor: currentWeight = weight)
    # and LowerWeightRoundRobin.doSelect (current += weight; lowest wins; winner += total).
    # a (weight 1) and b (weight 2): totals a=1, b=2 -> picks a a b a a b. Starting from 0 gives a b a ...
    a, b = Candidate("a:1", cpu_usage=0.1), Candidate("b:1", cpu_usage=0.2)
    assert (load_weight(a), load_weight(b)) == (1.0, 2.0)
    sel = LowerWeightSelector()
    assert [sel.select([a, b]).address for _ in range(6)] == ["a:1", "a:1", "b:1", "a:1", "a:1", "b:1"]


# -- which RPC failures may have reached the worker (rpc.client's classification) -------------------


@contextlib.asynccontextmanager
async def _raw_server(on_request: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]):  # type: ignore[no-untyped-def]
    """A loopback TCP server that reads one HTTP request head, then does what ``on_request`` does."""
    handlers: set[asyncio.Task[None]] = set()
    writers: set[asyncio.StreamWriter] = set()
    received = asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handlers.add(asyncio.current_task())  # type: ignore[arg-type]
        writers.add(writer)
        try:
            await reader.readuntil(b"\r\n\r\n")
            received.set()
            await on_request(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield f"127.0.0.1:{server.sockets[0].getsockname()[1]}", received
    finally:
        server.close()
        for w in writers:
            w.transport.abort()  # handlers waiting for the client see the end of the stream
        await asyncio.gather(*handlers, return_exceptions=True)
        await server.wait_closed()


async def _never_answer(reader: asyncio.StreamReader, _: asyncio.StreamWriter) -> None:
    await reader.read()  # until the client gives up


async def _close(_: asyncio.StreamReader, __: asyncio.StreamWriter) -> None:
    pass  # the connection is closed with the request unanswered


async def _reset(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close -> RST


def _answer(status: int, body: bytes) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
    async def answer(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        writer.write(head.encode() + body)
        await writer.drain()

    return answer


def _msg() -> TaskDispatch:
    return TaskDispatch(1, 1, 2, 3, 4, "t", "SHELL", {"rawScript": "true"}, "127.0.0.1:1")


@pytest.fixture
async def client() -> AsyncIterator[RpcClient]:
    c = RpcClient("s", timeout=5, limit_per_host=1)
    yield c
    await c.close()


async def _failure(client: RpcClient, address: str, timeout: float | None = None) -> RpcError:
    with pytest.raises(RpcError) as info:
        await client.call(address, _msg(), timeout=timeout)
    return info.value


async def test_nothing_listening_is_refused_and_certainly_not_delivered(client: RpcClient) -> None:
    exc = await _failure(client, f"127.0.0.1:{free_port()}")
    assert type(exc) is RpcRefused and exc.maybe_delivered is False


async def test_an_unknown_host_is_not_delivered(client: RpcClient) -> None:
    exc = await _failure(client, "no-such-worker.invalid:1234")
    assert exc.maybe_delivered is False  # refused by the resolver, or timed out resolving: nothing sent


@pytest.mark.parametrize(
    ("behaviour", "kind"),
    [(_never_answer, RpcTimeout), (_close, RpcDisconnected), (_reset, RpcDisconnected)],
    ids=["no-reply", "closed", "reset"],
)
async def test_a_failure_after_the_request_was_written_may_have_been_delivered(client, behaviour, kind) -> None:  # type: ignore[no-untyped-def]
    async with _raw_server(behaviour) as (address, _):
        exc = await _failure(client, address, timeout=0.5)
    assert type(exc) is kind and exc.maybe_delivered is True


async def test_a_timeout_waiting_for_a_pooled_connection_was_not_delivered(client: RpcClient) -> None:
    async with _raw_server(_never_answer) as (address, received):
        first = asyncio.create_task(_failure(client, address, timeout=3))
        await received.wait()  # the first call holds the only connection (longer than the second waits)
        exc = await _failure(client, address, timeout=0.3)  # queued behind it until its own timeout
        assert (await first).maybe_delivered is True
    assert type(exc) is RpcTimeout and exc.maybe_delivered is False
    assert "before the request was sent" in str(exc)


@pytest.mark.parametrize(
    ("status", "body", "kind", "maybe"),
    [
        (400, b'{"error": "TaskDispatch.attempt: required field missing"}', BadRequest, False),
        (401, b'{"error": "bad signature"}', Unauthenticated, False),
        (500, b'{"error": "task.dispatch failed on the server"}', RpcError, True),
        (200, b"not json", RpcError, True),
        (200, b'{"accepted": "yes"}', RpcError, True),
    ],
    ids=["400", "401", "500", "200-not-json", "200-bad-reply"],
)
async def test_answers_say_whether_the_handler_may_have_acted(client, status, body, kind, maybe) -> None:  # type: ignore[no-untyped-def]
    async with _raw_server(_answer(status, body)) as (address, _):
        exc = await _failure(client, address)
    assert type(exc) is kind and exc.maybe_delivered is maybe


# -- the dispatcher with a dispatch in doubt (fake workers, fake actors) ---------------------------


class _FakeRun:
    def __init__(self) -> None:
        #: (task instance id, attempt) a worker reported on (or that ended): no longer waiting for a worker
        self.reported: set[tuple[int, int]] = set()
        #: the run is stopping: it wants nothing more sent
        self.stopping = False

    def awaits_dispatch(self, task_instance_id: int, attempt: int) -> bool:
        return (task_instance_id, attempt) not in self.reported

    def wants_dispatch(self, task_instance_id: int, attempt: int) -> bool:
        return not self.stopping and self.awaits_dispatch(task_instance_id, attempt)


class _FakeActor:
    def __init__(self) -> None:
        self.task = object()  # alive
        self.run = _FakeRun()
        self.events: list[object] = []
        self.report_on_dispatched = False

    def post(self, event: object) -> None:
        self.events.append(event)
        if self.report_on_dispatched and isinstance(event, TaskDispatched):
            self.run.reported.add((event.task_instance_id, event.attempt))


class _FakeRpc:
    """Answers dispatches by a script: ``script(host, message)`` returns a reply or raises."""

    def __init__(self, script: Callable[[str, object], object]) -> None:
        self.script = script
        #: (host, task instance ids, epoch ms sent, outcome)
        self.calls: list[tuple[str, tuple[int, ...], int, object]] = []

    async def call(self, host: str, msg: object, *, timeout: float | None = None) -> object:
        ids = (
            tuple(t.task_instance_id for t in msg.tasks)
            if isinstance(msg, TaskDispatchBatch)
            else (msg.task_instance_id,)
        )  # type: ignore[attr-defined]
        sent = now_ms()
        try:
            outcome = self.script(host, msg)
        except RpcError as exc:
            self.calls.append((host, ids, sent, exc))
            raise
        self.calls.append((host, ids, sent, outcome))
        return outcome

    def hosts(self) -> list[str]:
        return [c[0] for c in self.calls]


def _worker(address: str, revision: int = 1) -> NodeInfo:
    hb = Heartbeat(startup_time=1, report_time=1, cpu_usage=0.1, memory_usage=0.1, load_average=0.1,
                   available_memory_gb=8, disk_available_gb=8, pid=1, exec_slots=10)  # fmt: skip
    return NodeInfo(NodeId("worker", address, "default"), hb, revision)


def _request(actor: _FakeActor, tid: int) -> DispatchRequest:
    msg = TaskDispatch(tid, 1, 2, 3, tid * 10, f"t{tid}", "SHELL", {"rawScript": "true"}, "m:1")
    return DispatchRequest((0, 2, 0, tid), msg, "default", actor)  # type: ignore[arg-type]


@contextlib.asynccontextmanager
async def _dispatcher(rpc: _FakeRpc, workers: list[NodeInfo], valid_for_ms: int = 60_000):  # type: ignore[no-untyped-def]
    d = Dispatcher(rpc, lambda _group: list(workers), selector="round_robin", retry_delay=0.01,  # type: ignore[arg-type]
                   valid_until=lambda: now_ms() + valid_for_ms)  # fmt: skip
    d.start()
    try:
        yield d
    finally:
        await d.close()


def _timeout_first(then: Callable[[str, object], object]) -> Callable[[str, object], object]:
    """The first dispatch times out after it was written; later calls answer as ``then`` does."""
    calls = []

    def script(host: str, msg: object) -> object:
        calls.append(host)
        if len(calls) == 1:
            raise RpcTimeout("timed out", maybe_delivered=True)
        return then(host, msg)

    return script


def _first_host(rpc: _FakeRpc) -> str:
    return rpc.calls[0][0]


async def test_a_dispatch_that_may_have_been_delivered_goes_to_no_other_worker() -> None:
    accepted = DispatchReply(True, "already running", 5)
    rpc = _FakeRpc(_timeout_first(lambda _h, _m: accepted))
    actor = _FakeActor()
    async with _dispatcher(rpc, [_worker("a:1"), _worker("b:1")]) as d:
        d.submit(_request(actor, 7))
        await eventually(lambda: len(rpc.calls) >= 2, 5, "the worker asked again")
        first = _first_host(rpc)
        await eventually(lambda: not d._doubts, 5, "the doubt resolved")
    assert rpc.hosts() == [first, first]  # asked the same worker, never the other
    assert actor.events == [TaskDispatched(7, 1, first, "dispatch in doubt")]


async def test_an_accepted_dispatch_carries_the_incarnation_that_took_it() -> None:
    def script(_host: str, msg: object) -> object:
        if isinstance(msg, TaskDispatchBatch):
            return DispatchBatchReply([DispatchReply(True, "", 5, 43) for _ in msg.tasks], 5)
        return DispatchReply(True, "", 5, incarnation=42)

    rpc = _FakeRpc(script)
    actor = _FakeActor()
    async with _dispatcher(rpc, [_worker("a:1", revision=41)]) as d:
        d.submit(_request(actor, 7))  # sent alone
        await eventually(lambda: actor.events, 5, "the attempt dispatched")
        d.submit(_request(actor, 8))  # these two in one batch
        d.submit(_request(actor, 9))
        await eventually(lambda: len(actor.events) == 3, 5, "the batch dispatched")
    # what the worker said, not the revision the master's view had (that may be the one it replaced)
    assert actor.events == [
        TaskDispatched(7, 1, "a:1", "dispatch accepted", 42),
        TaskDispatched(8, 1, "a:1", "dispatch accepted", 43),
        TaskDispatched(9, 1, "a:1", "dispatch accepted", 43),
    ]


async def test_a_dispatch_that_certainly_was_not_delivered_goes_to_the_next_worker() -> None:
    def script(host: str, msg: object) -> object:
        if not rpc.calls:
            raise RpcRefused("connection refused")
        return DispatchReply(True, "", 5)

    rpc = _FakeRpc(script)
    actor = _FakeActor()
    async with _dispatcher(rpc, [_worker("a:1"), _worker("b:1")]) as d:
        d.submit(_request(actor, 7))
        await eventually(lambda: actor.events, 5, "the attempt dispatched")
    first, second = rpc.hosts()
    assert first != second and not d._doubts
    assert actor.events == [TaskDispatched(7, 1, second, "dispatch accepted")]


async def test_a_report_from_the_worker_settles_a_dispatch_in_doubt() -> None:
    rpc = _FakeRpc(_timeout_first(lambda _h, _m: DispatchReply(False, "all 10 exec slots are busy", 0)))
    actor = _FakeActor()
    actor.report_on_dispatched = True  # the worker's RUNNING report is in before the dispatcher asks
    async with _dispatcher(rpc, [_worker("a:1"), _worker("b:1")]) as d:
        d.submit(_request(actor, 7))
        await eventually(lambda: actor.events and not d._doubts, 5, "the doubt settled")
    assert len(rpc.calls) == 1
    assert actor.events == [TaskDispatched(7, 1, _first_host(rpc), "dispatch in doubt")]


async def test_a_refusal_proves_the_attempt_is_not_there_only_once_every_copy_has_expired(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(dispatcher_module, "DOUBT_MARGIN_MS", 0)
    busy = DispatchReply(False, "all 10 exec slots are busy", 0)
    rpc = _FakeRpc(_timeout_first(lambda _h, _m: busy))
    actor = _FakeActor()
    async with _dispatcher(rpc, [_worker("a:1"), _worker("b:1")], valid_for_ms=300) as d:
        d.submit(_request(actor, 7))
        await eventually(lambda: len(actor.events) == 2, 10, "the attempt given up on that worker")
        expired = rpc.calls[0][2] + 300
    first = _first_host(rpc)
    assert rpc.hosts() == [first] * len(rpc.calls)
    refused_early = [c for c in rpc.calls[1:] if c[2] <= expired]
    assert refused_early, "a refusal while the first copy could still arrive must not decide"
    assert rpc.calls[-1][2] > expired and rpc.calls[-1][3] == busy
    assert actor.events == [
        TaskDispatched(7, 1, first, "dispatch in doubt"),
        DispatchLost(7, 1, first, "not taken: all 10 exec slots are busy"),
    ]


async def test_a_dispatch_in_doubt_expires_on_the_monotonic_clock_whatever_the_wall_clock_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the master's wall clock steps back an hour once the send is in doubt: its copies still expire when
    # they were due (300 ms on), and the refusal after that decides
    monkeypatch.setattr(dispatcher_module, "DOUBT_MARGIN_MS", 0)
    busy = DispatchReply(False, "all 10 exec slots are busy", 0)
    real_now_ms = dispatcher_module.now_ms

    def step_back_then_refuse(_host: str, _msg: object) -> object:
        monkeypatch.setattr(dispatcher_module, "now_ms", lambda: real_now_ms() - 3_600_000)
        return busy

    rpc = _FakeRpc(_timeout_first(step_back_then_refuse))
    actor = _FakeActor()
    async with _dispatcher(rpc, [_worker("a:1")], valid_for_ms=300) as d:
        d.submit(_request(actor, 7))
        await eventually(lambda: len(actor.events) == 2, 10, "the attempt given up on that worker")
    first = _first_host(rpc)
    assert actor.events == [
        TaskDispatched(7, 1, first, "dispatch in doubt"),
        DispatchLost(7, 1, first, "not taken: all 10 exec slots are busy"),
    ]


async def test_a_worker_gone_with_a_dispatch_in_doubt_is_left_to_worker_failover() -> None:
    workers = [_worker("a:1"), _worker("b:1")]

    def script(host: str, msg: object) -> object:
        if not rpc.calls:  # the first worker times out, then restarts at the same address (a new key)
            workers[:] = [w if w.address != host else _worker(host, revision=2) for w in workers]
            raise RpcTimeout("timed out", maybe_delivered=True)
        return DispatchReply(True, "", 5)

    rpc = _FakeRpc(script)
    actor = _FakeActor()
    async with _dispatcher(rpc, workers) as d:
        d.submit(_request(actor, 7))
        await eventually(lambda: actor.events and not d._doubts, 5, "the doubt dropped")
    assert len(rpc.calls) == 1  # neither the new process at that address nor the other worker is sent it
    assert actor.events == [TaskDispatched(7, 1, _first_host(rpc), "dispatch in doubt")]


async def test_a_batch_in_doubt_is_asked_about_as_a_batch_on_the_same_worker() -> None:
    def script(host: str, msg: object) -> object:
        if not rpc.calls:
            raise RpcDisconnected("reset after the request was written")
        assert isinstance(msg, TaskDispatchBatch)
        return DispatchBatchReply([DispatchReply(True, "already running"), DispatchReply(True, "")], 3)

    rpc = _FakeRpc(script)
    actor = _FakeActor()
    async with _dispatcher(rpc, [_worker("a:1")]) as d:
        d.submit(_request(actor, 7))
        d.submit(_request(actor, 8))
        await eventually(lambda: len(rpc.calls) >= 2 and not d._doubts, 5, "the batch asked about again")
    assert [(c[0], c[1]) for c in rpc.calls] == [("a:1", (7, 8)), ("a:1", (7, 8))]
    assert actor.events == [
        TaskDispatched(7, 1, "a:1", "dispatch in doubt"),
        TaskDispatched(8, 1, "a:1", "dispatch in doubt"),
    ]


class _GatedRpc(_FakeRpc):
    """The first call waits for ``gate`` before the script answers it (a slow worker, a held reply)."""

    def __init__(self, script: Callable[[str, object], object]) -> None:
        super().__init__(script)
        self.gate = asyncio.Event()
        self.first_in = asyncio.Event()

    async def call(self, host: str, msg: object, *, timeout: float | None = None) -> object:
        if not self.first_in.is_set():
            self.first_in.set()
            await self.gate.wait()
        return await super().call(host, msg, timeout=timeout)


async def test_a_send_planned_before_its_actor_ended_never_leaves() -> None:
    # the only send slot is busy; the next attempt is planned and waits for it; meanwhile the master lost
    # its lease (its actors stopped) and registered anew: the planned send must not leave under the new
    # lease with the old owner's epoch (a worker that never heard of the next owner would run it twice)
    rpc = _GatedRpc(lambda _h, _m: DispatchReply(True, "", 5))
    busy, fenced = _FakeActor(), _FakeActor()
    d = Dispatcher(rpc, lambda _group: [_worker("a:1")], selector="round_robin", retry_delay=0.01,  # type: ignore[arg-type]
                   concurrency=1, valid_until=lambda: now_ms() + 60_000)  # fmt: skip
    d.start()
    try:
        d.submit(_request(busy, 7))
        await rpc.first_in.wait()
        d.submit(_request(fenced, 8))
        await eventually(lambda: not d._heap, 5, "the second attempt planned")
        fenced.task = None  # type: ignore[assignment]
        rpc.gate.set()
        await eventually(lambda: busy.events and not d._sends, 5, "every planned send done")
    finally:
        await d.close()
    assert [c[1] for c in rpc.calls] == [(7,)]
    assert fenced.events == []


def _killed(actor: _FakeActor) -> list[int]:
    return [e.task_instance_id for e in actor.events if isinstance(e, TaskResultEvent) and e.state is TaskState.KILL]


async def test_a_queued_attempt_of_a_stopped_run_is_dropped_and_ends_kill() -> None:
    # no live worker in the group: the attempts wait in the queue; the run stops; cancel drops them (each
    # reported KILL, so the run can end STOP), and another run's attempt stays queued
    rpc = _FakeRpc(lambda _h, _m: DispatchReply(True, "", 5))
    stopped, other = _FakeActor(), _FakeActor()
    async with _dispatcher(rpc, []) as d:
        d.submit(_request(stopped, 7))
        d.submit(_request(stopped, 8))
        d.submit(_request(other, 9))
        await eventually(lambda: len(d._waiting.get("default", ())) == 3, 5, "every attempt waiting for a worker")
        stopped.run.stopping = True
        d.cancel(stopped)
        assert len(d) == 1 and sorted(_killed(stopped)) == [7, 8] and other.events == []
    assert rpc.calls == []


async def test_a_send_planned_before_its_run_stopped_never_leaves() -> None:
    # the only send slot is busy; the next attempt is planned and waits for it; meanwhile its run stopped:
    # it must not leave (it would run after the stop), and it ends KILL instead
    rpc = _GatedRpc(lambda _h, _m: DispatchReply(True, "", 5))
    busy, stopping = _FakeActor(), _FakeActor()
    d = Dispatcher(rpc, lambda _group: [_worker("a:1")], selector="round_robin", retry_delay=0.01,  # type: ignore[arg-type]
                   concurrency=1, valid_until=lambda: now_ms() + 60_000)  # fmt: skip
    d.start()
    try:
        d.submit(_request(busy, 7))
        await rpc.first_in.wait()
        d.submit(_request(stopping, 8))
        await eventually(lambda: not d._heap, 5, "the second attempt planned")
        stopping.run.stopping = True
        rpc.gate.set()
        await eventually(lambda: busy.events and not d._sends, 5, "every planned send done")
    finally:
        await d.close()
    assert [c[1] for c in rpc.calls] == [(7,)]
    assert _killed(stopping) == [8] and len(stopping.events) == 1


async def test_an_attempt_refused_after_its_actor_ended_tries_no_other_worker() -> None:
    rpc = _GatedRpc(lambda _h, _m: DispatchReply(False, "all 10 exec slots are busy", 0))
    actor = _FakeActor()
    async with _dispatcher(rpc, [_worker("a:1"), _worker("b:1")]) as d:
        d.submit(_request(actor, 7))
        await rpc.first_in.wait()
        actor.task = None  # type: ignore[assignment]
        rpc.gate.set()
        await eventually(lambda: rpc.calls and not d._sends, 5, "the refusal handled")
    assert len(rpc.calls) == 1 and actor.events == []


async def test_a_batch_too_large_for_the_worker_is_sent_again_one_attempt_at_a_time() -> None:
    # a 413 (the batch over the worker's rpc.max_body_bytes): refused before any handler ran
    def script(host: str, msg: object) -> object:
        if isinstance(msg, TaskDispatchBatch):
            raise BadRequest("task.dispatch_batch: HTTP 413: request body too large", 413)
        return DispatchReply(True, "", 5)

    rpc = _FakeRpc(script)
    actor = _FakeActor()
    async with _dispatcher(rpc, [_worker("a:1")]) as d:
        d.submit(_request(actor, 7))
        d.submit(_request(actor, 8))
        await eventually(lambda: len(actor.events) == 2, 5, "both attempts dispatched")
    assert [c[1] for c in rpc.calls] == [(7, 8), (7,), (8,)]
    assert sorted(e.task_instance_id for e in actor.events) == [7, 8]  # type: ignore[attr-defined]


@pytest.mark.parametrize("error", [Unauthenticated("HTTP 401", 401), BadRequest("HTTP 400: unknown field", 400)])
async def test_a_batch_refused_by_every_worker_waits_in_the_queue_not_dropped(error: BadRequest) -> None:
    def script(host: str, msg: object) -> object:
        raise error

    rpc = _FakeRpc(script)
    actor = _FakeActor()
    async with _dispatcher(rpc, [_worker("a:1"), _worker("b:1")]) as d:
        d.submit(_request(actor, 7))
        d.submit(_request(actor, 8))
        d.submit(_request(actor, 9))
        d.submit(_request(actor, 10))
        # every attempt asked of both workers on its own, then parked for the next try
        await eventually(lambda: {c[1] for c in rpc.calls if len(c[1]) == 1} >= {(7,), (8,), (9,), (10,)}, 5, "singles")
        await eventually(lambda: len(d) == 4 and not d._sends, 5, "every attempt waiting")
    assert actor.events == []
