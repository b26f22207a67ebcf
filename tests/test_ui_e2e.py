"""The web UI end to end: real headless Chromium (Debian's package, driven by playwright-core from
ui/node_modules) against the real API server, master and worker of tests/conftest.py::api_cluster, which
serve the built UI (ui/dist, made by ``make install``). The steps are in ui/tests/e2e/run.mjs: sign in;
create a workflow in the editor; edit a schedule and see its next fire times; start the workflow and
watch its graph turn green live; open a task's log; stop a running instance; see a refused action's 409
reason; see a failure on the overview, open its log, recover it. Screenshots go to $E2E_SCREENSHOTS when
set (docs/ui/)."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.conftest import ApiCluster
from tests.helpers import ROOT, start_workflow

pytestmark = pytest.mark.slow

UI = ROOT / "ui"


def _start(c: ApiCluster, doc: dict[str, object], finished: bool = False) -> int:
    """Save, release and start ``doc``; the instance id (once finished, when asked)."""
    client = c.client()
    code = client.request("POST", "/api/v1/workflows", doc, query={"release": True})["code"]
    return int(start_workflow(client, code, finished=finished)["id"])


def test_ui_in_headless_chromium(api_cluster: ApiCluster, tmp_path: Path) -> None:
    assert (UI / "dist" / "index.html").is_file(), "the UI is not built: run `make install`"
    assert (UI / "node_modules" / "playwright-core").is_dir(), "ui/node_modules is missing: run `make install`"
    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium")
    assert chromium, "Chromium is missing: `make install` installs it (apt-get install chromium, as root)"
    c = api_cluster
    tag = uuid.uuid4().hex[:8]
    project = "ui-e2e"
    long_doc = {
        "name": f"ui_long_{tag}",
        "project": project,
        "tasks": [{"name": "wait", "type": "SHELL", "params": {"rawScript": "sleep 600"}}],
    }
    long_instance = _start(c, long_doc)
    mark = tmp_path / "ran-once"
    flaky_doc = {
        "name": f"ui_flaky_{tag}",
        "project": project,
        "tasks": [
            {
                "name": "flaky",
                "type": "SHELL",
                # fails the first time, succeeds when recovered
                "params": {"rawScript": f"test -f {mark} && echo recovered || {{ touch {mark}; "
                           "echo failing on purpose; exit 1; }"},
            }
        ],
    }  # fmt: skip
    failed_instance = _start(c, flaky_doc, finished=True)
    assert c.client().get(f"/api/v1/instances/{failed_instance}")["state"] == "FAILURE"
    env = {
        **os.environ,
        "PORPOISE_URL": c.url,
        "PORPOISE_TOKEN": c.token,
        "E2E_TAG": tag,
        "E2E_LONG_INSTANCE": str(long_instance),
        "E2E_FAILED_INSTANCE": str(failed_instance),
        "CHROMIUM": chromium,
    }
    try:
        result = subprocess.run(
            ["node", "tests/e2e/run.mjs"], check=False, cwd=UI, env=env, capture_output=True, text=True, timeout=300
        )
    finally:
        detail = c.client().get(f"/api/v1/instances/{long_instance}")
        if not detail["finished"]:
            c.client().post(f"/api/v1/instances/{long_instance}/stop")
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"
