"""The web UI end to end: real headless Chromium (Debian's package, driven by playwright-core from
ui/node_modules) against the real API server, master and worker of tests/conftest.py::api_cluster, which
serve the built UI (ui/dist, made by ``make install``). The steps are in ui/tests/e2e/run.mjs: sign in with
a password (session cookie, CSRF on writes) after a wrong password and a wrong token; keyboard navigation;
create a 3-task workflow on the graph by clicking and dragging, see the server's refusal at the field, save;
edit a schedule and see its next fire times; start the workflow and watch its graph turn green live; open a
task's log and search it; stop a running instance; see a refused action's 409 reason; see a failure on the
overview, open its log, recover it; admin: users, project grants, a tenant created and granted to a project;
the API server stopped and started again under the page (the lost-connection banner comes and goes);
axe-core on every page. Screenshots go to $E2E_SCREENSHOTS when set (docs/ui/). Beside it: collapse in the
editor (collapse.mjs) and the streamed log download (download.mjs)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import pytest

from tests import tls
from tests.conftest import ApiCluster
from tests.helpers import ROOT, start_workflow
from tests.test_alert_channels import Receiver, threaded_receiver  # noqa: F401 (a fixture)

pytestmark = pytest.mark.slow

UI = ROOT / "ui"


def _chromium() -> str:
    """The system Chromium (Debian's package), or $CHROMIUM."""
    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium")
    assert chromium, "Chromium is missing: `make install` installs it (apt-get install chromium, as root)"
    return chromium


def _start(c: ApiCluster, doc: dict[str, object], finished: bool = False) -> int:
    """Save, release and start ``doc``; the instance id (once finished, when asked)."""
    client = c.client()
    code = client.request("POST", "/api/v1/workflows", doc, query={"release": True})["code"]
    return int(start_workflow(client, code, finished=finished)["id"])


def test_ui_in_headless_chromium(api_cluster: ApiCluster, tmp_path: Path) -> None:
    assert (UI / "dist" / "index.html").is_file(), "the UI is not built: run `make install`"
    assert (UI / "node_modules" / "playwright-core").is_dir(), "ui/node_modules is missing: run `make install`"
    chromium = _chromium()
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
    user, password = f"ui_{tag}", uuid.uuid4().hex
    c.client().post("/api/v1/users", {"name": user, "password": password, "admin": True})
    assert c.client().get(f"/api/v1/instances/{failed_instance}")["state"] == "FAILURE"
    env = {
        **os.environ,
        "PORPOISE_URL": c.url,
        "PORPOISE_TOKEN": c.token,
        "E2E_TAG": tag,
        "E2E_LONG_INSTANCE": str(long_instance),
        "E2E_FAILED_INSTANCE": str(failed_instance),
        "E2E_USER": user,
        "E2E_PASSWORD": password,
        **tls.browser_env(),
        "CHROMIUM": chromium,
    }
    api_down = False
    output: list[str] = []
    errors = ""
    with subprocess.Popen(
        ["node", "tests/e2e/run.mjs"], cwd=UI, env=env, text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    ) as proc:  # fmt: skip
        watchdog = threading.Timer(420, proc.kill)
        watchdog.start()
        try:
            assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
            for line in proc.stdout:  # the run asks for the API server to go away and come back
                output.append(line)
                if line.strip() in ("STOP_API", "START_API"):
                    api_down = line.strip() == "STOP_API"
                    if api_down:
                        c.api.stop()
                    else:
                        c.api.start()
                    proc.stdin.write("done\n")
                    proc.stdin.flush()
            errors = proc.stderr.read()
            proc.wait(60)
        finally:
            watchdog.cancel()
            if proc.poll() is None:
                proc.kill()
            if api_down:
                c.api.start()
            detail = c.client().get(f"/api/v1/instances/{long_instance}")
            if not detail["finished"]:
                c.client().post(f"/api/v1/instances/{long_instance}/stop")
    assert proc.returncode == 0, "".join(output) + errors


def _generated_dag(name: str, branches: int = 10, length: int = 8) -> dict[str, object]:
    """start -> b<i>_0 -> ... -> b<i>_<length-1> -> join for each branch, and b2_0 -> b3_4 (so b3_0's branch,
    what runs only after it, stops at b3_3) and b3_2 -> b3_4 (two links from that branch to b3_4)."""
    tasks: list[dict[str, object]] = [{"name": "start", "type": "SHELL", "params": {"rawScript": "true"}}]
    for i in range(branches):
        for j in range(length):
            up = ["start"] if j == 0 else [f"b{i}_{j - 1}"]
            if (i, j) == (3, 4):
                up += ["b2_0", "b3_2"]
            tasks.append({"name": f"b{i}_{j}", "type": "SHELL", "params": {"rawScript": "true"}, "upstream": up})
    last = [f"b{i}_{length - 1}" for i in range(branches)]
    tasks.append({"name": "join", "type": "SHELL", "params": {"rawScript": "true"}, "upstream": last})
    return {"name": name, "project": "ui-e2e", "tasks": tasks}


def test_editor_collapse_in_headless_chromium(api_cluster: ApiCluster) -> None:
    """ui/tests/e2e/collapse.mjs: collapse a branch of a generated DAG in the editor (one node with its count,
    edges to it once, laid out again), expand it, collapse a selection (a cycle-making one refused), find a
    task hidden in a group."""
    chromium = _chromium()
    c = api_cluster
    doc = _generated_dag(f"ui_collapse_{uuid.uuid4().hex[:8]}")
    code = c.client().request("POST", "/api/v1/workflows", doc)["code"]
    env = {**os.environ, **tls.browser_env(), "PORPOISE_URL": c.url, "PORPOISE_TOKEN": c.token,
           "E2E_WORKFLOW": str(code), "CHROMIUM": chromium}  # fmt: skip
    done = subprocess.run(
        ["node", "tests/e2e/collapse.mjs"], check=False, cwd=UI, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "collapse: all steps passed" in done.stdout


def test_log_download_streams_to_disk(api_cluster: ApiCluster, tmp_path: Path) -> None:
    """ui/tests/e2e/download.mjs: signed in with a password, the log page's Download is a link to the streaming
    endpoint (no fetch by the page); the file the browser saves is the whole log, byte for byte."""
    chromium = _chromium()
    c = api_cluster
    tag = uuid.uuid4().hex[:8]
    doc = {"name": f"ui_download_{tag}", "project": "ui-e2e",
           "tasks": [{"name": "many", "type": "SHELL", "params": {"rawScript": "seq 1 1000000"}}]}  # fmt: skip
    instance = _start(c, doc, finished=True)
    (task,) = c.client().get(f"/api/v1/instances/{instance}")["tasks"]
    assert task["state"] == "SUCCESS"
    user, password = f"ui_dl_{tag}", uuid.uuid4().hex
    c.client().post("/api/v1/users", {"name": user, "password": password, "admin": True})
    saved = tmp_path / "saved.log"
    env = {**os.environ, **tls.browser_env(), "PORPOISE_URL": c.url, "E2E_USER": user, "E2E_PASSWORD": password,
           "E2E_TASK": str(task["id"]), "E2E_DOWNLOAD_TO": str(saved), "CHROMIUM": chromium}  # fmt: skip
    done = subprocess.run(
        ["node", "tests/e2e/download.mjs"], check=False, cwd=UI, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    whole = c.client().get(f"/api/v1/tasks/{task['id']}/log/download")
    received = saved.read_text()
    assert len(received) == len(whole) and received == whole
    assert "\n1000000\n" in received


def test_alert_groups_and_history_in_headless_chromium(
    api_cluster: ApiCluster,
    threaded_receiver: Receiver,  # noqa: F811 (the fixture imported above)
) -> None:
    """ui/tests/e2e/alerts.mjs: a group with a Slack sender to a loopback receiver created (a bad URL refused at
    the field), edited (the masked webhook kept), tested ("sent"); the Alerts screen shows a failed alert with the
    receiver's answer, filters by status, resends it."""
    chromium = _chromium()
    c, receiver = api_cluster, threaded_receiver
    receiver.answers["/services/E2E/B/ok"] = (200, "ok")
    tag = uuid.uuid4().hex[:8]
    user, password = f"ui_al_{tag}", uuid.uuid4().hex
    c.client().post("/api/v1/users", {"name": user, "password": password, "admin": True})
    failed = '{"delivered": [], "errors": {"slack": "slack refused the message: HTTP 500: {\\"error\\": \\"down\\"}"}}'
    (alert,) = c.query(
        "INSERT INTO alert (title, content, alert_status, alert_type, log, attempts, next_attempt_time)"
        " VALUES ($1, 'c', 2, 0, $2, 3, now()) RETURNING id",
        f"e2e alert {tag}", failed,
    )  # fmt: skip
    env = {**os.environ, **tls.browser_env(), "PORPOISE_URL": c.url, "E2E_USER": user, "E2E_PASSWORD": password,
           "E2E_TAG": tag, "E2E_WEBHOOK": f"{receiver.url}/services/E2E/B/ok", "E2E_ALERT": str(alert["id"]),
           "CHROMIUM": chromium}  # fmt: skip
    done = subprocess.run(
        ["node", "tests/e2e/alerts.mjs"], check=False, cwd=UI, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "alerts: all steps passed" in done.stdout
    # the edit kept the stored webhook: the test alert reached it, with the username added by the edit
    (call,) = [s for s in receiver.seen if s[1] == "/services/E2E/B/ok"]
    assert call[3]["username"] == "porpoise-e2e" and "test alert" in call[3]["text"]


def test_admin_settings_screens_in_headless_chromium(api_cluster: ApiCluster) -> None:
    """ui/tests/e2e/settings.mjs: data sources by type (field error, DSN kept on edit, test connection, grant),
    environments, project parameters (a secret masked and kept), worker groups of the live worker, and a SQL
    task's data source as a dropdown in the editor (a deleted one refused at the field on save)."""
    chromium = _chromium()
    c = api_cluster
    client = c.client()
    tag = uuid.uuid4().hex[:8]
    source, gone = f"e2e_wh_{tag}", f"e2e_gone_{tag}"
    for name in (source, gone):
        client.request("PUT", f"/api/v1/datasources/{name}", {"params": {"dsn": c.dsn}})
    doc = {"name": f"ui_sql_{tag}", "project": "ui-e2e",
           "tasks": [{"name": "q", "type": "SQL", "params": {"datasource": gone, "sql": "select 1"}}]}  # fmt: skip
    code = client.post("/api/v1/workflows", doc)["code"]
    client.request("DELETE", f"/api/v1/datasources/{gone}")
    user, password = f"ui_set_{tag}", uuid.uuid4().hex
    client.post("/api/v1/users", {"name": user, "password": password, "admin": True})
    env = {**os.environ, **tls.browser_env(), "PORPOISE_URL": c.url, "E2E_USER": user, "E2E_PASSWORD": password,
           "E2E_TAG": tag, "E2E_DSN": c.dsn, "E2E_WORKER": c.worker.address, "E2E_WORKFLOW": str(code),
           "E2E_SOURCE": source, "E2E_GONE": gone, "CHROMIUM": chromium}  # fmt: skip
    done = subprocess.run(
        ["node", "tests/e2e/settings.mjs"], check=False, cwd=UI, env=env, capture_output=True, text=True, timeout=400
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "settings: all steps passed" in done.stdout
    # what the browser saved, as the API has it
    saved = client.get(f"/api/v1/workflows/{code}")
    assert saved["version"] == 2 and saved["document"]["tasks"][0]["params"]["datasource"] == source
    (made,) = [d for d in client.get("/api/v1/datasources", size=500)["items"] if d["name"] == f"e2e_pg_{tag}"]
    assert made["params"]["dsn"] == "***" and made["note"] == "the test cluster's database"
    params = client.get("/api/v1/projects/ui-e2e/parameters", size=500)["items"]
    assert {"name": f"e2e_secret_{tag}", "value": "***", "secret": True} in [
        {k: p[k] for k in ("name", "value", "secret")} for p in params
    ]
    (environment,) = [e for e in client.get("/api/v1/environments", size=500)["items"] if e["name"] == f"e2e_env_{tag}"]
    assert environment["worker_groups"] == ["default"] and environment["projects"] == ["ui-e2e"]
    assert f"e2e_wg_{tag}" not in {g["name"] for g in client.get("/api/v1/worker-groups", size=500)["items"]}


def _upload(c: ApiCluster, project: str, path: str, data: bytes) -> dict[str, object]:
    """A file stored in ``project``'s resource center through the API (the raw body)."""
    query = urllib.parse.urlencode({"path": path})
    request = urllib.request.Request(
        f"{c.url}/api/v1/projects/{project}/resources?{query}", data=data, method="POST",
        headers={"Authorization": f"Bearer {c.token}", "Content-Type": "application/octet-stream"},
    )  # fmt: skip
    context = tls.trusting(c.ca_file) if c.url.startswith("https://") else None
    with urllib.request.urlopen(request, timeout=30, context=context) as answer:
        return dict(json.load(answer))


def test_resources_screen_in_headless_chromium(api_cluster: ApiCluster) -> None:
    """ui/tests/e2e/resources.mjs: a bad path refused at the field; upload with progress into a new folder, a
    second version, restore, download byte for byte; a used file's workflow shown and its delete refused with
    the reason; an unused one deleted."""
    chromium = _chromium()
    c = api_cluster
    client = c.client()
    tag = uuid.uuid4().hex[:8]
    shell = {"name": "a", "type": "SHELL", "params": {"rawScript": "true"}}
    client.post("/api/v1/workflows", {"name": f"ui_res_project_{tag}", "project": "ui-e2e", "tasks": [shell]})
    used = f"shared_{tag}/used.sh"
    _upload(c, "ui-e2e", used, b"echo used\n")
    workflow = f"ui_res_user_{tag}"
    uses = {"name": "run", "type": "SHELL", "params": {"rawScript": "true", "resourceList": [{"resourceName": used}]}}
    client.post("/api/v1/workflows", {"name": workflow, "project": "ui-e2e", "tasks": [uses]})
    user, password = f"ui_res_{tag}", uuid.uuid4().hex
    client.post("/api/v1/users", {"name": user, "password": password, "admin": True})
    env = {**os.environ, **tls.browser_env(), "PORPOISE_URL": c.url, "E2E_USER": user, "E2E_PASSWORD": password,
           "E2E_TAG": tag, "E2E_USED": used, "E2E_USER_WORKFLOW": workflow, "CHROMIUM": chromium}  # fmt: skip
    done = subprocess.run(
        ["node", "tests/e2e/resources.mjs"], check=False, cwd=UI, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "resources: all steps passed" in done.stdout
    # the used file is still there; the browser's file is gone with its versions
    versions = client.request("GET", "/api/v1/projects/ui-e2e/resources/versions", query={"path": used})["versions"]
    assert [v["version"] for v in versions] == [1]
    assert f"e2e_{tag}" not in {f["name"] for f in client.get("/api/v1/projects/ui-e2e/resources")["folders"]}


def _node(script: str, env: dict[str, str], timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["node", f"tests/e2e/{script}"], check=False, cwd=UI, env=env, capture_output=True, text=True, timeout=timeout
    )


def _seed_read_only_day(c: ApiCluster, tmp_path: Path, tag: str) -> dict[str, str]:
    """What perm.mjs looks at, made through the API as the admin (a Spark application's id and a lost log
    written into the task rows, as a SPARK task's worker and a cleaned-up worker would leave them)."""
    from tests.test_instance_view import _sh, _switch_doc

    project = f"ux-{tag}"
    client = c.client()
    switch = _switch_doc(f"ui_switch_{tag}")
    switch["project"] = project
    switch_instance = _start(c, switch, finished=True)
    mark = tmp_path / "retried-once"
    retried_doc = {"name": f"ui_retried_{tag}", "project": project, "tasks": [
        {"name": "flaky", "type": "SHELL", "retries": 1, "retry_interval": 0,
         "params": {"rawScript": f"test -f {mark} && echo second try || {{ touch {mark}; "
                                 "echo failing on purpose; exit 1; }"}}]}  # fmt: skip
    retried = _start(c, retried_doc, finished=True)
    attempts = client.get(f"/api/v1/instances/{retried}", all_attempts=True)["tasks"]
    assert [a["state"] for a in sorted(attempts, key=lambda a: a["attempt"])] == ["FAILURE", "SUCCESS"], attempts
    first, last = sorted(attempts, key=lambda a: a["attempt"])
    backfill_doc = {"name": f"ui_backfill_{tag}", "project": project, "tasks": [_sh("a")]}
    backfill_code = client.request("POST", "/api/v1/workflows", backfill_doc, query={"release": True})["code"]
    (command,) = client.post(f"/api/v1/workflows/{backfill_code}/backfill", {"dates": ["2026-03-01T00:00:00Z"]})[
        "command_ids"
    ]
    backfill = wait_claimed_final(c, command)
    tasks = {t["name"]: t["id"] for t in client.get(f"/api/v1/instances/{switch_instance}")["tasks"]}
    app_id, app_link = "application_1767225600000_0042", "http://spark-history.example:18080/history/app/"
    c.query("UPDATE task_instance SET app_id = $2, app_link = $3 WHERE id = $1", tasks["left"], app_id, app_link)
    c.query("UPDATE task_instance SET log_path = NULL WHERE id = $1", tasks["a"])
    # nor an archived copy (the API's archiver may have copied it already: then the page would show that)
    c.query("DELETE FROM task_log_archive WHERE task_instance_id = $1", tasks["a"])
    user, password = f"reader_{tag}", uuid.uuid4().hex
    client.post("/api/v1/users", {"name": user, "password": password})
    client.put(f"/api/v1/projects/{project}/grants/{user}", {"perms": ["READ"]})
    workflow = client.get(f"/api/v1/instances/{switch_instance}")["workflow_code"]
    return {"E2E_USER": user, "E2E_PASSWORD": password, "E2E_PROJECT": project, "E2E_WORKFLOW": str(workflow),
            "E2E_SWITCH_INSTANCE": str(switch_instance), "E2E_BACKFILL_INSTANCE": str(backfill),
            "E2E_BACKFILL_WORKFLOW": str(backfill_code), "E2E_RETRIED_TASK": str(last["id"]),
            "E2E_FIRST_ATTEMPT": str(first["id"]), "E2E_NO_LOG_TASK": str(tasks["a"]),
            "E2E_APP_TASK": str(tasks["left"]), "E2E_APP_ID": app_id, "E2E_APP_LINK": app_link}  # fmt: skip


def wait_claimed_final(c: ApiCluster, command: int) -> int:
    from tests.test_api import claimed, wait_final

    instance = claimed(c, command)
    wait_final(c, instance)
    return instance


def test_a_read_only_user_in_headless_chromium(api_cluster: ApiCluster, tmp_path: Path) -> None:
    """ui/tests/e2e/perm.mjs (issue 28 items 2, 3, 5, 7): a user granted READ sees who is signed in, no Admin tab,
    actions disabled with the right they need; the instance page counts 7 tasks (not 8 relation rows), shows the
    SWITCH branch not taken as skipped, the run type and business date tell a backfill run apart, every attempt's
    log is reachable, a Spark application links to its UI, a lost log says so once; the user changes their own
    password and signs in with it."""
    chromium = _chromium()
    c = api_cluster
    seeded = _seed_read_only_day(c, tmp_path, uuid.uuid4().hex[:8])
    env = {**os.environ, **tls.browser_env(), "PORPOISE_URL": c.url, "CHROMIUM": chromium, **seeded}
    done = _node("perm.mjs", env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "perm: all steps passed" in done.stdout


def test_first_sign_in_to_a_standalone_in_headless_chromium(workdir: Path) -> None:
    """ui/tests/e2e/signin.mjs (issue 28 item 1): a fresh standalone prints admin's first password in its
    banner; the sign-in page says where it is; that password signs admin in."""
    from tests.test_launchers import banner_password, start_standalone_banner, stop_standalone

    assert (UI / "dist" / "index.html").is_file(), "the UI is not built: run `make install`"
    chromium = _chromium()
    proc, banner = start_standalone_banner(workdir / f"standalone-ui-{uuid.uuid4().hex[:6]}")
    try:
        api_url = next(line.split()[2] for line in banner.splitlines() if line.strip().startswith("Web UI"))
        env = {**os.environ, "PORPOISE_URL": api_url.rstrip("/"), "E2E_PASSWORD": banner_password(banner),
               "CHROMIUM": chromium}  # fmt: skip
        done = _node("signin.mjs", env)
    finally:
        assert stop_standalone(proc) == 0
    assert done.returncode == 0, done.stdout + done.stderr
    assert "signin: all steps passed" in done.stdout


def test_start_dialog_in_headless_chromium(api_cluster: ApiCluster) -> None:
    """ui/tests/e2e/start.mjs (issue 28 items 7, 8): /workflows/abc and an unknown code say so; the start dialog is
    modal (focus in, Escape closes, focus back), pre-fills the global parameters, refuses an undeclared one at its
    row; the run it starts has the changed parameter, the failure strategy, dry run and only the picked task. The
    editor creates a mistyped project only once confirmed, and a fixed refusal leaves the screen."""
    from tests.test_api import wait_final

    assert (UI / "dist" / "index.html").is_file(), "the UI is not built: run `make install`"
    chromium = _chromium()
    c = api_cluster
    client = c.client()
    tag = uuid.uuid4().hex[:8]
    echo = {"type": "SHELL", "params": {"rawScript": "echo ${region}"}}
    doc = {"name": f"ui_start_{tag}", "project": "ui-e2e", "params": {"dt": "$[yyyyMMdd]", "region": "eu"},
           "tasks": [{"name": "extract", **echo}, {"name": "load", **echo, "upstream": ["extract"]}]}  # fmt: skip
    code = client.request("POST", "/api/v1/workflows", doc, query={"release": True})["code"]
    user, password = f"ui_start_{tag}", uuid.uuid4().hex
    client.post("/api/v1/users", {"name": user, "password": password, "admin": True})
    typo = f"ui-e2e-typo-{tag}"
    env = {**os.environ, **tls.browser_env(), "PORPOISE_URL": c.url, "E2E_USER": user, "E2E_PASSWORD": password,
           "E2E_WORKFLOW": str(code), "E2E_TAG": tag, "E2E_TYPO_PROJECT": typo, "CHROMIUM": chromium}  # fmt: skip
    done = _node("start.mjs", env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "start: all steps passed" in done.stdout
    (instance_id,) = [int(line.split()[1]) for line in done.stdout.splitlines() if line.startswith("INSTANCE ")]
    run = wait_final(c, instance_id)
    assert run["state"] == "SUCCESS" and run["dry_run"] and run["failure_strategy"] == "CONTINUE"
    assert {p["prop"]: p["value"] for p in run["global_params"]}["region"] == "us"
    assert [t["name"] for t in run["tasks"]] == ["load"]
    # the editor asked before creating the mistyped project, and saved into the existing one
    assert typo not in {p["name"] for p in client.get("/api/v1/projects", size=500)["items"]}
    saved = client.get("/api/v1/workflows", search=f"ui_start_new_{tag}")["items"]
    assert [(w["project"], w["version"]) for w in saved] == [("ui-e2e", 1)]
