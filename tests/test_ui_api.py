"""API answers made for the web UI: the overview, the workflows list's last runs and next fire time, sub-workflow
links, logs opened at their end, followed while a task writes and searched on the worker."""

from __future__ import annotations

import json
import ssl
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.client import ApiClientError
from tests.conftest import ApiCluster
from tests.helpers import start_workflow, wait_sync

pytestmark = pytest.mark.slow


def _run(c: ApiCluster, code: int) -> int:
    return int(start_workflow(c.client(), code)["id"])


def test_overview_and_workflow_list_for_the_ui(api_cluster: ApiCluster) -> None:
    c = api_cluster
    client = c.client()
    name = f"ov_{uuid.uuid4().hex[:8]}"
    doc = {
        "name": name,
        "project": "ui-api",
        "tasks": [
            {"name": "ok", "type": "SHELL", "params": {"rawScript": "true"}},
            {"name": "boom", "type": "SHELL", "params": {"rawScript": "exit 3"}, "upstream": ["ok"]},
        ],
    }
    before = client.get("/api/v1/overview")
    code = client.request("POST", "/api/v1/workflows", doc, query={"release": True})["code"]
    first, second = _run(c, code), _run(c, code)

    overview = client.get("/api/v1/overview")
    assert overview["last_day"].get("FAILURE", 0) == before["last_day"].get("FAILURE", 0) + 2
    assert overview["last_week"]["FAILURE"] >= overview["last_day"]["FAILURE"]
    latest = overview["failures"][0]
    assert latest["id"] == second and latest["state"] == "FAILURE"
    task = client.get(f"/api/v1/tasks/{latest['failed_task']['id']}")
    assert latest["failed_task"]["name"] == "boom" == task["name"] and task["state"] == "FAILURE"
    cluster = overview["cluster"]
    assert (cluster["registry"], cluster["masters"], cluster["workers"]) == (True, 1, 1)
    # a node is listed when its heartbeat is not NORMAL (a loaded test machine can make the worker BUSY)
    assert set(cluster["unhealthy"]) <= {c.master.address, c.worker.address}
    assert isinstance(overview["running_total"], int)

    listed = client.get("/api/v1/workflows", search=name)["items"]
    assert [w["code"] for w in listed] == [code]
    assert listed[0]["last_runs"] == [{"id": second, "state": "FAILURE"}, {"id": first, "state": "FAILURE"}]
    assert listed[0]["next_fire_time"] is None
    client.post("/api/v1/schedules", {"workflow_code": code, "crontab": "0 3 * * *", "online": True})
    listed = client.get("/api/v1/workflows", search=name)["items"]
    assert listed[0]["next_fire_time"].endswith("03:00:00+00:00")


def test_instance_links_sub_workflow_children_and_parent(api_cluster: ApiCluster) -> None:
    c = api_cluster
    client = c.client()
    tag = uuid.uuid4().hex[:8]
    child = {"name": f"child_{tag}", "project": "ui-api", "tasks": [{"name": "x", "type": "SHELL",
             "params": {"rawScript": "true"}}]}  # fmt: skip
    client.request("POST", "/api/v1/workflows", child, query={"release": True})
    parent = {"name": f"parent_{tag}", "project": "ui-api", "tasks": [{"name": "sub", "type": "SUB_PROCESS",
              "params": {"workflow": f"child_{tag}"}}]}  # fmt: skip
    code = client.request("POST", "/api/v1/workflows", parent, query={"release": True})["code"]
    top = client.get(f"/api/v1/instances/{_run(c, code)}")
    assert top["state"] == "SUCCESS" and top["parent_instance_id"] is None
    (sub,) = top["tasks"]
    below = client.get(f"/api/v1/instances/{sub['sub_instance_id']}")
    assert below["name"].startswith(f"child_{tag}") and below["parent_instance_id"] == top["id"]
    assert "sub_instance_id" not in below["tasks"][0]


def test_log_opens_at_its_end_and_pages_by_line(api_cluster: ApiCluster) -> None:
    c = api_cluster
    client = c.client()
    doc = {"name": f"log_{uuid.uuid4().hex[:8]}", "project": "ui-api",
           "tasks": [{"name": "many", "type": "SHELL", "params": {"rawScript": "seq 1 2500"}}]}  # fmt: skip
    code = client.request("POST", "/api/v1/workflows", doc, query={"release": True})["code"]
    (task,) = client.get(f"/api/v1/instances/{_run(c, code)}")["tasks"]
    whole = client.get(f"/api/v1/tasks/{task['id']}/log/download").splitlines()
    end = client.get(f"/api/v1/tasks/{task['id']}/log", from_end=True, limit=10)
    assert end["total"] == len(whole) and end["start"] == len(whole) - 10
    assert end["lines"] == whole[-10:] and end["next"] == len(whole) and end["complete"]
    assert "2500" in end["lines"][-2]  # the last line is the runner's "finished" line
    page = client.get(f"/api/v1/tasks/{task['id']}/log", skip=1500, limit=3)
    assert (page["lines"], page["start"], page["next"]) == (whole[1500:1503], 1500, 1503)


def _events(c: ApiCluster, path: str, token: str = "") -> Iterator[tuple[str, Any]]:
    """(event, data) of a server-sent-events answer, as they arrive."""
    req = urllib.request.Request(c.url + path, headers={"Authorization": f"Bearer {token or c.token}"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        event = ""
        for raw in resp:
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                event = line[len("event: ") :]
            elif line.startswith("data: "):
                yield event, json.loads(line[len("data: ") :])


def test_log_follow_streams_lines_while_the_task_runs_and_search_runs_on_the_worker(
    api_cluster: ApiCluster, tmp_path: Path
) -> None:
    c = api_cluster
    client = c.client()
    go = tmp_path / "go"
    script = f"echo first line; while [ ! -f {go} ]; do sleep 0.05; done; seq 1 300 | sed 's/^/row /'; echo Needle end"
    doc = {"name": f"follow_{uuid.uuid4().hex[:8]}", "project": "ui-api",
           "tasks": [{"name": "waits", "type": "SHELL", "params": {"rawScript": script}}]}  # fmt: skip
    code = client.request("POST", "/api/v1/workflows", doc, query={"release": True})["code"]
    instance = start_workflow(client, code, finished=False)["id"]
    task = wait_sync(
        # RUNNING: its worker reported it started, with its log's path (a dispatched task has a host but no log)
        lambda: next(
            (t for t in client.get(f"/api/v1/instances/{instance}")["tasks"] if t["state"] == "RUNNING_EXECUTION"),
            None,
        ),
        60,
        what="the task runs on a worker",
    )
    seen: list[str] = []
    end: dict[str, Any] = {}
    for event, data in _events(c, f"/api/v1/tasks/{task['id']}/log/follow"):
        assert event in ("lines", "end"), (event, data)
        if event == "end":
            end = data
            break
        assert data["start"] == len(seen)
        seen += data["lines"]
        if any("first line" in line for line in seen) and not go.exists():
            # the task is still blocked on the file: these lines came while it runs
            assert not client.get(f"/api/v1/tasks/{task['id']}")["finished"]
            go.touch()
    whole = client.get(f"/api/v1/tasks/{task['id']}/log/download").splitlines()
    assert go.exists() and end == {"next": len(whole), "complete": True}
    assert seen == whole

    found = client.get(f"/api/v1/tasks/{task['id']}/log/search", q="needle")
    assert found["done"] and found["total"] == len(whole)
    assert [(h["line"], h["text"]) for h in found["hits"]] == [
        (i, t) for i, t in enumerate(whole) if "needle" in t.lower()
    ]
    # in steps: two matches at a time, going on from next
    rows: list[int] = []
    after, done = 0, False
    while not done:
        step = client.get(f"/api/v1/tasks/{task['id']}/log/search", q="ROW 1", after=after, limit=2)
        rows += [h["line"] for h in step["hits"]]
        after, done = step["next"], step["done"]
    assert rows == [i for i, t in enumerate(whole) if "row 1" in t.lower()]
    with pytest.raises(ApiClientError) as refused:
        client.get(f"/api/v1/tasks/{task['id']}/log/search", q="")
    assert refused.value.field == "query.q"


def test_a_log_follow_ends_when_its_token_is_revoked_and_any_task_name_downloads(
    api_cluster: ApiCluster, tmp_path: Path
) -> None:
    """Issue 24 (low): a log follow ran up to an hour whatever happened to its token, and a task name with a
    newline broke the log download (a quote chose the file name). The follow checks its caller again while
    it runs; the download's file name is sanitised (RFC 6266, the name itself in filename*)."""
    c = api_cluster
    client = c.client()
    go = tmp_path / "go"
    name = 'x"; filename=evil.sh\nnext'
    script = f"echo first; while [ ! -f {go} ]; do sleep 0.05; done"
    doc = {"name": f"follow_{uuid.uuid4().hex[:8]}", "project": "ui-api",
           "tasks": [{"name": name, "type": "SHELL", "params": {"rawScript": script}}]}  # fmt: skip
    code = client.request("POST", "/api/v1/workflows", doc, query={"release": True})["code"]
    instance = start_workflow(client, code, finished=False)["id"]
    task = wait_sync(
        lambda: next(
            (t for t in client.get(f"/api/v1/instances/{instance}")["tasks"] if t["state"] == "RUNNING_EXECUTION"),
            None,
        ),
        60,
        what="the task runs on a worker",
    )
    token = client.post("/api/v1/tokens", {"name": "follower", "expires_in_days": 1})
    events = []
    for event, data in _events(c, f"/api/v1/tasks/{task['id']}/log/follow", token["token"]):
        events.append((event, data))
        if event == "lines" and len(events) == 1:
            client.delete(f"/api/v1/tokens/{token['id']}")
    assert events[-1] == ("error", {"message": "your credentials are no longer valid"}), events
    go.touch()
    wait_sync(lambda: client.get(f"/api/v1/instances/{instance}")["finished"], 60, what="the run ends")
    req = urllib.request.Request(
        f"{c.url}/api/v1/tasks/{task['id']}/log/download", headers={"Authorization": f"Bearer {c.token}"}
    )
    context = ssl.create_default_context(cafile=c.ca_file) if c.url.startswith("https://") else None
    with urllib.request.urlopen(req, timeout=30, context=context) as resp:
        disposition = resp.headers["Content-Disposition"]
        assert resp.status == 200 and b"first" in resp.read()
    assert disposition.startswith('attachment; filename="x___filename_evil.shnext-') and disposition.count('"') == 2
    assert "filename*=UTF-8''x%22%3B%20filename%3Devil.shnext-" in disposition, disposition
