"""Membership against a real etcd: events, garbage tolerance, kill -9 detection, slots across real
master processes, etcd restarts and compaction."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable

from engine.config import Config
from engine.infra.etcd import EtcdServer
from registry import (
    ChangeKind,
    EtcdClient,
    Heartbeat,
    HeartbeatSource,
    LoadLimits,
    MembershipView,
    NodeChange,
    NodeId,
    RegistryNode,
    TaskCounts,
)
from tests import tls
from tests.helpers import NodeProc, eventually


def _source(running: list[int] | None = None) -> HeartbeatSource:
    box = running if running is not None else [0]
    return HeartbeatSource(LoadLimits(), counts=lambda: TaskCounts(running=box[0], slots=4))


async def test_view_sees_nodes_join_update_and_leave(registry_config: Config, etcd: EtcdClient) -> None:
    root = registry_config.registry.root
    view = MembershipView(etcd, root)
    changes: list[NodeChange] = []
    view.subscribe(changes.append)
    await view.start()
    running = [0]
    master = RegistryNode(registry_config.registry, NodeId("master", "127.0.0.1:1001"), _source())
    worker = RegistryNode(registry_config.registry, NodeId("worker", "127.0.0.1:2001", "etl"), _source(running))
    await master.start()
    await worker.start()
    await eventually(lambda: len(view.masters()) == 1 and len(view.workers("etl")) == 1, 5, "both nodes")
    assert [c.kind for c in changes[:2]] == [ChangeKind.ADDED, ChangeKind.ADDED]
    assert view.workers("other") == []

    running[0] = 3
    await worker.registration.refresh_now()
    await eventually(lambda: view.workers("etl")[0].heartbeat.running_tasks == 3, 5, "heartbeat update")
    assert any(c.kind is ChangeKind.UPDATED for c in changes)
    hb = view.workers("etl")[0].heartbeat
    assert hb.exec_slots == 4 and hb.pid > 0 and hb.startup_time <= hb.report_time

    await worker.close()
    await eventually(lambda: not view.workers(), 5, "worker removed")
    assert changes[-1].kind is ChangeKind.REMOVED and changes[-1].info.node.group == "etl"
    await master.close()
    await view.close()


async def test_garbage_in_the_key_space_is_ignored(registry_config: Config, etcd: EtcdClient) -> None:
    root = registry_config.registry.root
    await etcd.put(f"{root}/nodes/master/not-an-address", "{}")
    await etcd.put(f"{root}/nodes/master/127.0.0.1:9", "this is not json")
    await etcd.put(f"{root}/nodes/something/else", "x")
    view = MembershipView(etcd, root)
    await view.start()
    assert view.masters() == []
    await etcd.put(f"{root}/nodes/worker/default/127.0.0.1:10", '{"pid": "nope"}')
    good = Heartbeat(1, 2, 0.1, 0.2, 0.3, 4.0, 5.0, 6)
    await etcd.put(f"{root}/nodes/master/127.0.0.1:11", good.to_json())
    await eventually(lambda: [m.address for m in view.masters()] == ["127.0.0.1:11"], 5, "the good node")
    assert view.workers() == []
    await view.close()


async def test_kill_9_of_a_node_process_is_seen_within_ttl_plus_1s(
    etcd_server: EtcdServer, etcd: EtcdClient, etcd_root: str, node_factory: Callable[..., NodeProc]
) -> None:
    view = MembershipView(etcd, etcd_root)
    removed: list[tuple[float, NodeChange]] = []
    view.subscribe(lambda c: removed.append((time.monotonic(), c)) if c.kind is ChangeKind.REMOVED else None)
    await view.start()
    node = await asyncio.to_thread(node_factory, "worker", etcd_server.endpoint, etcd_root, 2)
    await eventually(lambda: [w.address for w in view.workers()] == [node.address], 5, "worker registered")
    assert node.proc.record is not None
    killed_at = time.monotonic()
    node.proc.record.signal(signal.SIGKILL)
    await eventually(lambda: removed, 5, "REMOVED event")
    seen_at, change = removed[0]
    assert change.info.address == node.address
    assert seen_at - killed_at <= 2 + 1, f"REMOVED after {seen_at - killed_at:.2f}s with TTL 2s"
    await view.close()


def _slots(nodes: list[NodeProc]) -> dict[str, tuple[int, int]]:
    out = {}
    for node in nodes:
        status, body = node.health()
        if status == 200 and body.get("slot"):
            out[node.address] = (body["slot"]["index"], body["slot"]["count"])
    return out


def _bijection(nodes: list[NodeProc]) -> bool:
    slots = _slots(nodes)
    return len(slots) == len(nodes) and sorted(slots.values()) == [(i, len(nodes)) for i in range(len(nodes))]


async def test_slots_form_a_bijection_across_real_masters_and_reform(
    etcd_server: EtcdServer, etcd_root: str, node_factory: Callable[..., NodeProc]
) -> None:
    masters = [await asyncio.to_thread(node_factory, "master", etcd_server.endpoint, etcd_root, 2) for _ in range(3)]
    await eventually(lambda: _bijection(masters), 10, "slots 0..2 across 3 masters")
    expected = {m.address: i for i, m in enumerate(sorted(masters, key=lambda m: m.address))}
    assert {a: s[0] for a, s in _slots(masters).items()} == expected

    victim = masters.pop(1)
    assert victim.proc.record is not None
    victim.proc.record.signal(signal.SIGKILL)
    await eventually(lambda: _bijection(masters), 2 + 3, "slots re-form over 2 masters")

    masters.append(await asyncio.to_thread(node_factory, "master", etcd_server.endpoint, etcd_root, 2))
    await eventually(lambda: _bijection(masters), 10, "slots re-form over 3 masters")


async def test_view_resyncs_across_an_etcd_restart(etcd_factory: Callable[[], EtcdServer], etcd_root: str) -> None:
    from engine import config as config_mod

    server = etcd_factory()
    cfg = config_mod.load(
        overrides=[
            f"registry.endpoints={server.endpoint}",
            f"registry.root={etcd_root}",
            "registry.lease_ttl=10",
            "registry.keepalive_interval=0.5",
            "registry.heartbeat_interval=0.5",
            "registry.request_timeout=2",  # a loaded CI machine answers slower than 0.5 s
            *tls.registry_overrides(),
        ],
        environ={},
    ).registry
    observer = RegistryNode(cfg, NodeId("master", "127.0.0.1:3001"), _source())
    leaver = RegistryNode(cfg, NodeId("worker", "127.0.0.1:3002", "default"), _source())
    joiner = RegistryNode(cfg, NodeId("worker", "127.0.0.1:3003", "default"), _source())
    try:
        await observer.start()
        await leaver.start()
        view = observer.membership
        await eventually(lambda: len(view.workers()) == 1, 5, "worker seen")
        resyncs = view.resyncs

        await asyncio.to_thread(server.stop)
        await eventually(lambda: observer.session.state.value == "SUSPENDED", 5, "observer SUSPENDED")
        await asyncio.to_thread(server.start)
        await eventually(lambda: observer.session.state.value == "CONNECTED", 10, "observer CONNECTED")
        await eventually(lambda: view.resyncs > resyncs, 5, "view re-read after reconnect")

        await joiner.start()
        await leaver.close()
        await eventually(
            lambda: [w.address for w in view.workers()] == ["127.0.0.1:3003"], 20, "join and leave after restart"
        )
    finally:  # close every session even when an assertion failed: a live keep-alive thread hangs the loop
        for node in (joiner, leaver, observer):
            await node.close()


async def test_watch_from_a_compacted_revision_resyncs(registry_config: Config, etcd: EtcdClient) -> None:
    root = registry_config.registry.root
    view = MembershipView(etcd, root)
    await view.start()
    await view.close()  # stop watching; the view keeps its snapshot and revision
    stale = view.revision
    hb = Heartbeat(1, 2, 0.1, 0.2, 0.3, 4.0, 5.0, 6)
    added = f"{root}/nodes/master/127.0.0.1:21"
    await etcd.put(added, hb.to_json())
    await etcd.put(f"{root}/nodes/master/127.0.0.1:22", hb.to_json())
    revision = await etcd.delete(f"{root}/nodes/master/127.0.0.1:22")
    assert revision == 1
    latest, _ = await etcd.get_prefix(root)
    await etcd.compact(latest)
    changes: list[NodeChange] = []
    view.subscribe(changes.append)
    resyncs = view.resyncs
    await view.resume()
    await eventually(lambda: [m.address for m in view.masters()] == ["127.0.0.1:21"], 5, "state after compaction")
    assert view.resyncs > resyncs and view.revision > stale
    assert [(c.kind, c.info.address) for c in changes] == [(ChangeKind.ADDED, "127.0.0.1:21")]
    await view.close()
