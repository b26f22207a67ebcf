"""Task groups across failover, with real masters, workers, the API, etcd and PostgreSQL: a task waiting
for its group keeps its place in the queue when its master dies (kill -9) — the new owner holds the same
attempt in the same queue row instead of running it again at the back, and the API and the CLI show
where it stands ("waiting for task group X, position n"); a slot held by a task whose worker dies passes
on only once the task's process is gone."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from engine.infra.etcd import EtcdServer
from engine.states import TaskState, WorkflowState
from tests import tls
from tests.cluster_harness import admin_api, command, max_overlap, query, save, shell
from tests.cluster_harness import started_unguarded as started
from tests.helpers import ROOT, NodeProc, eventually
from tests.task_watch import WATCH_PREAMBLE, TaskWatcher

#: instance states of a run that stopped, failed or succeeded
_ENDED = frozenset({WorkflowState.STOP, WorkflowState.FAILURE, WorkflowState.SUCCESS})


pytestmark = pytest.mark.slow
SUCCESS = 7


def _task(name: str, ledger: Path, seconds: float, release: Path | None = None) -> Any:
    """``release``: the task runs until that file exists (not ``seconds``)."""
    wait = f"until [ -e {release} ]; do sleep 0.1; done" if release is not None else f"sleep {seconds}"
    script = f"echo start {name} $(date +%s.%N) >> {ledger}; {wait}; echo end {name} $(date +%s.%N) >> {ledger}"
    return shell(name, script, task_group="line")


async def _instance(dsn: str, command_id: int) -> asyncpg.Record | None:
    rows = await query(dsn, "SELECT id, host, state FROM workflow_instance WHERE command_id = $1", command_id)
    return rows[0] if rows else None


async def _queue_row(dsn: str, instance_id: int) -> asyncpg.Record | None:
    rows = await query(
        dsn, "SELECT id, task_instance_id, status FROM task_group_queue WHERE workflow_instance_id = $1", instance_id
    )
    return rows[0] if rows else None


def _cli_status(url: str, token: str, instance_id: int) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PORPOISE_")}
    env |= {"PORPOISE_URL": url, "PORPOISE_TOKEN": token, "COLUMNS": "250", **tls.cli_env()}
    out = subprocess.run([sys.executable, "-m", "engine", "status", str(instance_id)], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=60, check=False)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout


async def test_a_task_waiting_for_its_group_keeps_its_place_when_its_master_is_killed(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str, tmp_path: Path
) -> None:
    masters, _ = await started(node_factory, etcd_server, etcd_root, fresh_db, masters=2, workers=1, ttl=2)
    await query(fresh_db, "INSERT INTO task_group (name, group_size) VALUES ('line', 1)")
    _, client = await admin_api(node_factory, etcd_server, etcd_root, fresh_db)
    ledger = tmp_path / "ledger"
    # the holder takes the group's only slot, until the takeover was checked; then "early" queues, then "late"
    # behind it
    release = tmp_path / "release-holder"
    runs: dict[str, int] = {}
    for name, seconds in (("holder", 0), ("early", 0.5), ("late", 0.5)):
        code = await save(fresh_db, name, [_task(name, ledger, seconds, release if name == "holder" else None)])
        (runs[name],) = await command(fresh_db, code)

        async def queued(name: str = name) -> bool:
            row = await _instance(fresh_db, runs[name])
            return row is not None and await _queue_row(fresh_db, row["id"]) is not None

        await eventually(queued, 60, f"{name} in the group's queue")
    early, late = await _instance(fresh_db, runs["early"]), await _instance(fresh_db, runs["late"])
    assert early is not None and late is not None
    before = await _queue_row(fresh_db, early["id"])
    assert before is not None and before["status"] == 0

    def places() -> dict[str, str | None]:
        out = {}
        for name, inst in (("early", early), ("late", late)):
            (task,) = client.get(f"/api/v1/instances/{inst['id']}")["tasks"]
            out[name] = (task.get("task_group") or {}).get("waiting")
        return out

    assert places() == {"early": "waiting for task group line, position 1",
                        "late": "waiting for task group line, position 2"}  # fmt: skip
    assert "waiting for task group line, position 1" in _cli_status(client.target.url, client.target.token, early["id"])

    victim = next(m for m in masters if m.address == early["host"])
    assert victim.proc.record is not None
    victim.proc.record.signal(signal.SIGKILL)

    async def taken_over() -> bool:
        row = await _instance(fresh_db, runs["early"])
        return row is not None and row["host"] not in (None, early["host"])

    await eventually(taken_over, 60, "the early run taken over by the surviving master")
    after = await _queue_row(fresh_db, early["id"])
    holder = await _instance(fresh_db, runs["holder"])
    assert holder is not None and holder["state"] == TaskState.RUNNING_EXECUTION, (
        "the holder ended before the takeover: nothing was tested"
    )
    # still queued behind the holder: the same attempt in the same row, in the same place
    assert after is not None and tuple(after) == tuple(before)
    assert places() == {"early": "waiting for task group line, position 1",
                        "late": "waiting for task group line, position 2"}  # fmt: skip
    release.touch()

    async def all_done() -> bool:
        rows = [await _instance(fresh_db, c) for c in runs.values()]
        return all(r is not None and r["state"] in _ENDED for r in rows)

    await eventually(all_done, 120, "every run finished")
    assert [(await _instance(fresh_db, c))["state"] for c in runs.values()] == [SUCCESS] * 3  # type: ignore[index]
    starts = [line.split()[1] for line in ledger.read_text().splitlines() if line.startswith("start")]
    assert starts == ["holder", "early", "late"], starts  # each once, in queue order, one at a time
    attempts = await query(fresh_db, "SELECT count(*) AS n FROM task_instance WHERE workflow_instance_id = $1",
                           early["id"])  # fmt: skip
    assert attempts[0]["n"] == 1  # held, not lost and run again
    assert await query(fresh_db, "SELECT * FROM task_group_queue") == []


async def test_a_killed_worker_s_slot_goes_to_the_next_task_only_once_its_process_is_gone(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str, tmp_path: Path
) -> None:
    """A size-1 group: the task holding the slot loses its worker (kill -9) while another task waits. The
    slot is released once (the waiting task and the re-run each get it in turn), and never while the
    killed attempt's process was still alive, as watched from outside the worker."""
    _, workers = await started(node_factory, etcd_server, etcd_root, fresh_db, masters=1, workers=2, ttl=2)
    await query(fresh_db, "INSERT INTO task_group (name, group_size) VALUES ('line', 1)")
    marker = tmp_path / "first-started"
    watcher = TaskWatcher().start()
    try:
        # the holder's first attempt blocks until its worker dies; its re-run, and the waiter, end at once
        holder = WATCH_PREAMBLE % {"port": watcher.port, "label": "holder"}
        holder += f"if [ -f {marker} ]; then exit 0; fi; touch {marker}; sleep 120"
        waiter = WATCH_PREAMBLE % {"port": watcher.port, "label": "waiter"} + "sleep 0.5"
        code = await save(fresh_db, "held", [
            shell("holder", holder, task_group="line", task_group_priority=1, retries=0),
            shell("waiter", waiter, task_group="line"),
        ])  # fmt: skip
        (cid,) = await command(fresh_db, code)

        async def holding_and_waiting() -> bool:
            rows = await query(fresh_db, "SELECT t.name, t.state, t.host, q.status FROM task_group_queue q"
                               " JOIN task_instance t ON t.id = q.task_instance_id ORDER BY t.name")  # fmt: skip
            got = [(r["name"], r["state"], r["status"]) for r in rows]
            return got == [("holder", 1, 1), ("waiter", 0, 0)] and marker.exists()

        await eventually(holding_and_waiting, 60, "the holder running in the slot, the waiter queued")
        (running,) = await query(
            fresh_db,
            f"SELECT host FROM task_instance WHERE name = 'holder' AND state = {int(TaskState.RUNNING_EXECUTION)}",
        )
        dead = next(w for w in workers if w.address == running["host"])
        assert dead.proc.record is not None
        dead.proc.record.signal(signal.SIGKILL)

        async def finished() -> bool:
            row = await _instance(fresh_db, cid)
            return row is not None and row["state"] in _ENDED

        await eventually(finished, 90, "the workflow finished on the surviving worker")
        assert (await _instance(fresh_db, cid))["state"] == SUCCESS  # type: ignore[index]
        holders = await query(fresh_db, "SELECT attempt, state FROM task_instance WHERE name = 'holder' ORDER BY 1")
        assert [(r["attempt"], r["state"]) for r in holders] == [(1, 8), (2, SUCCESS)]  # lost, then run again
        await eventually(lambda: not watcher.alive(), 30, "every task process gone")
        first, rerun = watcher.life("holder")
        (other,) = watcher.life("waiter")
        assert first.died is not None
        # the slot passed on only after the killed attempt's process was gone, and one at a time
        assert other.started >= first.died and rerun.started >= first.died, (first, other, rerun)
        assert max_overlap([(_ts(x.started), _ts(x.died)) for x in (first, other, rerun)]) == 1  # type: ignore[arg-type]
        assert await query(fresh_db, "SELECT * FROM task_group_queue") == []
    finally:
        watcher.close()


def _ts(seconds: float | None) -> dt.datetime:
    assert seconds is not None
    return dt.datetime.fromtimestamp(seconds, dt.UTC)
