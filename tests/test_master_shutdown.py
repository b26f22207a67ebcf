"""A master stopped with SIGTERM stops within its grace, even while a worker's report waits on an actor
that cannot write (the database is down): the stopped actor answers the report instead of leaving its
RPC handler waiting forever (aiohttp's runner.cleanup() would wait 60 s for it)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.infra.etcd import EtcdServer
from engine.infra.ports import free_port
from engine.infra.postgres import PostgresServer
from registry import EtcdClient
from tests import databases
from tests.cluster_harness import command, instance_for, save, shell, started, started_unguarded, tasks_of
from tests.helpers import NodeProc, eventually

pytestmark = pytest.mark.slow

RUNNING = 1
#: the master's shutdown_grace (5 s) and more; aiohttp would wait 60 s for a handler left waiting
STOP_WITHIN = 20.0
#: a lease that outlives the test: a key gone at the end was revoked, not expired
LONG_TTL = 60.0


async def test_a_master_stops_on_sigterm_while_a_report_waits_on_an_actor_that_cannot_write(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, tmp_path: Path
) -> None:
    pg = PostgresServer(tmp_path / "pg", free_port(), tmp_path / "pg.log")
    await asyncio.to_thread(pg.start)
    try:
        await databases.migrate(pg, "porpoise")
        (master,), _ = await started(node_factory, etcd_server, etcd_root, pg.dsn, masters=1, workers=1)
        gate = tmp_path / "gate"
        code = await save(pg.dsn, "stuck_report", [shell("t", f"while [ ! -f {gate} ]; do sleep 0.05; done")])
        (cmd,) = await command(pg.dsn, code)
        wi = await instance_for(pg.dsn, cmd, final=False)

        async def running() -> bool:
            return any(r["state"] == RUNNING for r in await tasks_of(pg.dsn, wi["id"]))

        await eventually(running, 30, "t running")
        await asyncio.to_thread(pg.stop)
        await asyncio.to_thread(gate.touch)  # t ends; its result reaches the actor, which cannot persist it

        def retrying() -> bool:
            text = master.proc.log_path.read_text(errors="replace")
            return any("database write failed; retrying" in line and f'"workflow_instance_id": {wi["id"]}' in line
                       for line in text.splitlines())  # fmt: skip

        await eventually(lambda: asyncio.to_thread(retrying), 30, "the actor retrying its write")
        assert master.proc.record is not None and master.proc.popen is not None
        master.proc.record.signal(signal.SIGTERM)
        try:
            exit_code = await asyncio.to_thread(master.proc.popen.wait, STOP_WITHIN)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the master did not stop within {STOP_WITHIN} s of SIGTERM") from None
        assert exit_code == 0, master.proc.tail(20)
    finally:
        await asyncio.to_thread(pg.stop)


async def test_a_master_stops_and_revokes_its_lease_on_sigterm_while_the_database_hangs(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, tmp_path: Path, etcd: EtcdClient
) -> None:
    # PostgreSQL stopped with SIGSTOP: its connections stay open and answer nothing, so every query, the
    # cancellation of a query and the pool's graceful close wait for ever. The master still stops within
    # its bound and revokes its lease (TTL 60 s here: its key gone long before it could expire).
    pg = PostgresServer(tmp_path / "pg", free_port(), tmp_path / "pg.log")
    await asyncio.to_thread(pg.start)
    assert pg.proc is not None and pg.proc.record is not None
    try:
        await databases.migrate(pg, "porpoise")
        (master,), _ = await started_unguarded(node_factory, etcd_server, etcd_root, pg.dsn, 1, 1, LONG_TTL)
        gate = tmp_path / "gate"
        code = await save(pg.dsn, "hung_db", [shell("t", f"while [ ! -f {gate} ]; do sleep 0.05; done")])
        (cmd,) = await command(pg.dsn, code)
        wi = await instance_for(pg.dsn, cmd, final=False)

        async def running() -> bool:
            return any(r["state"] == RUNNING for r in await tasks_of(pg.dsn, wi["id"]))

        await eventually(running, 30, "t running")
        pg.proc.record.signal(signal.SIGSTOP)
        await asyncio.to_thread(gate.touch)  # t ends; its result reaches the actor, whose write hangs
        assert master.proc.record is not None and master.proc.popen is not None
        key = f"{etcd_root}/nodes/master/{master.address}"
        assert await etcd.get(key) is not None
        master.proc.record.signal(signal.SIGTERM)
        try:
            await asyncio.to_thread(master.proc.popen.wait, STOP_WITHIN)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the master did not stop within {STOP_WITHIN} s of SIGTERM") from None
        assert await etcd.get(key) is None, "the master exited without revoking its lease"
    finally:
        pg.proc.record.signal(signal.SIGCONT)
        await asyncio.to_thread(pg.stop)
