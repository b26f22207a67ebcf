"""The `porpoise` CLI as users run it: a real subprocess talking to the real API (api_cluster)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from engine.client import write_client_file
from tests import tls
from tests.conftest import ApiCluster
from tests.helpers import ROOT, wait_sync

pytestmark = pytest.mark.slow


def porpoise(c: ApiCluster | None, *args: str, env: dict[str, str] | None = None, timeout: float = 120):
    base = {k: v for k, v in os.environ.items() if not k.startswith("PORPOISE_")}
    if c is not None:
        base.update(PORPOISE_URL=c.url, PORPOISE_TOKEN=c.token)
    base.update(tls.cli_env())
    base.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "engine", *args],
        capture_output=True, text=True, env=base, cwd=ROOT, timeout=timeout, check=False,
    )  # fmt: skip


def workflow_file(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"name: {name}\nproject: cli-tests\n" + textwrap.dedent(body))
    return path


GOOD = """\
params:
  greeting: hello
tasks:
  - name: first
    type: SHELL
    params: {rawScript: "echo ${greeting} from first"}
  - name: second
    type: SHELL
    upstream: [first]
    params: {rawScript: "echo second"}
"""


def test_apply_start_watch_list_status_logs(api_cluster: ApiCluster, tmp_path: Path) -> None:
    name = f"cli_{uuid.uuid4().hex[:8]}"
    path = workflow_file(tmp_path, name, GOOD)
    out = porpoise(api_cluster, "apply", str(path))
    assert out.returncode == 0, out.stderr
    assert f"cli-tests/{name} created" in out.stdout and "version 1" in out.stdout
    again = porpoise(api_cluster, "apply", str(path), "--json")
    assert json.loads(again.stdout)[0]["version"] == 2

    run = porpoise(api_cluster, "start", name, "--param", "greeting=bonjour", "--watch")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "finished SUCCESS" in run.stdout and "(2/2 tasks succeeded)" in run.stdout
    lines = [line.split() for line in run.stdout.splitlines()]
    assert ["first", "SUCCESS"] in [ln[2:4] for ln in lines] and ["second", "SUCCESS"] in [ln[2:4] for ln in lines]
    instance_id = int(run.stdout.split("started workflow instance ")[1].split()[0])

    listed = json.loads(porpoise(api_cluster, "list", "--workflow", name, "--json").stdout)
    assert [i["id"] for i in listed["items"]] == [instance_id] and listed["items"][0]["state"] == "SUCCESS"
    table = porpoise(api_cluster, "list", "--workflow", name)
    assert str(instance_id) in table.stdout and "SUCCESS" in table.stdout
    assert name in porpoise(api_cluster, "list", "--workflows", "--project", "cli-tests").stdout

    status = porpoise(api_cluster, "status", str(instance_id))
    assert status.returncode == 0 and "first" in status.stdout and "second" in status.stdout
    detail = json.loads(porpoise(api_cluster, "status", str(instance_id), "--json").stdout)
    first = next(t for t in detail["tasks"] if t["name"] == "first")
    logs = porpoise(api_cluster, "logs", str(first["id"]))
    assert logs.returncode == 0 and "bonjour from first" in logs.stdout
    followed = porpoise(api_cluster, "logs", str(first["id"]), "--follow")
    assert followed.returncode == 0 and followed.stdout == logs.stdout


def test_a_disabled_task_is_passed_through_and_shown_disabled(api_cluster: ApiCluster, tmp_path: Path) -> None:
    # DolphinScheduler's flag = NO: the task stays in the graph, never runs, and what follows it runs
    name = f"cli_{uuid.uuid4().hex[:8]}"
    path = workflow_file(tmp_path, name, """\
        tasks:
          - name: a
            type: SHELL
            params: {rawScript: "echo a ran"}
          - name: b
            type: SHELL
            upstream: [a]
            disabled: true
            params: {rawScript: "echo b must not run; exit 1"}
          - name: c
            type: SHELL
            upstream: [b]
            params: {rawScript: "echo c ran"}
        """)  # fmt: skip
    assert porpoise(api_cluster, "apply", str(path)).returncode == 0
    run = porpoise(api_cluster, "start", name, "--watch")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "finished SUCCESS" in run.stdout and "(3/3 tasks succeeded)" in run.stdout
    instance_id = int(run.stdout.split("started workflow instance ")[1].split()[0])
    detail = json.loads(porpoise(api_cluster, "status", str(instance_id), "--json").stdout)
    states = {t["name"]: (t["state"], t["id"]) for t in detail["tasks"]}
    assert states["a"][0] == "SUCCESS" and states["c"][0] == "SUCCESS" and states["b"] == ("DISABLED", None)
    logs = porpoise(api_cluster, "logs", str(states["c"][1]))
    assert "c ran" in logs.stdout
    status = porpoise(api_cluster, "status", str(instance_id)).stdout.splitlines()
    cells = [[c for c in line.split() if c.isascii() and c != "|"] for line in status]
    assert ["b", "-", "SHELL", "disabled", "0"] in [row[:5] for row in cells], status


def test_watch_exit_code_reflects_failure(api_cluster: ApiCluster, tmp_path: Path) -> None:
    name = f"cli_{uuid.uuid4().hex[:8]}"
    path = workflow_file(tmp_path, name, """\
        tasks:
          - name: broken
            type: SHELL
            params: {rawScript: "echo about to fail; exit 3"}
        """)  # fmt: skip
    assert porpoise(api_cluster, "apply", str(path)).returncode == 0
    run = porpoise(api_cluster, "start", name, "--watch")
    assert run.returncode == 1 and "finished FAILURE" in run.stdout
    instance_id = int(run.stdout.split("started workflow instance ")[1].split()[0])
    watched = porpoise(api_cluster, "watch", str(instance_id), "--json")
    assert watched.returncode == 1 and json.loads(watched.stdout)["state"] == "FAILURE"


def test_follow_logs_stop_and_resume(api_cluster: ApiCluster, tmp_path: Path) -> None:
    name = f"cli_{uuid.uuid4().hex[:8]}"
    gate = tmp_path / "gate"
    path = workflow_file(tmp_path, name, f"""\
        tasks:
          - name: ticker
            type: SHELL
            params:
              rawScript: "for i in 1 2 3; do echo tick $i; done; while [ ! -f {gate} ]; do sleep 0.05; done; echo done"
        """)  # fmt: skip
    assert porpoise(api_cluster, "apply", str(path)).returncode == 0
    started = json.loads(porpoise(api_cluster, "start", name, "--json").stdout)
    instance_id = started["workflow_instance_id"]
    client = api_cluster.client()

    def task_id() -> int | None:
        tasks = client.get(f"/api/v1/instances/{instance_id}")["tasks"]
        return tasks[0]["id"] if tasks and tasks[0]["host"] and tasks[0]["state"] == "RUNNING_EXECUTION" else None

    wait_sync(task_id, 30, what="task running")
    follower = subprocess.Popen(
        [sys.executable, "-m", "engine", "logs", str(task_id()), "--follow"],
        stdout=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "PORPOISE_URL": api_cluster.url, "PORPOISE_TOKEN": api_cluster.token, **tls.cli_env()},
    )  # fmt: skip
    try:
        gate.touch()
        out, _ = follower.communicate(timeout=60)
    finally:
        follower.kill()
        follower.wait()
    assert follower.returncode == 0
    assert [line for line in out.splitlines() if line.startswith(("tick", "done"))] == [
        "tick 1", "tick 2", "tick 3", "done"]  # fmt: skip
    assert porpoise(api_cluster, "stop", str(instance_id)).returncode == 1  # already finished: refused
    refused = porpoise(api_cluster, "resume", str(instance_id))
    assert refused.returncode == 1 and "needs PAUSE or STOP" in refused.stderr


def test_invalid_workflow_file_is_refused_before_anything_is_sent(api_cluster: ApiCluster, tmp_path: Path) -> None:
    name = f"cli_{uuid.uuid4().hex[:8]}"
    path = workflow_file(tmp_path, name, """\
        tasks:
          - name: a
            type: SHELL
            params: {rawScript: "true"}
            upstream: [nowhere]
        """)  # fmt: skip
    out = porpoise(api_cluster, "apply", str(path))
    assert out.returncode == 1
    assert "tasks[0].upstream" in out.stderr and "unknown task 'nowhere'" in out.stderr
    assert "Traceback" not in out.stderr
    assert api_cluster.client().get("/api/v1/workflows", name=name)["total"] == 0
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [unclosed\n")
    out = porpoise(api_cluster, "apply", str(broken))
    assert out.returncode == 1 and "not valid YAML" in out.stderr and "Traceback" not in out.stderr
    missing = porpoise(api_cluster, "apply", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 1 and "cannot read" in missing.stderr


def test_cluster_and_friendly_errors(api_cluster: ApiCluster, tmp_path: Path) -> None:
    out = porpoise(api_cluster, "cluster")
    assert out.returncode == 0
    assert api_cluster.master.address in out.stdout and api_cluster.worker.address in out.stdout
    nodes = json.loads(porpoise(api_cluster, "cluster", "--json").stdout)
    assert len(nodes["masters"]) == 1 and len(nodes["workers"]) == 1
    unknown = porpoise(api_cluster, "start", "no_such_workflow")
    assert unknown.returncode == 1 and "no workflow named 'no_such_workflow'" in unknown.stderr
    bad_token = porpoise(api_cluster, "list", env={"PORPOISE_TOKEN": "pp_wrong"})
    assert bad_token.returncode == 1 and "invalid or expired API token" in bad_token.stderr
    nowhere = porpoise(None, "list", env={"PORPOISE_URL": "http://127.0.0.1:9", "PORPOISE_TOKEN": "x"})
    assert nowhere.returncode == 1 and "cannot reach the Porpoise API" in nowhere.stderr
    unconfigured = porpoise(None, "list", env={"PORPOISE_CLIENT_CONFIG": str(tmp_path / "none.json")})
    assert unconfigured.returncode == 1 and "no API configured" in unconfigured.stderr
    for result in (unknown, bad_token, nowhere, unconfigured):
        assert "Traceback" not in result.stderr


def test_client_file_is_found(api_cluster: ApiCluster, tmp_path: Path) -> None:
    path = tmp_path / "client.json"
    write_client_file(path, api_cluster.url, api_cluster.token)
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    out = porpoise(None, "list", "--json", env={"PORPOISE_CLIENT_CONFIG": str(path)})
    assert out.returncode == 0 and "items" in json.loads(out.stdout)


def test_scheduling_and_control_commands(api_cluster: ApiCluster, tmp_path: Path) -> None:
    name = f"cli_{uuid.uuid4().hex[:8]}"
    ledger = tmp_path / "ledger"
    path = workflow_file(tmp_path, name, f"""\
        tasks:
          - name: a
            type: SHELL
            params: {{rawScript: "echo a >> {ledger}"}}
          - name: b
            type: SHELL
            upstream: [a]
            params: {{rawScript: "echo b >> {ledger}; exit 1"}}
        """)  # fmt: skip
    assert porpoise(api_cluster, "apply", str(path)).returncode == 0
    bad = porpoise(api_cluster, "schedule", "create", name, "--cron", "0 0 0 LW * ?")
    assert bad.returncode == 1 and "LW" in bad.stderr and "Traceback" not in bad.stderr
    made = json.loads(porpoise(api_cluster, "schedule", "create", name, "--cron", "0 0 3 * * ?", "--json").stdout)
    shown = porpoise(api_cluster, "schedule", "show", str(made["id"]), "--count", "3")
    assert shown.returncode == 0 and shown.stdout.count("next:") == 3 and "03:00:00" in shown.stdout
    listed = porpoise(api_cluster, "schedule", "list", name)
    assert listed.returncode == 0 and "0 0 3 * * ?" in listed.stdout
    assert porpoise(api_cluster, "schedule", "delete", str(made["id"])).returncode == 0
    preview = json.loads(porpoise(api_cluster, "schedule", "preview", "--cron", "*/5 * * * *", "--json").stdout)
    assert len(preview["next_fire_times"]) == 5

    only_a = porpoise(api_cluster, "start", name, "--from-task", "a", "--scope", "TASK_ONLY", "--watch")
    assert only_a.returncode == 0, only_a.stdout + only_a.stderr
    failed = porpoise(api_cluster, "start", name, "--watch", "--json")
    assert failed.returncode != 0
    instance_id = json.loads(porpoise(api_cluster, "list", "--workflow", name, "--json").stdout)["items"][0]["id"]
    detail = api_cluster.client().get(f"/api/v1/instances/{instance_id}")
    b_id = next(t["id"] for t in detail["tasks"] if t["name"] == "b")
    assert porpoise(api_cluster, "force-success", str(b_id)).returncode == 0
    assert porpoise(api_cluster, "recover-failed", str(instance_id)).returncode == 0
    wait_sync(lambda: api_cluster.client().get(f"/api/v1/instances/{instance_id}")["state"] == "SUCCESS", 60)
    assert porpoise(api_cluster, "rerun", str(instance_id)).returncode == 0
    filled = porpoise(api_cluster, "backfill", name, "--date", "2026-01-01T00:00:00Z", "--date", "2026-01-02T00:00:00Z",
                      "--parallel", "2")  # fmt: skip
    assert filled.returncode == 0 and "2 date(s) queued as 2 chain(s)" in filled.stdout
    assert ledger.read_text().split()[:3] == ["a", "a", "b"]
