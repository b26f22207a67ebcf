"""Time zones and instance filters in real headless Chromium (issue 28 items 4 and 11), against the real API
server, master and worker of tests/conftest.py::api_cluster serving the built UI (ui/dist). The steps are in
ui/tests/e2e/timezones.mjs: a schedule `0 2 * * *` in Asia/Shanghai lists its next fire as 02:00 in its zone
and 18:00 UTC for a viewer in UTC; the header's display-zone switch (an unknown zone refused at the field,
the choice kept over a reload) moves every time; the instances list filtered by workflow name (picked from
the autocomplete), run type, business-date range typed in the display zone, host and state, all kept in the
URL over a reload."""

from __future__ import annotations

import os
import subprocess
import uuid

import pytest

from tests import tls
from tests.conftest import ApiCluster
from tests.helpers import start_workflow
from tests.test_ui_e2e import UI, _chromium, wait_claimed_final

pytestmark = pytest.mark.slow


def test_time_zones_and_instance_filters_in_headless_chromium(api_cluster: ApiCluster) -> None:
    chromium = _chromium()
    c = api_cluster
    client = c.client()
    tag = uuid.uuid4().hex[:8]
    name = f"tz_nightly_{tag}"
    doc = {"name": name, "project": f"tz-{tag}",
           "tasks": [{"name": "a", "type": "SHELL", "params": {"rawScript": "true"}}]}  # fmt: skip
    code = client.request("POST", "/api/v1/workflows", doc, query={"release": True})["code"]
    client.post("/api/v1/schedules", {"workflow_code": code, "crontab": "0 2 * * *", "timezone": "Asia/Shanghai"})
    manual = int(start_workflow(client, code, finished=True)["id"])
    early, late = (
        wait_claimed_final(c, client.post(f"/api/v1/workflows/{code}/backfill", {"dates": [date]})["command_ids"][0])
        for date in ("2026-03-01T00:00:00Z", "2026-03-05T00:00:00Z")
    )
    user, password = f"tz_{tag}", uuid.uuid4().hex
    client.post("/api/v1/users", {"name": user, "password": password, "admin": True})
    host = client.get(f"/api/v1/instances/{late}")["host"]
    env = {**os.environ, **tls.browser_env(), "PORPOISE_URL": c.url, "E2E_USER": user, "E2E_PASSWORD": password,
           "E2E_WORKFLOW": str(code), "E2E_NAME": name, "E2E_MANUAL": str(manual), "E2E_EARLY": str(early),
           "E2E_LATE": str(late), "E2E_HOST": host or "", "CHROMIUM": chromium}  # fmt: skip
    done = subprocess.run(
        ["node", "tests/e2e/timezones.mjs"], check=False, cwd=UI, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "timezones: all steps passed" in done.stdout
