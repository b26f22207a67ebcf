"""Sessions against a real etcd: keep-alive, revoke, orphan, and the LOST judgement under etcd
pauses (SIGSTOP) and restarts."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from engine.infra.etcd import EtcdServer
from engine.infra.ports import free_port
from registry import EtcdClient, Session, SessionState
from registry.errors import RegistryUnavailable
from tests import tls
from tests.helpers import eventually


async def test_keepalive_holds_the_lease_past_its_ttl(etcd: EtcdClient, etcd_root: str) -> None:
    session = await Session(etcd, ttl=2, keepalive_interval=0.5).start()
    key = f"{etcd_root}/alive"
    await etcd.put(key, "x", lease=session.lease_id)
    await asyncio.sleep(5)  # the point of the test: 2.5 x TTL of wall time passes
    assert session.state is SessionState.CONNECTED
    assert await etcd.get(key) is not None
    assert await etcd.time_to_live(session.lease_id) > 0
    await session.close()
    assert await etcd.get(key) is None  # revoked: gone at once, not after the TTL
    assert session.lost.is_set() and session.state is SessionState.CLOSED
    await session.close()  # idempotent


async def test_orphaned_session_expires_within_its_ttl(etcd: EtcdClient, etcd_root: str) -> None:
    session = await Session(etcd, ttl=2, keepalive_interval=0.5).start()
    key = f"{etcd_root}/orphan"
    await etcd.put(key, "x", lease=session.lease_id)
    start = time.monotonic()
    await session.orphan()
    assert await etcd.get(key) is not None
    await eventually(lambda: _missing(etcd, key), timeout=4, what="orphaned key to expire")
    assert time.monotonic() - start <= 2 + 1.5


async def _missing(etcd: EtcdClient, key: str) -> bool:
    return await etcd.get(key) is None


async def test_sigstopped_etcd_makes_the_session_lost_within_one_ttl(
    etcd_factory: Callable[[], EtcdServer],
) -> None:
    server = etcd_factory()
    client = EtcdClient([server.endpoint], request_timeout=0.5, access=tls.etcd_access())
    states: list[SessionState] = []
    session = await Session(client, ttl=2, keepalive_interval=0.5).start()
    session.subscribe(states.append)
    assert server.proc and server.proc.record
    stopped_at = time.monotonic()
    server.proc.record.signal(signal.SIGSTOP)
    try:
        await asyncio.wait_for(session.lost.wait(), timeout=5)
        took = time.monotonic() - stopped_at
    finally:
        server.proc.record.signal(signal.SIGCONT)
    assert session.state is SessionState.LOST
    assert states[0] is SessionState.SUSPENDED and states[-1] is SessionState.LOST
    assert took <= 2 + 0.5, f"LOST after {took:.2f}s, TTL is 2s"
    # the lease is really gone once etcd runs again: LOST was not a false alarm we could ignore
    await eventually(lambda: _lease_gone(client, session.lease_id), timeout=5, what="lease expiry")
    await session.close()
    await client.close()


async def _lease_gone(client: EtcdClient, lease: int) -> bool:
    return await client.time_to_live(lease) <= 0


async def test_session_survives_an_etcd_restart_shorter_than_its_ttl(
    etcd_factory: Callable[[], EtcdServer],
) -> None:
    server = etcd_factory()
    client = EtcdClient([server.endpoint], request_timeout=0.5, access=tls.etcd_access())
    states: list[SessionState] = []
    session = await Session(client, ttl=8, keepalive_interval=0.5).start()
    session.subscribe(states.append)
    await client.put("/restart/key", "v", lease=session.lease_id)
    await asyncio.to_thread(server.stop)
    await eventually(lambda: session.state is SessionState.SUSPENDED, timeout=5, what="SUSPENDED")
    await asyncio.to_thread(server.start)
    await eventually(lambda: session.state is SessionState.CONNECTED, timeout=8, what="CONNECTED again")
    assert states == [SessionState.SUSPENDED, SessionState.CONNECTED]
    assert (await client.get("/restart/key")) is not None
    await session.close()
    await client.close()


async def test_etcd_down_longer_than_the_ttl_reports_lost(etcd_factory: Callable[[], EtcdServer]) -> None:
    server = etcd_factory()
    client = EtcdClient([server.endpoint], request_timeout=0.5, access=tls.etcd_access())
    session = await Session(client, ttl=2, keepalive_interval=0.5).start()
    await asyncio.to_thread(server.stop)
    await asyncio.wait_for(session.lost.wait(), timeout=4)
    assert session.state is SessionState.LOST
    await asyncio.to_thread(server.start)
    await session.close()
    await client.close()


async def test_start_fails_cleanly_when_etcd_is_unreachable() -> None:
    from engine.infra.ports import free_port
    from registry import RegistryUnavailable

    client = EtcdClient([f"http://127.0.0.1:{free_port()}"], request_timeout=0.5)
    session = Session(client, ttl=2, keepalive_interval=0.5)
    try:
        await session.start()
    except RegistryUnavailable as exc:
        assert "lease grant" in str(exc)
    else:
        raise AssertionError("start() should fail without etcd")
    finally:
        await client.close()


async def test_a_saturated_event_loop_does_not_lose_the_lease(etcd: EtcdClient, etcd_root: str) -> None:
    """A node busy starting hundreds of tasks must not fence itself (DolphinScheduler #8110): the
    keep-alive runs on its own thread, and a loop that is busy (one blocking step after another for
    1.5 TTLs, each far longer than a normal callback) still ticks between its steps, so the loop
    watchdog keeps renewing."""
    session = await Session(etcd, ttl=2, keepalive_interval=0.5).start()
    key = f"{etcd_root}/busy"
    await etcd.put(key, "x", lease=session.lease_id)
    busy_until = time.monotonic() + 3
    while time.monotonic() < busy_until:
        time.sleep(0.1)  # noqa: ASYNC251 - deliberately block the loop, as a saturated node would
        await asyncio.sleep(0)
    assert session.state is SessionState.CONNECTED
    assert await etcd.get(key) is not None
    await session.close()


async def test_a_wedged_event_loop_lets_the_lease_expire(etcd: EtcdClient, etcd_root: str) -> None:
    """A loop blocked for good (a deadlock, a blocking call) stops the keep-alive thread's renewals
    once it has not ticked for loop_stall_limit: the lease expires while the loop is still blocked (its
    peers fail it over), no renewal reaches the worker's reaper after that, and the session is LOST
    once the loop runs again."""
    session = await Session(etcd, ttl=2, keepalive_interval=0.5, loop_stall_limit=0.5).start()
    key = f"{etcd_root}/wedged"
    await etcd.put(key, "x", lease=session.lease_id)
    renewals: list[float] = []
    session.renewed.append(renewals.append)
    gone = threading.Event()

    def watch_lease() -> None:  # its own loop and client: the test's loop is about to be blocked
        async def poll() -> None:
            client = EtcdClient(etcd.endpoints, request_timeout=1, access=etcd.access)
            try:
                await eventually(lambda: _missing(client, key), timeout=15, what="the lease's key to expire")
                gone.set()
            finally:
                await client.close()

        with contextlib.suppress(AssertionError):
            asyncio.run(poll())

    watcher = threading.Thread(target=watch_lease)
    watcher.start()
    gone.wait(20)  # the wedge: the loop blocks until the lease is gone (or the watcher gives up)
    renewed_while_wedged = len(renewals)
    watcher.join()
    assert gone.is_set(), "the lease of a wedged loop was kept alive"
    assert await _lease_gone(etcd, session.lease_id)
    await eventually(lambda: session.state is SessionState.LOST, timeout=5, what="LOST after the wedge")
    assert len(renewals) == renewed_while_wedged, "renewed after the lease expired"
    await session.close()


async def test_a_keepalive_shares_its_budget_among_the_endpoints() -> None:
    """Endpoints that accept and never answer (a member paused, cut off or waiting out an election): the
    keep-alive gives up when the lease's time is spent, not after a request timeout per endpoint, and
    gives each endpoint a share of that time (the first one does not take it all)."""
    connections: list[int] = []
    held: list[asyncio.StreamWriter] = []

    def silent(n: int) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], None]:
        def accept(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            connections.append(n)
            held.append(writer)

        return accept

    servers = [await asyncio.start_server(silent(n), "127.0.0.1", 0) for n in range(3)]
    client = EtcdClient([f"http://127.0.0.1:{s.sockets[0].getsockname()[1]}" for s in servers], request_timeout=30)
    try:
        with contextlib.suppress(RegistryUnavailable):
            # each endpoint alone may take 30 s: only the 0.5 s budget makes this end within 10 s
            await asyncio.wait_for(client.keepalive_once(1, timeout=0.5), 10)
            raise AssertionError("a silent endpoint answered")
        assert connections == [0, 1, 2]  # each was asked in turn within the budget
    finally:
        await client.close()
        for writer in held:
            writer.close()
        for server in servers:
            server.close()


@pytest.fixture
def etcd_cluster(workdir: Path) -> Iterator[list[EtcdServer]]:
    """Three etcd members on loopback, one cluster (SIGCONT and stopped at the end)."""
    members = [
        EtcdServer(workdir / f"cluster-m{i}", free_port(), free_port(), workdir / "logs" / f"cluster-m{i}.log",
                   name=f"m{i}", **tls.etcd_kwargs())  # type: ignore[arg-type]
        for i in range(3)
    ]  # fmt: skip
    cluster = ",".join(f"{m.name}={m.peer_url}" for m in members)
    for member in members:
        member.initial_cluster = cluster
    try:
        for member in members:
            member.start(wait=False)
        for member in members:
            member.wait_ready(60)
        tls.secure_etcd(members[0])  # auth is the cluster's: turned on through one member
        yield members
    finally:
        for member in members:
            if member.proc and member.proc.record:
                member.proc.record.signal(signal.SIGCONT)
            member.stop()


def _leads(member: EtcdServer) -> bool:
    user = f"{tls.ETCD_USER}:{tls.ETCD_PASSWORD}" if tls.ENABLED else ""
    status = json.loads(member.ctl("endpoint", "status", "--write-out=json", user=user))[0]["Status"]
    return bool(status["leader"] == status["header"]["member_id"])


async def test_a_paused_member_does_not_cost_a_session_its_lease_while_the_others_answer(
    etcd_cluster: list[EtcdServer],
) -> None:
    """The keep-alive asks the member it uses; paused (or cut off), that member never answers. The others
    still have a quorum and renew the lease: the session must try them while its lease has time left,
    not wait out all of it on the first (its lease would be judged LOST while etcd keeps it)."""
    followers = [m for m in etcd_cluster if not await asyncio.to_thread(_leads, m)]
    leader = next(m for m in etcd_cluster if m not in followers)
    paused = followers[0]  # a follower: no election, the others keep a leader
    client = EtcdClient(
        [paused.endpoint, followers[1].endpoint, leader.endpoint], request_timeout=3, access=tls.etcd_access()
    )
    states: list[SessionState] = []
    renewals: list[float] = []
    # TTL 2 s, renewed every 0.5 s: a renewal has about 1.5 s left, less than the request timeout of 3 s
    session = await Session(client, ttl=2, keepalive_interval=0.5).start()
    session.subscribe(states.append)
    session.renewed.append(renewals.append)
    assert client.endpoint == paused.endpoint  # where the keep-alive thread's client starts too
    assert paused.proc and paused.proc.record
    paused.proc.record.signal(signal.SIGSTOP)
    try:
        before = len(renewals)
        await eventually(lambda: len(renewals) >= before + 6, timeout=10, what="six renewals with a member paused")
        assert SessionState.LOST not in states and session.state is SessionState.CONNECTED
        assert await client.time_to_live(session.lease_id) > 0
    finally:
        paused.proc.record.signal(signal.SIGCONT)
        await session.close()
        await client.close()
