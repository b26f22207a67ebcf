"""One address, one node: a second live node advertising an address another node holds fails to start
with one line and leaves the first one's key alone; a node restarted at its own address registers;
a loopback advertise address is refused when etcd is elsewhere (registry.identity)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from core.errors import ConfigError
from engine.config import Config
from engine.infra.etcd import EtcdServer
from engine.infra.ports import free_port
from engine.infra.postgres import PostgresServer
from engine.node import EXIT_DUPLICATE
from registry import (
    EtcdClient,
    Heartbeat,
    HeartbeatSource,
    LoadLimits,
    NodeId,
    RegistryNode,
    Session,
    SessionState,
    TaskCounts,
)
from registry.identity import Incarnation, Verdict, advertise_host, judge_holder, process_alive, started_at
from rpc.errors import RpcError
from rpc.messages import DispatchReply
from tests.helpers import NodeProc, eventually, node_env, rpc_client, wait_sync
from tests.worker_harness import ReportSink, dispatch, task

TTL = 2.0


def _key(root: str, role: str, address: str) -> str:
    return f"{root}/nodes/master/{address}" if role == "master" else f"{root}/nodes/worker/default/{address}"


def _unstarted(role: str, etcd: EtcdServer, root: str, dirs: tuple[Path, str], port: int, extra: list[str]) -> NodeProc:
    """A node process not started yet (it is expected to exit, so nothing waits for its health);
    ``dirs`` = (the tests' work dir, the database DSN)."""
    workdir, dsn = dirs
    env = node_env(etcd.endpoint, root, TTL, PORPOISE_DATABASE_DSN=dsn)
    return NodeProc(role, env, workdir / "logs", f"{role}-{uuid.uuid4().hex[:6]}", extra, port)


def _exit_code(node: NodeProc, timeout: float) -> int:
    assert node.proc.popen is not None
    return node.proc.popen.wait(timeout)


@pytest.mark.parametrize("role", ["master", "worker"])
async def test_a_second_live_node_at_the_same_address_exits_with_one_line_and_the_first_keeps_its_key(
    role: str,
    node_factory: Callable[..., NodeProc],
    etcd_server: EtcdServer,
    etcd: EtcdClient,
    etcd_root: str,
    workdir: Path,
    pg_server: PostgresServer,
) -> None:
    first = await asyncio.to_thread(node_factory, role, etcd_server.endpoint, etcd_root, TTL)
    key = _key(etcd_root, role, first.address)
    held = await etcd.get(key)
    assert held is not None
    # same advertised address and port, listening on another loopback address so the port is free
    second = _unstarted(
        role, etcd_server, etcd_root, (workdir, pg_server.dsn), first.port, [f"{role}.listen_host=127.0.0.2"]
    )
    second.proc.start()
    try:
        code = await asyncio.to_thread(_exit_code, second, 30)
    finally:
        second.stop()
    text = second.proc.tail(50)
    assert code == EXIT_DUPLICATE, text
    errors = [line for line in text.splitlines() if line.startswith(f"porpoise {role}: ")]
    assert len(errors) == 1 and f"{key} is held by another live node" in errors[0], text
    assert f"pid {first.pid}" in errors[0]
    now = await etcd.get(key)
    assert now is not None and now.create_revision == held.create_revision and now.lease == held.lease
    assert Heartbeat.from_json(now.value).pid == first.pid
    assert first.healthy()


@pytest.mark.parametrize("role", ["master", "worker"])
async def test_a_node_killed_and_restarted_at_its_address_replaces_its_own_key_at_once(
    role: str, node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd: EtcdClient, etcd_root: str
) -> None:
    """The dead incarnation's key (same machine, its process gone) is replaced without waiting for its
    lease: with a 60 s TTL, waiting would outlast the 30 s the restart is given to become healthy."""
    old = await asyncio.to_thread(node_factory, role, etcd_server.endpoint, etcd_root, 60)
    key = _key(etcd_root, role, old.address)
    before = await etcd.get(key)
    assert before is not None
    assert old.proc.record is not None
    old.proc.record.signal(signal.SIGKILL)
    await asyncio.to_thread(old.proc.popen.wait)  # type: ignore[union-attr]
    again = await asyncio.to_thread(node_factory, role, etcd_server.endpoint, etcd_root, 60, port=old.port)
    after = await etcd.get(key)
    assert after is not None and after.create_revision > before.create_revision and after.lease != before.lease
    previous, current = Heartbeat.from_json(before.value), Heartbeat.from_json(after.value)
    assert current.pid == again.pid and current.node_id != previous.node_id
    assert "replacing the key of a previous incarnation" in again.proc.tail(400)


async def test_a_key_held_by_a_node_of_another_machine_is_waited_for_until_its_lease_expires(
    etcd_server: EtcdServer,
    etcd: EtcdClient,
    etcd_root: str,
    workdir: Path,
    pg_server: PostgresServer,
    node_factory: Callable[..., NodeProc],
) -> None:
    """A holder we cannot judge (another machine) keeps the key while its lease lives: the newcomer fails
    once the holder's lease should have run out; when the holder is dead, the newcomer gets the key."""
    port = free_port()
    key = _key(etcd_root, "worker", f"127.0.0.1:{port}")
    elsewhere = Heartbeat(0, 0, 0, 0, 0, 0, 0, pid=1, node_id="x", host_name="other", machine="another/1")
    holder = await Session(etcd, ttl=TTL, keepalive_interval=0.5).start()
    try:
        await etcd.put(key, elsewhere.to_json(), lease=holder.lease_id)
        blocked = _unstarted("worker", etcd_server, etcd_root, (workdir, pg_server.dsn), port, [])
        blocked.proc.start()
        try:
            code = await asyncio.to_thread(_exit_code, blocked, 30)
        finally:
            blocked.stop()
        assert code == EXIT_DUPLICATE, blocked.proc.tail(50)
        assert "host other, pid 1, node id x" in blocked.proc.tail(50)
        assert (await etcd.get(key)) is not None
    finally:
        await holder.orphan()  # the holder dies: its key expires within the TTL
    newcomer = await asyncio.to_thread(node_factory, "worker", etcd_server.endpoint, etcd_root, TTL, port=port)
    now = await etcd.get(key)
    assert now is not None and Heartbeat.from_json(now.value).pid == newcomer.pid


def test_a_loopback_advertise_address_is_refused_when_etcd_is_elsewhere(
    etcd_root: str, workdir: Path, pg_server: PostgresServer, etcd_server: EtcdServer
) -> None:
    with pytest.raises(ConfigError, match=r"worker\.advertise_host: 127\.0\.0\.1 is a loopback address"):
        advertise_host("worker", "127.0.0.1", "", ["http://192.0.2.7:2379"])
    assert advertise_host("worker", "127.0.0.1", "", ["http://127.0.0.1:2379"]) == "127.0.0.1"
    assert advertise_host("master", "10.1.2.3", "", ["http://192.0.2.7:2379"]) == "10.1.2.3"
    assert advertise_host("master", "0.0.0.0", "node-7.example", ["http://192.0.2.7:2379"]) == "node-7.example"
    # a real process with the default settings and a remote etcd stops with one line, before any etcd call
    node = _unstarted(
        "master", etcd_server, etcd_root, (workdir, pg_server.dsn), free_port(), ["master.advertise_host="]
    )
    elsewhere = f"{etcd_server.endpoint.split('://')[0]}://192.0.2.7:2379"  # https:// with the suite's TLS
    node.proc.env = {**(node.proc.env or {}), "PORPOISE_REGISTRY_ENDPOINTS": elsewhere}
    node.proc.start()
    try:
        code = _exit_code(node, 30)
    finally:
        node.stop()
    text = node.proc.tail(20)
    assert code == 1 and "porpoise master: master.advertise_host: 127.0.0.1 is a loopback address" in text, text


def test_only_a_gone_incarnation_of_this_machine_is_replaced() -> None:
    me = Incarnation("me", "h", "boot/1", pid=100, process_start=5.0)
    other = Incarnation("them", "h", "boot/1", pid=200, process_start=4.0)
    assert judge_holder(other, me, alive=lambda pid, start: False) is Verdict.REPLACE
    assert judge_holder(other, me, alive=lambda pid, start: True) is Verdict.LIVE_HERE
    earlier_session = Incarnation("me-before", "h", "boot/1", pid=100, process_start=5.0)
    assert judge_holder(earlier_session, me, alive=lambda pid, start: True) is Verdict.REPLACE
    elsewhere = Incarnation("them", "h2", "boot/2", pid=200, process_start=4.0)
    assert judge_holder(elsewhere, me, alive=lambda pid, start: False) is Verdict.UNKNOWN
    assert judge_holder(None, me) is Verdict.UNKNOWN
    assert judge_holder(Incarnation("", "", "", 1, 0), me) is Verdict.UNKNOWN

    a, b = Incarnation.current(), Incarnation.current()  # a new process = a new node id, same machine
    assert a.node_id != b.node_id and a.machine == b.machine and a.machine


def test_a_process_counts_as_alive_only_while_it_runs_with_its_start_time() -> None:
    live = subprocess.Popen(["sleep", "60"])
    dead = subprocess.Popen(["true"])
    try:
        start = started_at(live.pid)
        assert process_alive(live.pid, start)
        assert not process_alive(live.pid, start - 5)  # a recycled pid: another process
        dead_start = started_at(dead.pid)
        wait_sync(lambda: psutil.Process(dead.pid).status() == psutil.STATUS_ZOMBIE, 10, "a zombie")
        assert not process_alive(dead.pid, dead_start)  # killed, not reaped yet: gone all the same
    finally:
        live.kill()
        live.wait()
        dead.wait()
    assert not process_alive(dead.pid, dead_start)


async def test_a_node_whose_key_was_taken_away_fences_itself(registry_config: Config, etcd: EtcdClient) -> None:
    """Peers saw the key go (an operator deleted it, or a node judged this one dead): the node's next
    heartbeat refresh writes nothing (it writes only the key it created) and its session is LOST."""
    node = RegistryNode(
        registry_config.registry,
        NodeId("worker", "127.0.0.1:4001", "default"),
        HeartbeatSource(LoadLimits(), counts=TaskCounts),
    )
    await node.start()
    try:
        key = node.registration.key
        await etcd.delete(key)
        await asyncio.wait_for(node.session.lost.wait(), 10)
        assert node.session.state is SessionState.LOST
        assert await etcd.get(key) is None, "the fenced node must not write its key back"
    finally:
        await node.close(revoke=False)


async def test_a_worker_takes_no_dispatch_before_its_key_is_registered(
    etcd_server: EtcdServer,
    etcd: EtcdClient,
    etcd_root: str,
    workdir: Path,
    pg_server: PostgresServer,
    sink: ReportSink,
) -> None:
    """A worker listens (and holds its lease) before its key exists: while it waits for its address's key
    (a previous incarnation's, being replaced), a master still sees that previous incarnation there; an
    attempt it accepted then would be declared lost with the previous incarnation's key and run again
    while it runs here (a chaos round saw it: a size-1 task group ran two tasks at once). It refuses."""
    port = free_port()
    key = _key(etcd_root, "worker", f"127.0.0.1:{port}")
    elsewhere = Heartbeat(0, 0, 0, 0, 0, 0, 0, pid=1, node_id="x", host_name="other", machine="another/1")
    holder = await Session(etcd, ttl=TTL, keepalive_interval=0.5).start()
    client = rpc_client(5)
    try:
        await etcd.put(key, elsewhere.to_json(), lease=holder.lease_id)
        waiting = _unstarted("worker", etcd_server, etcd_root, (workdir, pg_server.dsn), port, [])
        waiting.proc.start()
        try:
            msg = task("SHELL", {"rawScript": "true"}, sink.address)

            async def answer() -> DispatchReply | None:
                try:
                    return await dispatch(client, waiting.address, msg)
                except RpcError as exc:
                    if exc.maybe_delivered:
                        raise
                    return None  # not listening yet

            await eventually(answer, 20, "the worker listening")
            await eventually(
                lambda: "waiting for its lease to run out" in waiting.proc.tail(50),
                20,
                "its lease, waiting for the key",
            )
            reply = await answer()
            # no key of its own yet: no incarnation
            assert reply == DispatchReply(False, "worker is not registered", reply.free_slots, incarnation=0)
            assert (await etcd.get(key)) is not None and waiting.proc.exited() is None  # still waiting for the key
        finally:
            waiting.stop()
    finally:
        await client.close()
        await holder.orphan()


def test_a_live_holder_stays_alive_across_a_wall_clock_step(monkeypatch: pytest.MonkeyPatch) -> None:
    # the kernel's boot time (what psutil adds to a start to make it an epoch time) is the wall clock less
    # the uptime: a step of the wall clock moves it. A holder's published start must not move with it.
    from psutil import _pslinux

    live = subprocess.Popen(["sleep", "60"])
    try:
        me = Incarnation.current()
        published = Incarnation("them", me.host_name, me.machine, live.pid, started_at(live.pid))
        stepped = _pslinux.boot_time() + 5.0  # the wall clock stepped 5 s forward
        monkeypatch.setattr(_pslinux, "boot_time", lambda: stepped)
        assert judge_holder(published, me) is Verdict.LIVE_HERE
        assert process_alive(os.getpid(), me.process_start)
    finally:
        live.kill()
        live.wait()
