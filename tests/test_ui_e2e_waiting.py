""" "Why isn't it running?" in real headless Chromium (issue 28 item 10), against the real API server, master and
worker of tests/conftest.py::api_cluster serving the built UI (ui/dist). The steps are in
ui/tests/e2e/waiting.mjs: a task of a worker group without a worker says "no live worker in group …" in its row
and its DAG node's tooltip, the second task of a task group of size 1 gives its place in the queue; axe-clean.
Screenshot docs/ui/waiting-reason.png with $E2E_SCREENSHOTS."""

from __future__ import annotations

import os
import subprocess
import uuid

import pytest

from tests import tls
from tests.conftest import ApiCluster
from tests.helpers import start_workflow
from tests.test_ui_e2e import UI, _chromium

pytestmark = pytest.mark.slow


def test_why_a_task_is_not_running_in_headless_chromium(api_cluster: ApiCluster) -> None:
    chromium = _chromium()
    c = api_cluster
    client = c.client()
    tag = uuid.uuid4().hex[:8]
    group, task_group = f"gpu_{tag}", f"db_{tag}"
    client.post("/api/v1/task-groups", {"name": task_group, "size": 1})
    sleep = {"type": "SHELL", "params": {"rawScript": "sleep 600"}, "task_group": task_group}
    doc = {
        "name": f"why_{tag}",
        "project": f"why-{tag}",
        "tasks": [
            {"name": "nowhere", "type": "SHELL", "params": {"rawScript": "echo"}, "worker_group": group},
            # the higher priority is admitted first: "queued" waits behind it
            {**sleep, "name": "holder", "task_group_priority": 2},
            {**sleep, "name": "queued", "task_group_priority": 1},
        ],
    }
    code = client.request("POST", "/api/v1/workflows", doc, query={"release": True})["code"]
    instance = int(start_workflow(client, code, finished=False)["id"])
    user, password = f"why_{tag}", uuid.uuid4().hex
    client.post("/api/v1/users", {"name": user, "password": password, "admin": True})
    env = {**os.environ, **tls.browser_env(), "PORPOISE_URL": c.url, "E2E_USER": user, "E2E_PASSWORD": password,
           "E2E_INSTANCE": str(instance), "E2E_GROUP": group, "E2E_TASK_GROUP": task_group,
           "CHROMIUM": chromium}  # fmt: skip
    try:
        done = subprocess.run(
            ["node", "tests/e2e/waiting.mjs"], check=False, cwd=UI, env=env, capture_output=True, text=True, timeout=300
        )
    finally:
        client.post(f"/api/v1/instances/{instance}/stop", {})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "waiting: all steps passed" in done.stdout
