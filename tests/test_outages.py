"""Riding through infrastructure restarts: PostgreSQL and etcd go away in the middle of a running
workflow and come back; no node crashes, no report is lost, no task runs twice."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.infra.etcd import EtcdServer
from engine.infra.ports import free_port
from engine.infra.postgres import PostgresServer
from tests import databases
from tests.cluster_harness import command, instance_for, save, shell, started, tasks_of
from tests.helpers import NodeProc, eventually

pytestmark = pytest.mark.slow

SUCCESS = 7


def chain(ledger: Path, n: int, gate: Path | None = None) -> list:  # type: ignore[type-arg]
    """``n`` tasks one after another; with ``gate``, t1 ends only once that file exists."""
    tasks = []
    for i in range(n):
        up = (f"t{i - 1}",) if i else ()
        wait = f"while [ ! -f {gate} ]; do sleep 0.05; done" if gate and i == 1 else "sleep 1"
        tasks.append(shell(f"t{i}", f"echo t{i} $$ >> {ledger}; {wait}", up))
    return tasks


def ran(ledger: Path) -> list[str]:
    return [line.split()[0] for line in ledger.read_text().splitlines()] if ledger.exists() else []


async def test_a_postgresql_restart_mid_workflow_loses_and_repeats_nothing(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, workdir: Path, tmp_path: Path
) -> None:
    pg = PostgresServer(tmp_path / "pg", free_port(), tmp_path / "pg.log", durable=True)
    await asyncio.to_thread(pg.start)
    try:
        await databases.migrate(pg, "porpoise")
        masters, workers = await started(node_factory, etcd_server, etcd_root, pg.dsn, masters=1, workers=1)
        ledger, gate = tmp_path / "ledger", tmp_path / "gate"
        code = await save(pg.dsn, "outage", chain(ledger, 4, gate))
        (cmd,) = await command(pg.dsn, code)
        await eventually(lambda: "t1" in ran(ledger), 30, "t1 running")
        await asyncio.to_thread(pg.stop)
        await asyncio.to_thread(gate.touch)  # t1's result and t2's creation happen while it is down
        await asyncio.sleep(2.5)  # an outage of a fixed length is the point of this test
        await asyncio.to_thread(pg.start)
        final = await instance_for(pg.dsn, cmd, timeout=60)
        assert final["state"] == SUCCESS
        assert ran(ledger) == ["t0", "t1", "t2", "t3"], "every task ran exactly once"
        rows = await tasks_of(pg.dsn, final["id"])
        assert sorted(r["name"] for r in rows if r["flag"] == 1) == ["t0", "t1", "t2", "t3"]
        for node in (*masters, *workers):
            assert node.proc.exited() is None, f"{node.role} crashed during the outage"
    finally:
        await asyncio.to_thread(pg.stop)


async def test_an_etcd_restart_mid_workflow_loses_and_repeats_nothing(
    node_factory: Callable[..., NodeProc], etcd_factory: Callable[[], EtcdServer], fresh_db: str, tmp_path: Path
) -> None:
    etcd = etcd_factory()
    # a lease of 6 s: the outage (1 s plus etcd's own restart) must stay well inside it on a busy machine
    masters, workers = await started(node_factory, etcd, "/outage", fresh_db, masters=1, workers=1, ttl=6)
    ledger = tmp_path / "ledger"
    code = await save(fresh_db, "etcd_outage", chain(ledger, 4))
    (cmd,) = await command(fresh_db, code)
    await eventually(lambda: "t1" in ran(ledger), 30, "t1 running")
    await asyncio.to_thread(etcd.stop)
    await asyncio.sleep(1.0)  # shorter than the lease TTL: sessions survive
    await asyncio.to_thread(etcd.start)
    final = await instance_for(fresh_db, cmd, timeout=60)
    assert final["state"] == SUCCESS
    assert ran(ledger) == ["t0", "t1", "t2", "t3"]
    for node in (*masters, *workers):
        assert node.proc.exited() is None
