"""Why isn't it running? ``GET /api/v1/instances/{id}/waiting`` on real processes (api_cluster: master, worker,
API over PostgreSQL and etcd): each reason comes from the owning master — a worker group without a worker, a
task group's queue, a retry timer, a delay —, a serial wait from the claim's rows, and a master that does not
answer gives "reason unknown", not an error."""

from __future__ import annotations

import datetime as dt
import os
import signal
import uuid
from pathlib import Path
from typing import Any

import pytest

from engine.infra.etcd import EtcdServer
from engine.infra.postgres import PostgresServer
from tests.conftest import ApiCluster, launch_api_cluster
from tests.helpers import wait_sync
from tests.test_api import shell_doc, start, wait_final

pytestmark = pytest.mark.slow


def _name(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def _save(c: ApiCluster, tasks: list[dict[str, Any]], **extra: Any) -> int:
    doc = shell_doc(_name("why"), "waiting-tests", **extra)
    doc["tasks"] = tasks
    return int(c.client().post("/api/v1/workflows", doc, release=True)["code"])


def _reason(c: ApiCluster, instance: int, task: str, kind: str) -> dict[str, Any]:
    """The reason the master gives for ``task``, once it is of ``kind``."""
    found: dict[str, Any] = {}

    def says_so() -> bool:
        nonlocal found
        answer = c.client().get(f"/api/v1/instances/{instance}/waiting")
        found = next((t for t in answer["tasks"] if t["task_name"] == task), {})
        return found.get("kind") == kind

    wait_sync(says_so, 60, what=f"task {task} waiting: {kind}")
    return found


def _stop(c: ApiCluster, instance: int) -> dict[str, Any]:
    c.client().post(f"/api/v1/instances/{instance}/stop", {})
    return wait_final(c, instance)


def _soon(iso: str, minutes: float) -> None:
    """``iso`` is about ``minutes`` from now (within the time this test has taken so far)."""
    at = dt.datetime.fromisoformat(iso)
    now = dt.datetime.now(dt.UTC)
    assert now < at <= now + dt.timedelta(minutes=minutes, seconds=5), (iso, now)


def test_a_task_of_a_worker_group_without_a_worker_names_the_group(api_cluster: ApiCluster) -> None:
    c = api_cluster
    group = _name("nowhere_")
    code = _save(c, [{"name": "a", "type": "SHELL", "params": {"rawScript": "echo"}, "worker_group": group}])
    instance = start(c, code)
    reason = _reason(c, instance, "a", "no_worker")
    assert reason["worker_group"] == group and reason["workers"] == []
    assert _stop(c, instance)["state"] == "STOP"


def test_the_second_task_of_a_task_group_of_one_is_first_in_its_queue(api_cluster: ApiCluster) -> None:
    c = api_cluster
    group = _name("tg_")
    c.client().post("/api/v1/task-groups", {"name": group, "size": 1})
    task = {"type": "SHELL", "params": {"rawScript": "sleep 60"}, "task_group": group}
    code = _save(c, [{**task, "name": "a"}, {**task, "name": "b"}])
    instance = start(c, code)

    def queued() -> dict[str, Any] | None:
        tasks = c.client().get(f"/api/v1/instances/{instance}/waiting")["tasks"]
        return next((t for t in tasks if t["kind"] == "task_group"), None)

    reason = wait_sync(queued, 60, what="one task in the group's queue")
    assert reason["task_name"] in ("a", "b")
    assert {k: reason[k] for k in ("task_group", "position", "queued", "used", "size")} == {
        "task_group": group, "position": 1, "queued": 1, "used": 1, "size": 1,
    }  # fmt: skip
    assert _stop(c, instance)["state"] == "STOP"


def test_a_failed_task_waiting_for_its_retry_says_which_retry_and_when(api_cluster: ApiCluster) -> None:
    c = api_cluster
    code = _save(c, [{"name": "a", "type": "SHELL", "params": {"rawScript": "exit 3"}, "retries": 2,
                      "retry_interval": 1}])  # fmt: skip
    instance = start(c, code)
    reason = _reason(c, instance, "a", "retry")
    assert (reason["retry"], reason["retries"]) == (1, 2)
    _soon(reason["at"], 1)
    assert _stop(c, instance)["state"] == "STOP"


def test_a_delayed_task_waits_until_its_start_and_a_stop_ends_it(api_cluster: ApiCluster) -> None:
    c = api_cluster
    code = _save(c, [{"name": "a", "type": "SHELL", "params": {"rawScript": "echo ran"}, "delay_time": 1}])
    instance = start(c, code)
    reason = _reason(c, instance, "a", "delay")
    _soon(reason["at"], 1)
    detail = c.client().get(f"/api/v1/instances/{instance}")
    assert [(t["state"], t["host"]) for t in detail["tasks"]] == [("SUBMITTED_SUCCESS", None)]  # not on a worker
    final = _stop(c, instance)
    assert final["state"] == "STOP" and [t["state"] for t in final["tasks"]] == ["KILL"]


def test_a_serial_wait_names_the_run_it_waits_behind(api_cluster: ApiCluster) -> None:
    c = api_cluster
    code = _save(c, [{"name": "a", "type": "SHELL", "params": {"rawScript": "sleep 60"}}], execution_type="SERIAL_WAIT")
    first = start(c, code)
    second = start(c, code)
    answer = c.client().get(f"/api/v1/instances/{second}/waiting")
    assert answer["state"] == "SERIAL_WAIT" and answer["tasks"] == []
    wait = answer["serial_wait"]
    assert [r["id"] for r in wait["behind"]] == [first] and (wait["position"], wait["waiting"]) == (1, 1)
    assert "waiting for one to end" in wait["reason"], wait
    assert _stop(c, second)["state"] == "STOP"
    assert _stop(c, first)["state"] == "STOP"


def test_a_master_that_does_not_answer_gives_reason_unknown(
    workdir: Path, pg_server: PostgresServer, etcd_server: EtcdServer
) -> None:
    # a cluster of its own: its master is stopped (SIGSTOP) past the API's wait, and may lose its lease
    with launch_api_cluster(workdir, pg_server, etcd_server.endpoint, worker=False) as c:
        code = _save(c, [{"name": "a", "type": "SHELL", "params": {"rawScript": "echo"}}])
        instance = start(c, code)
        assert _reason(c, instance, "a", "no_worker")["worker_group"] == "default"
        os.kill(c.master.pid, signal.SIGSTOP)
        try:
            answer = c.client().get(f"/api/v1/instances/{instance}/waiting")
        finally:
            os.kill(c.master.pid, signal.SIGCONT)
        assert answer["unknown"] == f"reason unknown: master {c.master.address} did not answer"
        assert answer["unknown_kind"] == "silent" and answer["tasks"] == []
