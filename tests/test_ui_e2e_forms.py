"""Task forms in real headless Chromium (issue 28 item 9), against the real API server, master and worker of
tests/conftest.py::api_cluster serving the built UI (ui/dist). The steps are in ui/tests/e2e/forms.mjs: a
SWITCH with two branches and the default built in its branch editor, local parameters as rows (a bad value
refused at its row), scripts in the code editor; saved, run: the branch labels on the DAG's edges, the
branches not taken SKIPPED, the rendered script in the task's detail and at the head of its log. Screenshots
docs/ui/editor-code.png, editor-switch.png and task-rendered-script.png go to $E2E_SCREENSHOTS when set."""

from __future__ import annotations

import os
import subprocess
import uuid

import pytest

from tests import tls
from tests.conftest import ApiCluster
from tests.test_ui_e2e import UI, _chromium

pytestmark = pytest.mark.slow


def test_task_forms_in_headless_chromium(api_cluster: ApiCluster) -> None:
    assert (UI / "dist" / "index.html").is_file(), "the UI is not built: run `make install`"
    chromium = _chromium()
    c = api_cluster
    tag = uuid.uuid4().hex[:8]
    user, password = f"forms_{tag}", uuid.uuid4().hex
    c.client().post("/api/v1/users", {"name": user, "password": password, "admin": True})
    project = f"forms-{tag}"
    c.client().post("/api/v1/projects", {"name": project})
    env = {**os.environ, **tls.browser_env(), "PORPOISE_URL": c.url, "E2E_USER": user, "E2E_PASSWORD": password,
           "E2E_TAG": tag, "E2E_PROJECT": project, "CHROMIUM": chromium}  # fmt: skip
    done = subprocess.run(
        ["node", "tests/e2e/forms.mjs"], check=False, cwd=UI, env=env, capture_output=True, text=True, timeout=400
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "forms: all steps passed" in done.stdout
