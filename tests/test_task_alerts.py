"""Task-level alerts end to end on real processes (the api_cluster fixture): a task's ``alert_on`` and
``alert_group``, checked when the workflow is saved; the master records an alert row when an attempt ends
the chosen way, with the worker's last log lines; the API server delivers it to a real webhook receiver."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from engine.alerts.service import task_log_link
from tests.conftest import ApiCluster
from tests.helpers import wait_sync
from tests.test_alerts import Hook, webhook  # noqa: F401 - the receiver fixture
from tests.test_api import error_of, start, wait_final
from tests.test_users_e2e import make_user

pytestmark = pytest.mark.slow

SCRIPT = 'echo "loading the day"\necho "attempt $PORPOISE_TASK_ATTEMPT broke: no rows"\nexit 3'


def _doc(name: str, project: str, **task: Any) -> dict[str, Any]:
    return {"name": name, "project": project,
            "tasks": [{"name": "flaky", "type": "SHELL", "params": {"rawScript": SCRIPT}, **task}]}  # fmt: skip


def test_a_task_that_fails_twice_alerts_its_retry_then_its_failure_with_its_last_log_lines(
    api_cluster: ApiCluster,
    webhook: tuple[str, Hook],  # noqa: F811
) -> None:
    c, (url, hook) = api_cluster, webhook
    name = f"task_alerts_{uuid.uuid4().hex[:6]}"
    group = c.client().post("/api/v1/alert-groups", {"name": name, "senders": [
        {"type": "WEBHOOK", "name": "chat", "params": {"url": url}}]})  # fmt: skip
    doc = _doc(name, "alert-tests", retries=1, retry_interval=0, alert_on=["retry", "failure"], alert_group=name)
    code = c.client().post("/api/v1/workflows", doc, release="true")["code"]
    saved = c.client().get(f"/api/v1/workflows/{code}")["document"]["tasks"][0]
    assert (saved["alert_on"], saved["alert_group"]) == (["failure", "retry"], name)
    # the run's own failure alert goes to the same group: it names the failed task with its last lines
    detail = wait_final(c, start(c, code, {"warning_type": "FAILURE", "warning_group_id": group["id"]}))
    assert detail["state"] == "FAILURE"
    rows = c.query(
        "SELECT id, attempt, host FROM task_instance WHERE workflow_instance_id = $1 ORDER BY attempt", detail["id"]
    )
    assert [r["attempt"] for r in rows] == [1, 2]

    def delivered() -> bool:
        return len([p for _, p in hook.posts if p["workflow_instance_id"] == detail["id"]]) == 3

    wait_sync(delivered, 30, what="three alerts delivered")
    posts = sorted((p for _, p in hook.posts if p["workflow_instance_id"] == detail["id"]), key=lambda p: p["id"])
    retry, failure, workflow = posts
    assert [p["alert_type_name"] for p in posts] == ["TASK_RETRY", "TASK_FAILURE", "PROCESS_INSTANCE_FAILURE"]
    for alert, row in ((retry, rows[0]), (failure, rows[1])):
        assert alert["task_instance_id"] == row["id"] and "task flaky" in alert["title"]
        content = alert["content"]
        assert f"attempt {row['attempt']}" in content and f"worker {row['host']}" in content
        assert "last log lines:" in content and "loading the day" in content
        assert f"attempt {row['attempt']} broke: no rows" in content
    assert "attempt 2 broke" not in retry["content"] and "attempt 1 broke" not in failure["content"]
    assert "failed tasks: flaky" in workflow["content"] and "attempt 2 broke: no rows" in workflow["content"]
    stored = c.query("SELECT log_tail FROM task_instance WHERE id = $1", rows[1]["id"])[0]["log_tail"]
    assert stored.splitlines()[-1].endswith("finished: FAILURE (exit code 3)") and len(stored) <= 4096


def test_a_task_s_alert_group_is_checked_when_the_workflow_is_saved(api_cluster: ApiCluster) -> None:
    c = api_cluster
    name = f"task_alert_check_{uuid.uuid4().hex[:6]}"
    for group, reason in ((f"{name}_nowhere", "no alert group"), (987654321, "no alert group")):
        err = error_of(lambda group=group: c.client().post("/api/v1/workflows", _doc(name, "alert-tests",
                                                                                     alert_group=group)))  # fmt: skip
        assert (err.status, err.field) == (400, "tasks[0].alert_group") and reason in str(err), err
    err = error_of(lambda: c.client().post("/api/v1/workflows", _doc(name, "alert-tests", alert_on=["never"])))
    assert (err.status, err.field) == (400, "tasks[0].alert_on[0]"), err
    # a general user may name only a group granted to them or to the workflow's project
    group = c.client().post("/api/v1/alert-groups", {"name": name, "senders": []})
    user, project = f"ta{uuid.uuid4().hex[:8]}", f"pta-{uuid.uuid4().hex[:6]}"
    as_user = make_user(c, user)
    as_user.post("/api/v1/workflows", _doc(name, project))  # the project is theirs
    err = error_of(lambda: as_user.post("/api/v1/workflows", _doc(name, project, alert_group=group["id"])))
    assert (err.status, err.field) == (400, "tasks[0].alert_group") and "not granted" in str(err), err
    c.client().post("/api/v1/grants", {"resource_type": "alert_group", "resource": group["id"], "project": project})
    as_user.post("/api/v1/workflows", _doc(name, project, alert_group=group["id"], alert_on=["failure"]))
    saved = c.query(
        "SELECT alert_on, alert_group_id FROM task_definition WHERE project_code = (SELECT code FROM project"
        " WHERE name = $1)",
        project,
    )
    assert [(r["alert_on"], r["alert_group_id"]) for r in saved] == [("failure", group["id"])]


def test_a_task_alert_links_to_the_ui_s_log_page() -> None:
    assert task_log_link("https://porpoise.example.com/", 42) == "https://porpoise.example.com/tasks/42/log"
    assert task_log_link("", 42) is None and task_log_link("https://x", None) is None
