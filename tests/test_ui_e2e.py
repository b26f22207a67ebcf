"""The web UI end to end: real headless Chromium (Debian's package, driven by playwright-core from
ui/node_modules) against the real API server, master and worker of tests/conftest.py::api_cluster, which
serve the built UI (ui/dist, made by ``make install``). The steps are in ui/tests/e2e/run.mjs: sign in,
see a workflow's DAG, start it, watch its graph turn green live, open a task's log, stop a running
instance, see a refused action's 409 reason. Screenshots go to $E2E_SCREENSHOTS when set (docs/ui/)."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid

import pytest

from tests.conftest import ApiCluster
from tests.helpers import ROOT, wait_sync

pytestmark = pytest.mark.slow

UI = ROOT / "ui"


def _start(c: ApiCluster, doc: dict[str, object]) -> tuple[int, int]:
    client = c.client()
    code = client.request("POST", "/api/v1/workflows", doc, query={"release": True})["code"]
    command = client.post(f"/api/v1/workflows/{code}/start", {})
    status: dict[str, object] = {}

    def claimed() -> bool:
        nonlocal status
        status = client.get(f"/api/v1/commands/{command['command_id']}")
        return status["workflow_instance_id"] is not None

    wait_sync(claimed, 30, what="the command became an instance")
    return int(code), int(status["workflow_instance_id"])  # type: ignore[call-overload]


def test_ui_in_headless_chromium(api_cluster: ApiCluster) -> None:
    assert (UI / "dist" / "index.html").is_file(), "the UI is not built: run `make install`"
    assert (UI / "node_modules" / "playwright-core").is_dir(), "ui/node_modules is missing: run `make install`"
    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium")
    assert chromium, "Chromium is missing: `make install` installs it (apt-get install chromium, as root)"
    c = api_cluster
    tag = uuid.uuid4().hex[:8]
    project = "ui-e2e"
    doc = {
        "name": f"ui_{tag}",
        "project": project,
        "tasks": [
            # a runs long enough for the page to see it running
            {"name": "a", "type": "SHELL", "params": {"rawScript": "echo start of a; sleep 3; echo done with a"}},
            {"name": "b", "type": "SHELL", "params": {"rawScript": "echo b"}, "upstream": ["a"]},
        ],
    }
    code = c.client().request("POST", "/api/v1/workflows", doc, query={"release": True})["code"]
    long_doc = {
        "name": f"ui_long_{tag}",
        "project": project,
        "tasks": [{"name": "wait", "type": "SHELL", "params": {"rawScript": "sleep 600"}}],
    }
    _, long_instance = _start(c, long_doc)
    env = {
        **os.environ,
        "PORPOISE_URL": c.url,
        "PORPOISE_TOKEN": c.token,
        "E2E_WORKFLOW": str(code),
        "E2E_LONG_INSTANCE": str(long_instance),
        "CHROMIUM": chromium,
    }
    try:
        result = subprocess.run(
            ["node", "tests/e2e/run.mjs"], check=False, cwd=UI, env=env, capture_output=True, text=True, timeout=240
        )
    finally:
        detail = c.client().get(f"/api/v1/instances/{long_instance}")
        if not detail["finished"]:
            c.client().post(f"/api/v1/instances/{long_instance}/stop")
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"
