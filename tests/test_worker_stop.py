"""Stopping, draining and crashing workers with real processes: a worker's stop is not the task's failure,
and a result a worker produced is never lost nor bought with a second run of the task.

- SIGTERM: the worker takes no new tasks (refused, heartbeat DRAINING), lets running ones finish for
  ``worker.drain_timeout``, then reports what is left LOST: it runs again elsewhere, no retry consumed.
- ``porpoise worker drain HOST``: no new tasks; the running ones finish; the worker stays up.
- Results are spooled on the worker's disk until acknowledged: a worker killed (-9) or stopped between a
  task's end and the report's delivery sends the result when it starts again, and the task does not run
  again. ``worker.test_hold_results`` (a test hook) holds results spooled and unsent, so a test (and the
  chaos suite) can kill the worker in that window: a file under the spool directory marks it.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import asyncpg
import pytest

from engine.accounts.tokens import create_token, ensure_user
from engine.infra.etcd import EtcdServer
from registry import EtcdClient
from registry.heartbeat import Heartbeat, ServerStatus
from rpc.messages import ReportReply, TaskResult, WorkerDrain, WorkerDrainReply
from tests import tls
from tests.cluster_harness import command, instance_for, query, save, started, tasks_of
from tests.helpers import ROOT, NodeProc, eventually, node_env, rpc_client, wait_sync
from tests.test_cli import porpoise
from tests.test_failover import kill, ledgered, running_task, runs, start_gated, start_victim
from tests.worker_harness import ReportSink, dispatch, task

pytestmark = pytest.mark.slow

SUCCESS, NEED_FAULT_TOLERANCE = 7, 8
TTL = 3.0


def dirs(tmp: Path) -> list[str]:
    return [f"worker.log_dir={tmp / 'logs'}", f"worker.exec_dir={tmp / 'exec'}", f"worker.spool_dir={tmp / 'spool'}"]


def spooled(tmp: Path) -> list[Path]:
    """The held results' files: a result is on the worker's disk and no master has it."""
    return sorted((tmp / "spool").rglob("*.json"))


def exit_code(node: NodeProc, timeout: float = 60) -> int | None:
    wait_sync(lambda: node.proc.exited() is not None, timeout, f"{node.address} exited")
    return node.proc.exited()


@pytest.mark.parametrize("same_address", [True, False], ids=["same-address", "new-address"])
async def test_a_worker_killed_after_its_task_ended_delivers_the_result_when_restarted_and_nothing_runs_twice(
    node_factory: Callable[..., NodeProc],
    etcd_server: EtcdServer,
    etcd_root: str,
    fresh_db: str,
    tmp_path: Path,
    same_address: bool,
) -> None:
    """Within one lease TTL of the crash (the same address: before its registration removes the old key;
    another address: before the old key expires) the spooled result reaches the master first, so the
    attempt is not failed over and the task is not run again."""
    ttl = 6.0
    await started(node_factory, etcd_server, etcd_root, fresh_db, masters=1, workers=0, ttl=ttl)
    first = await asyncio.to_thread(
        node_factory, "worker", etcd_server.endpoint, etcd_root, ttl, [*dirs(tmp_path), "worker.test_hold_results=true"]
    )
    ledger = tmp_path / "ledger"
    code = await save(
        fresh_db, "spooled", [ledgered("only", ledger, "true"), ledgered("next", ledger, "true", ("only",))]
    )
    (cmd,) = await command(fresh_db, code)
    await eventually(lambda: spooled(tmp_path), 30, "the result of 'only' spooled")
    kill(first)  # the task's process has ended, its result is on disk, no master has it
    await asyncio.to_thread(exit_code, first)
    wi = await instance_for(fresh_db, cmd, final=False)
    (only,) = await tasks_of(fresh_db, wi["id"])
    assert only["state"] != SUCCESS, "the held result must not have been delivered before the kill"
    await asyncio.to_thread(
        node_factory, "worker", etcd_server.endpoint, etcd_root, ttl, dirs(tmp_path),
        first.port if same_address else 0,
    )  # fmt: skip
    final = await instance_for(fresh_db, cmd, timeout=60)
    assert final["state"] == SUCCESS
    rows = await tasks_of(fresh_db, wi["id"])
    assert sorted((r["name"], r["attempt"], r["state"]) for r in rows) == [("next", 1, SUCCESS), ("only", 1, SUCCESS)]
    assert rows[0]["host"] == first.address  # the attempt ran on the dead worker; its result came from the new one
    assert len(runs(ledger, "only")) == 1 and len(runs(ledger, "next")) == 1
    await eventually(lambda: not spooled(tmp_path), 10, "the acknowledged result removed from the spool")


async def test_a_stopped_worker_s_running_task_is_reported_lost_and_runs_again_elsewhere_without_a_retry(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str, tmp_path: Path
) -> None:
    _, workers = await started(
        node_factory, etcd_server, etcd_root, fresh_db, masters=1, workers=2, ttl=TTL,
        worker_overrides=[*dirs(tmp_path), "worker.drain_timeout=1"],
    )  # fmt: skip
    ledger, marker = tmp_path / "ledger", tmp_path / "first-started"
    cmd, wi, first = await start_victim(fresh_db, "stopped", ledger, marker)  # its first attempt outlasts the drain
    stopping = next(w for w in workers if w.address == first["host"])
    assert stopping.proc.record is not None
    stopping.proc.record.signal(signal.SIGTERM)
    assert await asyncio.to_thread(exit_code, stopping) == 0
    final = await instance_for(fresh_db, cmd, timeout=60)
    assert final["state"] == SUCCESS
    victim = [r for r in await tasks_of(fresh_db, wi["id"]) if r["name"] == "victim"]
    assert [(r["attempt"], r["state"], r["flag"], r["retry_times"]) for r in victim] == [
        (1, NEED_FAULT_TOLERANCE, 0, 0),
        (2, SUCCESS, 1, 0),
    ]
    assert victim[1]["host"] != stopping.address
    assert len(runs(ledger, "victim")) == 2 and len(runs(ledger, "next")) == 1


async def test_reports_pending_at_a_graceful_exit_are_delivered_by_the_next_start(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, tmp_path: Path, sink: ReportSink
) -> None:
    def start(*extra: str) -> NodeProc:
        return node_factory("worker", etcd_server.endpoint, etcd_root, TTL, [*dirs(tmp_path), *extra])

    held = await asyncio.to_thread(start, "worker.test_hold_results=true", "worker.report_flush_timeout=0.5")
    client = rpc_client(10)
    try:
        msg = task("SHELL", {"rawScript": "echo done"}, sink.address)
        assert (await dispatch(client, held.address, msg)).accepted is True
        await eventually(lambda: spooled(tmp_path), 30, "the result spooled")
        assert held.proc.record is not None
        held.proc.record.signal(signal.SIGTERM)
        assert await asyncio.to_thread(exit_code, held) == 0
        assert "result" not in await sink.rows(msg.task_instance_id)  # the worker is gone: nothing can come now
        assert len(spooled(tmp_path)) == 1
        await asyncio.to_thread(start)
        result = await sink.result(msg.task_instance_id)
        assert result["state"] == "SUCCESS" and result["host"] == held.address
        await eventually(lambda: not spooled(tmp_path), 10, "the acknowledged result removed from the spool")
    finally:
        await client.close()


async def test_a_drained_worker_refuses_new_tasks_says_draining_lets_running_ones_finish_and_can_be_undrained(
    node_factory: Callable[..., NodeProc],
    etcd_server: EtcdServer,
    etcd_root: str,
    tmp_path: Path,
    sink: ReportSink,
    etcd: EtcdClient,
) -> None:
    w = await asyncio.to_thread(node_factory, "worker", etcd_server.endpoint, etcd_root, TTL, dirs(tmp_path))
    gate = tmp_path / "gate"
    client = rpc_client(10)

    async def status() -> int:
        kv = await etcd.get(f"{etcd_root}/nodes/worker/default/{w.address}")
        assert kv is not None
        return Heartbeat.from_json(kv.value).status

    try:
        running = task("SHELL", {"rawScript": f"while [ ! -f {gate} ]; do sleep 0.05; done"}, sink.address)
        await dispatch(client, w.address, running)
        await sink.running(running.task_instance_id)
        # the sink has the RUNNING report; its acknowledgement may still be on its way back (a loaded machine)
        await eventually(lambda: w.health()[1]["pending_reports"] == 0, 30, "the RUNNING report acknowledged")
        reply = await client.call(w.address, WorkerDrain())
        assert reply == WorkerDrainReply(draining=True, running=1, pending_reports=0, refused="")
        assert await status() == ServerStatus.DRAINING  # published before the answer
        refused = await dispatch(client, w.address, task("SHELL", {"rawScript": "true"}, sink.address))
        assert refused.accepted is False and refused.free_slots == 0
        assert refused.reason == "worker is draining (drained by request): it takes no new tasks"
        gate.touch()
        assert (await sink.result(running.task_instance_id))["state"] == "SUCCESS"
        assert w.health()[1]["draining"] == "drained by request"  # stays up, still draining
        assert (await client.call(w.address, WorkerDrain(drain=False))).draining is False
        assert await status() != ServerStatus.DRAINING  # NORMAL, or BUSY on a saturated machine
        again = task("SHELL", {"rawScript": "true"}, sink.address)

        async def taken() -> bool:  # as a master would, send again while it is busy (a saturated machine)
            reply = await dispatch(client, w.address, again)
            assert "draining" not in reply.reason, reply
            return bool(reply.accepted)

        await eventually(taken, 60, "the undrained worker taking a task", interval=0.2)
        assert (await sink.result(again.task_instance_id))["state"] == "SUCCESS"
    finally:
        await client.close()


async def _token(dsn: str) -> str:
    conn = await asyncpg.connect(dsn)
    try:
        _, token = await create_token(conn, await ensure_user(conn), "drain-tests")
    finally:
        await conn.close()
    return token


async def test_porpoise_worker_drain_lets_the_running_task_finish_and_sends_new_work_elsewhere(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str, tmp_path: Path
) -> None:
    _, workers = await started(
        node_factory, etcd_server, etcd_root, fresh_db, masters=1, workers=2, ttl=TTL, worker_overrides=dirs(tmp_path)
    )
    api = await asyncio.to_thread(
        node_factory, "api", etcd_server.endpoint, etcd_root, TTL, ["api.alerts_enabled=false"],
        PORPOISE_DATABASE_DSN=fresh_db,
    )  # fmt: skip
    env = {"PORPOISE_URL": f"http://{api.address}", "PORPOISE_TOKEN": await _token(fresh_db)}

    def cli(*args: str):  # type: ignore[no-untyped-def]
        return asyncio.to_thread(porpoise, None, *args, env=env)

    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    cmd, wi = await start_gated(fresh_db, "drained", ledger, gate, follow_up=False)
    busy = (await running_task(fresh_db, wi["id"], "long"))["host"]
    other = next(w.address for w in workers if w.address != busy)

    out = await cli("worker", "drain", busy)
    assert out.returncode == 0, out.stderr
    assert f"worker {busy} is draining" in out.stdout and "1 still running" in out.stdout

    async def status_of(address: str) -> str:
        out = await cli("cluster", "--json")
        return next((n["status"] for n in json.loads(out.stdout)["workers"] if n["address"] == address), "")

    await eventually(lambda: _equals(status_of(busy), "DRAINING"), 20, "the cluster view showing the drain")
    quick = await save(fresh_db, "after_drain", [ledgered("quick", ledger, "true")])
    for c in await command(fresh_db, quick, 4):
        done = await instance_for(fresh_db, c, timeout=60)
        assert done["state"] == SUCCESS
        assert [r["host"] for r in await tasks_of(fresh_db, done["id"])] == [other]
    gate.touch()  # the drained worker's running task finishes there
    final = await instance_for(fresh_db, cmd, timeout=60)
    assert final["state"] == SUCCESS
    rows = await tasks_of(fresh_db, wi["id"])
    assert [(r["attempt"], r["state"], r["host"]) for r in rows] == [(1, SUCCESS, busy)]
    assert len(runs(ledger, "long")) == 1

    unknown = await cli("worker", "drain", "127.0.0.1:1")
    assert unknown.returncode == 1 and "no live worker at '127.0.0.1:1'" in unknown.stderr
    assert "Traceback" not in unknown.stderr
    back = await cli("worker", "undrain", busy, "--json")
    assert back.returncode == 0 and json.loads(back.stdout)["draining"] is False
    await eventually(lambda: _differs(status_of(busy), "DRAINING"), 20, "the worker taking tasks again")
    assert (await query(fresh_db, "SELECT count(*) AS n FROM task_instance WHERE host = $1", busy))[0]["n"] == 1


async def _equals(value: Awaitable[str], expected: str) -> bool:
    return await value == expected


async def _differs(value: Awaitable[str], unexpected: str) -> bool:
    return await value not in ("", unexpected)


def test_an_unusable_spool_dir_stops_the_worker_with_one_line_naming_the_key(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    spool = tmp_path / "a-file" / "spool"
    argv = [
        sys.executable,
        "-m",
        "engine.worker",
        "--set",
        "worker.listen_port=0",
        "--set",
        f"worker.spool_dir={spool}",
    ]
    argv += [x for item in dirs(tmp_path)[:2] for x in ("--set", item)]
    env = node_env(f"{tls.ETCD_SCHEME}://127.0.0.1:9", "/unused")
    out = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 1
    assert f"worker.spool_dir: cannot keep results in {spool}" in out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr


async def test_a_master_that_does_not_own_the_instance_names_its_owner_and_epoch(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str, tmp_path: Path
) -> None:
    """What a worker whose results' master is gone relies on: any live master points it at the owner, with
    the owner's epoch, so a worker that knows an older owner follows (and a newer one does not)."""
    masters, _ = await started(
        node_factory, etcd_server, etcd_root, fresh_db, masters=2, workers=1, ttl=TTL, worker_overrides=dirs(tmp_path)
    )
    ledger, gate = tmp_path / "ledger", tmp_path / "gate"
    cmd, wi = await start_gated(fresh_db, "redirect", ledger, gate, follow_up=False)
    long = await running_task(fresh_db, wi["id"], "long")
    other = next(m for m in masters if m.address != wi["host"])
    late = TaskResult(long["id"], 1, wi["id"], "127.0.0.1:1", "SUCCESS", 0, 1, 2)
    client = rpc_client(10)
    try:
        assert await client.call(other.address, late) == ReportReply(False, wi["host"], wi["epoch"])
    finally:
        await client.close()
    gate.touch()
    assert (await instance_for(fresh_db, cmd, timeout=60))["state"] == SUCCESS
