"""Task logs outlive their worker, with real masters, workers and API servers.

While an attempt runs its log is followed from the worker's live file; once it ended it is archived, and the
API (pages, the end, search, download) and ``porpoise logs`` read the archive: after the worker removed the
file, and after the worker was killed for good (kill -9, never restarted). A log over the worker's cap is
archived as the worker kept it: its newest part under the line saying what was dropped.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import psutil
import pytest

from engine.client import ApiClient
from engine.infra.etcd import EtcdServer
from engine.infra.postgres import PostgresServer
from engine.storage.task_logs import ArchiveState
from tests import tls
from tests.conftest import ApiCluster, launch_api_cluster
from tests.helpers import ROOT, eventually, wait_sync

pytestmark = pytest.mark.slow

#: the worker's log cap in the kill test's cluster
CAP = 64 * 1024


def _run(client: ApiClient, name: str, tasks: list[dict[str, Any]]) -> int:
    """Start a new workflow of ``tasks``; its instance id."""
    doc = {"name": name, "project": "log-archive-tests", "tasks": tasks}
    code = client.post("/api/v1/workflows", doc, release=True)["code"]
    command = client.post(f"/api/v1/workflows/{code}/start", {})
    return wait_sync(
        lambda: client.get(f"/api/v1/commands/{command['command_id']}").get("workflow_instance_id"),
        60,
        what="the run's instance",
    )


def _finished(client: ApiClient, instance: int) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        detail = client.get(f"/api/v1/instances/{instance}")
        return detail if detail["finished"] else None

    return wait_sync(done, 120, what=f"instance {instance} finished")


def _archived(cluster: ApiCluster, task_ids: list[int]) -> None:
    def all_archived() -> bool:
        rows = cluster.query("SELECT state FROM task_log_archive WHERE task_instance_id = ANY($1::bigint[])", task_ids)
        return len(rows) == len(task_ids) and all(r["state"] == ArchiveState.ARCHIVED for r in rows)

    wait_sync(all_archived, 60, what="the logs archived")


def _all_lines(client: ApiClient, task_id: int) -> list[str]:
    lines: list[str] = []
    skip = 0
    while True:
        page = client.get(f"/api/v1/tasks/{task_id}/log", skip=skip, limit=500)
        lines += page["lines"]
        assert page["complete"], page
        if not page["lines"]:
            return lines
        skip = page["next"]


def _cli_logs(cluster: ApiCluster, task_id: int) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PORPOISE_")}
    env.update(PORPOISE_URL=cluster.url, PORPOISE_TOKEN=cluster.token, **tls.cli_env())
    return subprocess.run(
        [sys.executable, "-m", "engine", "logs", str(task_id)],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=60, check=False,
    )  # fmt: skip


async def test_a_running_attempt_is_followed_live_and_its_ended_log_survives_the_file(
    api_cluster: ApiCluster, tmp_path: Path
) -> None:
    """Follow (server-sent events) reads the worker's live file while the task waits on a gate; once it
    ended and was archived, the file is removed from the worker and the whole log still reads the same."""
    client = api_cluster.client()
    gate = tmp_path / "gate"
    script = (f"for i in 1 2 3; do echo live $i; done; n=0; while [ ! -e {gate} ] && [ $n -lt 2400 ]; do"
              " sleep 0.05; n=$((n+1)); done; echo after the gate")  # fmt: skip
    tasks = [{"name": "t", "type": "SHELL", "params": {"rawScript": script}}]
    instance = await asyncio.to_thread(_run, client, f"livelog_{uuid.uuid4().hex[:8]}", tasks)

    def running_task() -> int | None:
        tasks = client.get(f"/api/v1/instances/{instance}")["tasks"]
        return tasks[0]["id"] if tasks and tasks[0]["state"] == "RUNNING_EXECUTION" and tasks[0]["host"] else None

    task_id = await eventually(lambda: asyncio.to_thread(running_task), 60, "the task running")
    events: list[tuple[str, Any]] = []
    headers = {"Authorization": f"Bearer {api_cluster.token}"}
    async with aiohttp.ClientSession(connector=tls.connector()) as http:
        url = f"{api_cluster.url}/api/v1/tasks/{task_id}/log/follow"
        async with http.get(url, headers=headers, timeout=aiohttp.ClientTimeout(total=120)) as resp:
            assert resp.status == 200
            event = ""
            async for raw in resp.content:
                line = raw.decode().rstrip("\n")
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: "):
                    events.append((event, json.loads(line[6:])))
                    if event == "lines" and any(t == "live 3" for t in events[-1][1]["lines"]):
                        # the task is still running: nothing is archived for it yet
                        ask = "SELECT 1 FROM task_log_archive WHERE task_instance_id = $1"
                        rows = await asyncio.to_thread(api_cluster.query, ask, task_id)
                        assert rows == []
                        gate.touch()
                    if event in ("end", "error"):
                        break
    followed = [t for e, d in events if e == "lines" for t in d["lines"]]
    assert events[-1] == ("end", {"next": len(followed), "complete": True}), events[-1]
    assert [t for t in followed if t.startswith(("live", "after"))] == ["live 1", "live 2", "live 3", "after the gate"]
    await asyncio.to_thread(_archived, api_cluster, [task_id])
    on_worker = Path(client.get(f"/api/v1/tasks/{task_id}")["log_path"])
    whole = await asyncio.to_thread(on_worker.read_text)
    await asyncio.to_thread(on_worker.unlink)  # the worker's janitor (or a user) removed it
    assert await asyncio.to_thread(_all_lines, client, task_id) == followed
    assert client.get(f"/api/v1/tasks/{task_id}/log/download") == whole


@pytest.fixture
def own_cluster(tmp_path: Path, pg_server: PostgresServer, etcd_server: EtcdServer) -> Iterator[ApiCluster]:
    """A cluster of its own (its worker is killed), the worker's logs capped at CAP."""
    with launch_api_cluster(
        tmp_path, pg_server, etcd_server.endpoint, PORPOISE_WORKER_MAX_LOG_BYTES=str(CAP),
        PORPOISE_API_LOG_ARCHIVE_INTERVAL="0.1",
    ) as cluster:  # fmt: skip
        yield cluster


def test_every_log_reads_the_same_after_its_worker_was_killed_for_good(own_cluster: ApiCluster) -> None:
    client = own_cluster.client()
    tasks = [
        {"name": "short", "type": "SHELL", "params": {"rawScript": "for i in $(seq 0 99); do echo short $i; done"}},
        {"name": "capped", "type": "SHELL",
         "params": {"rawScript": "for i in $(seq 0 2999); do printf 'capped %04d %090d\\n' $i 0; done"}},
        # after both: a failure ends the run (failure strategy END), killing what still runs
        {"name": "failing", "type": "SHELL", "upstream": ["short", "capped"],
         "params": {"rawScript": "echo about to fail; exit 3"}},
    ]  # fmt: skip
    instance = _run(client, f"killlog_{uuid.uuid4().hex[:8]}", tasks)
    detail = _finished(client, instance)
    by_name = {t["name"]: t for t in detail["tasks"]}
    assert by_name["failing"]["state"] == "FAILURE"
    assert by_name["short"]["state"] == by_name["capped"]["state"] == "SUCCESS", by_name
    ids = [t["id"] for t in detail["tasks"]]
    _archived(own_cluster, ids)
    before = {i: _all_lines(client, i) for i in ids}  # read from the archive already, the worker alive
    downloads = {i: client.get(f"/api/v1/tasks/{i}/log/download") for i in ids}

    worker = psutil.Process(own_cluster.worker.pid)
    os.kill(worker.pid, signal.SIGKILL)  # for good: nothing restarts it
    worker.wait(30)

    for task_id in ids:
        lines = _all_lines(client, task_id)
        assert lines == before[task_id]
        assert client.get(f"/api/v1/tasks/{task_id}/log/download") == downloads[task_id] == "\n".join(lines) + "\n"
        end = client.get(f"/api/v1/tasks/{task_id}/log", limit=3, from_end=True)
        assert end["lines"] == lines[-3:] and end["complete"]
        cli = _cli_logs(own_cluster, task_id)
        assert cli.returncode == 0, cli.stderr
        assert cli.stdout.splitlines() == lines
    short = [t for t in before[by_name["short"]["id"]] if t.startswith("short ")]
    assert short == [f"short {i}" for i in range(100)]
    assert "about to fail" in before[by_name["failing"]["id"]]
    capped = before[by_name["capped"]["id"]]
    assert capped[0].startswith("[porpoise] log truncated: the first "), capped[0]
    kept = [t for t in capped if t.startswith("capped ")]
    assert kept[-1] == f"capped 2999 {0:090d}" and 0 < len(kept) < 3000
    hits = client.get(f"/api/v1/tasks/{by_name['capped']['id']}/log/search", q="capped 2999")
    assert [h["text"] for h in hits["hits"]] == [kept[-1]] and hits["done"]
