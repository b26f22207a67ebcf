"""Invariant 6 with real node processes: a master or worker whose etcd lease is lost stops acting
within one TTL, then exits (on_lost=exit) or re-registers as a new node (on_lost=reregister)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import signal
import time
from collections.abc import Callable

from engine.infra.etcd import EtcdServer
from engine.node import EXIT_LEASE_LOST
from registry import EtcdClient, MembershipView
from tests import tls
from tests.helpers import NodeProc, eventually, wait_sync


def _lost_at(log_text: str) -> float:
    """Wall time the node logged its session LOST (from its JSON log)."""
    for line in log_text.splitlines():
        if line.startswith("{") and '"new": "LOST"' in line:
            stamp = json.loads(line)["timestamp"]
            return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    raise AssertionError("the node never logged its session LOST:\n" + log_text[-3000:])


def test_master_stops_within_one_ttl_when_etcd_is_sigstopped(
    etcd_factory: Callable[[], EtcdServer], etcd_root: str, node_factory: Callable[..., NodeProc]
) -> None:
    server = etcd_factory()
    master = node_factory("master", server.endpoint, etcd_root, 2, PORPOISE_REGISTRY_ON_LOST="exit")
    assert server.proc and server.proc.record
    stopped = time.time()
    server.proc.record.signal(signal.SIGSTOP)
    try:
        wait_sync(lambda: master.proc.exited() is not None, 2 + 8, "master to exit")
    finally:
        server.proc.record.signal(signal.SIGCONT)
    text = master.proc.tail(400)
    assert master.proc.exited() == EXIT_LEASE_LOST, text
    # it judged LOST by itself, no later than one TTL after etcd stopped answering
    took = _lost_at(text) - stopped
    assert took <= 2 + 0.5, f"LOST {took:.2f}s after etcd froze, TTL 2s"
    assert '"event": "registry session lost: exiting"' in text


def test_worker_reregisters_as_a_new_node_after_losing_its_lease(
    etcd_factory: Callable[[], EtcdServer], etcd_root: str, node_factory: Callable[..., NodeProc]
) -> None:
    server = etcd_factory()
    worker = node_factory("worker", server.endpoint, etcd_root, 2, PORPOISE_REGISTRY_ON_LOST="reregister")

    async def create_revision() -> int:
        client = EtcdClient([server.endpoint], access=tls.etcd_access())
        try:
            view = MembershipView(client, etcd_root)
            await view.start()
            await view.close()
            workers = view.workers()
            return workers[0].create_revision if workers else 0
        finally:
            await client.close()

    first = asyncio.run(create_revision())
    assert first > 0
    assert server.proc and server.proc.record
    server.proc.record.signal(signal.SIGSTOP)
    try:
        wait_sync(lambda: worker.health()[0] == 503, 2 + 2, "worker to report its session lost")
    finally:
        server.proc.record.signal(signal.SIGCONT)
    wait_sync(worker.healthy, 15, "worker registered again")
    second = asyncio.run(create_revision())
    assert second > first, "the worker must come back under a new lease, as a new registration"
    assert worker.proc.exited() is None


async def test_clean_shutdown_deregisters_at_once(
    etcd_server: EtcdServer, etcd: EtcdClient, etcd_root: str, node_factory: Callable[..., NodeProc]
) -> None:
    view = MembershipView(etcd, etcd_root)
    await view.start()
    master = await asyncio.to_thread(node_factory, "master", etcd_server.endpoint, etcd_root, 30)
    await eventually(lambda: len(view.masters()) == 1, 5, "master registered")
    assert master.proc.record is not None
    master.proc.record.signal(signal.SIGTERM)
    # TTL is 30 s: seeing it gone within 5 s proves the key was deleted / lease revoked on exit
    await eventually(lambda: not view.masters(), 5, "master deregistered")
    await asyncio.to_thread(lambda: wait_sync(lambda: master.proc.exited() is not None, 10, "exit"))
    assert master.proc.exited() == 0
    await view.close()
