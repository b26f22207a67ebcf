"""The loop-liveness watchdog with real processes: a node whose event loop is wedged for good (the
test-only ``debug.wedge_hook``: SIGUSR2 blocks the loop forever) stops renewing its lease after
``registry.loop_stall_limit``, so it is fenced like a dead node and its work is taken over."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from engine.infra.etcd import EtcdServer
from tests.cluster_harness import command, instance_for, query, save, tasks_of
from tests.helpers import NodeProc, eventually
from tests.test_failover import NEED_FAULT_TOLERANCE, SUCCESS, kill, ledgered, running_task, runs, start_gated

pytestmark = pytest.mark.slow

TTL = 2.0
STALL = 0.5
WEDGEABLE = ["debug.wedge_hook=true", f"registry.loop_stall_limit={STALL}"]


def _start(node_factory: Callable[..., NodeProc], etcd: EtcdServer, root: str, dsn: str, role: str) -> NodeProc:
    return node_factory(role, etcd.endpoint, root, TTL, WEDGEABLE, PORPOISE_DATABASE_DSN=dsn)


async def test_a_master_with_a_wedged_event_loop_is_fenced_and_failed_over(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str, tmp_path: Path
) -> None:
    masters = [
        await asyncio.to_thread(_start, node_factory, etcd_server, etcd_root, fresh_db, "master") for _ in range(2)
    ]
    await asyncio.to_thread(_start, node_factory, etcd_server, etcd_root, fresh_db, "worker")
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    cmd, wi = await start_gated(fresh_db, "wedged", ledger, gate)
    owner = next(m for m in masters if m.address == wi["host"])
    survivor = next(m for m in masters if m is not owner)
    assert owner.proc.record is not None
    owner.proc.record.signal(signal.SIGUSR2)
    try:

        async def moved() -> bool:
            row = (await query(fresh_db, "SELECT host, epoch FROM workflow_instance WHERE id = $1", wi["id"]))[0]
            return row["host"] == survivor.address and row["epoch"] > wi["epoch"]

        await eventually(moved, TTL + STALL + 10, "instance owned by the other master")
        assert owner.proc.exited() is None, "the owner must be wedged, not dead"
        gate.touch()  # the adopted task finishes and reports to the new owner
        final = await instance_for(fresh_db, cmd)
    finally:
        kill(owner)  # only SIGKILL ends a wedged node
    assert final["state"] == SUCCESS and final["host"] == survivor.address
    assert len(runs(ledger, "long")) == 1, "the task on the live worker is adopted, not run again"
    assert len(runs(ledger, "after")) == 1
    log = owner.proc.tail(400)
    assert "debug.wedge_hook: wedging the event loop" in log and "no longer renewing the lease" in log


async def test_a_wedged_worker_s_reaper_kills_its_task_which_runs_again_elsewhere(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str, tmp_path: Path
) -> None:
    await asyncio.to_thread(_start, node_factory, etcd_server, etcd_root, fresh_db, "master")
    workers = [
        await asyncio.to_thread(_start, node_factory, etcd_server, etcd_root, fresh_db, "worker") for _ in range(2)
    ]
    ledger, marker, pid_file = tmp_path / "ledger", tmp_path / "first-started", tmp_path / "first-pid"
    # the first attempt records its pid and blocks; any later attempt finishes at once
    body = f"if [ -f {marker} ]; then exit 0; fi; touch {marker}; echo $$ > {pid_file}; sleep 300"
    (cmd,) = await command(fresh_db, await save(fresh_db, "wedged_worker", [ledgered("victim", ledger, body)]))
    wi = await instance_for(fresh_db, cmd, final=False)
    first = await running_task(fresh_db, wi["id"], "victim")
    wedged = next(w for w in workers if w.address == first["host"])
    first_pid = int(await eventually(lambda: pid_file.exists() and pid_file.read_text().strip(), 10, "pid"))
    assert wedged.proc.record is not None
    wedged.proc.record.signal(signal.SIGUSR2)
    try:
        final = await instance_for(fresh_db, cmd, timeout=TTL + 30)
        # the wedged worker cannot kill anything itself: its reaper did, once the renewals stopped
        await eventually(lambda: not _alive(first_pid), 10, "the first attempt's process killed")
        assert wedged.proc.exited() is None, "the worker must be wedged, not dead"
    finally:
        kill(wedged)
    assert final["state"] == SUCCESS
    rows = [r for r in await tasks_of(fresh_db, wi["id"]) if r["name"] == "victim"]
    assert [(r["attempt"], r["state"]) for r in rows] == [(1, NEED_FAULT_TOLERANCE), (2, SUCCESS)]
    assert rows[1]["host"] != wedged.address
    assert len(runs(ledger, "victim")) == 2


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
