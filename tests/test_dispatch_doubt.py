"""A dispatch whose reply is late: the worker took the attempt, the master's call timed out. The
attempt must run once, on that worker, and never also on a second worker.

Real master and worker processes; the worker the master prefers is reached through a TCP proxy that
holds its replies back past the master's RPC timeout (the worker advertises the proxy's port). Each
task appends to a ledger from inside its process, so the test sees every run, not what the database
says.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.infra.etcd import EtcdServer
from engine.infra.ports import free_port
from tests.cluster_harness import command, instance_for, save, tasks_of
from tests.delay_proxy import DelayProxy
from tests.helpers import NodeProc, eventually, http_json, metric
from tests.test_failover import kill, ledgered, runs

pytestmark = pytest.mark.slow

SUCCESS, NEED_FAULT_TOLERANCE = 7, 8
TTL = 2.0
#: the master's RPC timeout (seconds): the proxy holds the worker's replies longer than this
RPC_TIMEOUT = "2"
#: no overload guard: this test is about lost replies, not about a machine busy with other tests
UNGUARDED = "10000"


def _worker(node_factory: Callable[..., NodeProc], etcd: EtcdServer, root: str, tmp: Path, *extra: str, port: int = 0):  # type: ignore[no-untyped-def]
    name = f"w{port or free_port()}"
    overrides = [
        f"worker.log_dir={tmp / name / 'logs'}",
        f"worker.exec_dir={tmp / name / 'exec'}",
        f"worker.max_cpu_load_avg={UNGUARDED}",
        *extra,
    ]
    return node_factory("worker", etcd.endpoint, root, TTL, overrides, port)


async def _counter(master: NodeProc, name: str) -> int:
    return int(await asyncio.to_thread(metric, master.url, f"porpoise_master_{name}_total") or 0)


async def _health(node: NodeProc) -> dict:  # type: ignore[type-arg]
    return (await asyncio.to_thread(http_json, f"{node.url}/health"))[1] or {}


async def _cluster(
    node_factory: Callable[..., NodeProc], etcd: EtcdServer, root: str, dsn: str, tmp: Path, proxy: DelayProxy
) -> tuple[NodeProc, NodeProc, NodeProc]:
    """A master and two workers: ``slow`` behind ``proxy`` (which it advertises), which the master's round
    robin picks first, and ``fast``, the other choice."""
    master = await asyncio.to_thread(
        node_factory, "master", etcd.endpoint, root, TTL, PORPOISE_DATABASE_DSN=dsn,
        PORPOISE_MASTER_HOST_SELECTOR="round_robin", PORPOISE_RPC_TIMEOUT=RPC_TIMEOUT,
        PORPOISE_MASTER_MAX_CPU_LOAD_AVG=UNGUARDED,
    )  # fmt: skip
    slow = await asyncio.to_thread(
        _worker, node_factory, etcd, root, tmp,
        f"worker.advertise_port={proxy.port}", "worker.host_weight=10000", port=proxy.upstream_port,
    )  # fmt: skip
    fast = await asyncio.to_thread(_worker, node_factory, etcd, root, tmp, "worker.host_weight=1")
    both = {f"default/{proxy.address}", f"default/{fast.address}"}

    async def sees_both() -> bool:
        return set((await _health(master)).get("workers", [])) == both

    await eventually(sees_both, 30, "the master seeing both workers")
    return master, slow, fast


async def test_a_dispatch_whose_reply_is_late_runs_once_and_on_no_second_worker(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str, tmp_path: Path
) -> None:
    slow_port = free_port()
    proxy = await DelayProxy(slow_port).start()
    try:
        master, slow, fast = await _cluster(node_factory, etcd_server, etcd_root, fresh_db, tmp_path, proxy)
        proxy.hold()
        ledger = tmp_path / "ledger"
        solo = await save(fresh_db, "solo", [ledgered("solo", ledger, "true")])
        fan = await save(fresh_db, "fan", [ledgered(f"fan{i}", ledger, "true") for i in range(3)])
        (first,) = await command(fresh_db, solo)  # one attempt: task.dispatch
        await eventually(lambda: "task.dispatch" in proxy.methods, 30, "the single dispatch sent to the slow worker")
        (second,) = await command(fresh_db, fan)  # three attempts queued at once: task.dispatch_batch
        await eventually(lambda: "task.dispatch_batch" in proxy.methods, 30, "the batch sent to the slow worker")

        async def all_handled() -> bool:
            # each of the 4 attempts, once its call timed out, is either held in doubt (fixed) or was
            # accepted by another worker (the defect: tasks_dispatched counts only accepted dispatches)
            return await _counter(master, "dispatch_doubts") + await _counter(master, "tasks_dispatched") >= 4

        await eventually(all_handled, 60, "the master giving up waiting for both replies")
        finals = [await instance_for(fresh_db, c) for c in (first, second)]

        async def idle() -> bool:
            return [(await _health(w)).get("running") for w in (slow, fast)] == [0, 0]

        await eventually(idle, 30, "no task running on either worker")
    finally:
        proxy.release()
        await proxy.close()
    assert [f["state"] for f in finals] == [SUCCESS, SUCCESS]
    for name in ("solo", "fan0", "fan1", "fan2"):
        assert len(runs(ledger, name)) == 1, f"{name} ran {len(runs(ledger, name))} times"
    rows = [r for f in finals for r in await tasks_of(fresh_db, f["id"])]
    assert sorted((r["name"], r["attempt"], r["state"], r["host"]) for r in rows) == [
        (name, 1, SUCCESS, proxy.address) for name in ("fan0", "fan1", "fan2", "solo")
    ]
    assert "task.dispatch" in proxy.methods and "task.dispatch_batch" in proxy.methods
    assert await _counter(master, "dispatch_doubts") == 4 and await _counter(master, "tasks_dispatched") == 0


async def test_a_dispatch_lost_on_the_way_is_sent_to_the_same_worker_again_not_to_another(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str, tmp_path: Path
) -> None:
    """The request was written but never reached the worker: the master cannot tell that from a lost
    reply, so it asks that worker again (the same attempt) until it answers, and only there it runs."""
    slow_port = free_port()
    proxy = await DelayProxy(slow_port).start()
    try:
        master, _, _ = await _cluster(node_factory, etcd_server, etcd_root, fresh_db, tmp_path, proxy)
        proxy.dropping = True
        ledger = tmp_path / "ledger"
        (cmd,) = await command(fresh_db, await save(fresh_db, "lost", [ledgered("lost", ledger, "true")]))

        async def timed_out() -> bool:
            return await _counter(master, "dispatch_errors") >= 1

        await eventually(timed_out, 60, "the master's dispatch call timing out")
        proxy.dropping = False  # the worker can be reached again: the next question gets there
        final = await instance_for(fresh_db, cmd, timeout=60)
    finally:
        await proxy.close()
    assert final["state"] == SUCCESS and len(runs(ledger, "lost")) == 1
    rows = await tasks_of(fresh_db, final["id"])
    assert [(r["attempt"], r["state"], r["host"]) for r in rows] == [(1, SUCCESS, proxy.address)]
    assert await _counter(master, "tasks_dispatched") == 0  # no other worker was sent it
    assert proxy.methods.count("task.dispatch") >= 2  # the first (lost), then the same dispatch again


async def test_a_dispatch_in_doubt_on_a_worker_that_dies_runs_again_through_worker_failover(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str, tmp_path: Path
) -> None:
    """The worker cannot be asked any more: the attempt is not sent to the other worker, it becomes
    NEED_FAULT_TOLERANCE when the dead worker's lease is gone and runs again as the next attempt."""
    proxy = await DelayProxy(free_port()).start()
    try:
        master, slow, fast = await _cluster(node_factory, etcd_server, etcd_root, fresh_db, tmp_path, proxy)
        proxy.dropping = True  # whether it got there, the master cannot know
        ledger = tmp_path / "ledger"
        (cmd,) = await command(fresh_db, await save(fresh_db, "orphan", [ledgered("orphan", ledger, "true")]))

        async def timed_out() -> bool:
            return await _counter(master, "dispatch_errors") >= 1

        await eventually(timed_out, 60, "the master's dispatch call timing out")
        kill(slow)
        final = await instance_for(fresh_db, cmd, timeout=60)
    finally:
        await proxy.close()
    assert final["state"] == SUCCESS and len(runs(ledger, "orphan")) == 1
    rows = await tasks_of(fresh_db, final["id"])
    assert [(r["attempt"], r["state"], r["host"]) for r in rows] == [
        (1, NEED_FAULT_TOLERANCE, proxy.address),
        (2, SUCCESS, fast.address),
    ]
