"""A task's delay_time across a master failover, with real masters, a worker, the API, etcd and PostgreSQL:
a task waiting for its delay when its master dies (kill -9) waits, on the new owner, only for the rest of
its delay (counted from its first attempt's creation, as the database recorded it), then runs once."""

from __future__ import annotations

import datetime as dt
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.infra.etcd import EtcdServer
from engine.states import TaskState, WorkflowState
from tests.cluster_harness import admin_api, command, instance_for, query, save, shell
from tests.cluster_harness import started_unguarded as started
from tests.helpers import NodeProc, eventually

pytestmark = pytest.mark.slow

#: the task's delay_time (minutes: the smallest there is): long enough for the kill and the takeover
DELAY_MINUTES = 1


async def test_a_task_waiting_for_its_delay_waits_only_for_the_rest_of_it_after_its_master_is_killed(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str, tmp_path: Path
) -> None:
    masters, _ = await started(node_factory, etcd_server, etcd_root, fresh_db, masters=2, workers=1, ttl=2)
    _, client = await admin_api(node_factory, etcd_server, etcd_root, fresh_db)
    ledger = tmp_path / "ledger"
    script = f"echo start $(date +%s.%N) >> {ledger}"
    code = await save(fresh_db, "delayed", [shell("a", script, delay_time=DELAY_MINUTES)])
    (cid,) = await command(fresh_db, code)
    first = await instance_for(fresh_db, cid, final=False)

    def reason() -> dict[str, Any]:
        tasks = client.get(f"/api/v1/instances/{first['id']}/waiting")["tasks"]
        return next((t for t in tasks if t["task_name"] == "a" and t["kind"] == "delay"), {})

    await eventually(lambda: bool(reason()), 60, "the task waiting for its delay", interval=0.2)
    (created,) = await query(fresh_db, "SELECT submit_time FROM task_instance WHERE workflow_instance_id = $1",
                             first["id"])  # fmt: skip
    (owner,) = await query(fresh_db, "SELECT host FROM workflow_instance WHERE id = $1", first["id"])
    due = created["submit_time"] + dt.timedelta(minutes=DELAY_MINUTES)
    victim = next(m for m in masters if m.address == owner["host"])
    assert victim.proc.record is not None
    victim.proc.record.signal(signal.SIGKILL)

    async def taken_over() -> bool:
        (row,) = await query(fresh_db, "SELECT host FROM workflow_instance WHERE id = $1", first["id"])
        return row["host"] not in (None, owner["host"])

    await eventually(taken_over, 60, "the run taken over by the surviving master")
    assert not ledger.exists(), "the task ran before the takeover: nothing was tested"
    # the new owner waits for the rest of the same delay, not a new one from the takeover
    await eventually(lambda: bool(reason()), 60, "the task waiting for its delay on the new owner", interval=0.2)
    # (the takeover alone takes longer than the second allowed here: the lease of the dead master expires)
    assert abs(dt.datetime.fromisoformat(reason()["at"]) - due) < dt.timedelta(seconds=1), (reason(), due)
    final = await instance_for(fresh_db, cid, timeout=180)
    assert final["state"] == WorkflowState.SUCCESS
    starts = [float(line.split()[1]) for line in ledger.read_text().splitlines()]
    assert len(starts) == 1, starts  # it ran exactly once
    assert starts[0] >= due.timestamp(), (starts, due)  # and not before its delay was over
    rows = await query(fresh_db, "SELECT attempt, state, start_time FROM task_instance WHERE workflow_instance_id"
                       " = $1 ORDER BY attempt", first["id"])  # fmt: skip
    # the attempt never sent was lost with its master (never started); its run again waited, then ran
    assert [(r["attempt"], r["state"], r["start_time"] is None) for r in rows] == [
        (1, TaskState.NEED_FAULT_TOLERANCE, True), (2, TaskState.SUCCESS, False),
    ]  # fmt: skip
    assert rows[1]["start_time"] >= due
