"""Project parameters end to end on real processes (api_cluster: master, worker, API over PostgreSQL and etcd):
set through the API, CLI and SDK; a task sees them below the workflow's globals and start parameters; a secret
one is sealed at rest, shown as *** in every API answer and in the task log, and reaches the task as its value."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.infra.etcd import EtcdServer
from engine.infra.postgres import PostgresServer
from porpoise.client import Client
from tests.conftest import ApiCluster, launch_api_cluster
from tests.helpers import wait_sync
from tests.test_api import error_of, shell_doc, start, wait_final
from tests.test_cli import porpoise
from tests.test_cli_users import porpoise as porpoise_with_stdin
from tests.test_users_e2e import make_user

pytestmark = pytest.mark.slow

SECRET = "s3cr3t-" + uuid.uuid4().hex


def _name(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def _log(c: ApiCluster, detail: dict, task: str = "a") -> list[str]:
    tid = next(t["id"] for t in detail["tasks"] if t["name"] == task)
    return [line.rstrip("\n") for line in c.client().get(f"/api/v1/tasks/{tid}/log")["lines"]]


def test_project_parameters_reach_tasks_below_globals_and_secrets_stay_masked(api_cluster: ApiCluster) -> None:
    c = api_cluster
    admin = c.client()
    project = _name("pp-")
    admin.post("/api/v1/projects", {"name": project})
    base = f"/api/v1/projects/{project}/parameters"
    admin.put(f"{base}/greeting", {"value": "hello-project"})
    admin.put(f"{base}/shared", {"value": "from-project"})
    put = admin.put(f"{base}/token", {"value": SECRET, "secret": True})
    assert put == {**put, "name": "token", "value": "***", "secret": True}
    listed = {p["name"]: p for p in admin.get(base)["items"]}
    assert listed["greeting"]["value"] == "hello-project" and not listed["greeting"]["secret"]
    assert listed["token"]["value"] == "***" and listed["token"]["secret"]
    # sealed at rest
    (row,) = c.query("SELECT param_value FROM project_parameter WHERE param_name = 'token'")
    assert row["param_value"].startswith("pps1:") and SECRET not in row["param_value"]
    # "***" back keeps the stored secret; changing the plain one leaves it secret
    admin.put(f"{base}/token", {"value": "***"})

    doc = shell_doc(_name("wf"), project)
    doc["tasks"][0]["params"]["rawScript"] = (
        'echo "g=${greeting} s=${shared} t=${token}"\nprintf %s "${token}" | sha256sum'
    )
    doc["params"] = {"shared": "from-global"}
    code = admin.post("/api/v1/workflows", doc, release=True)["code"]
    detail = wait_final(c, start(c, code))
    assert detail["state"] == "SUCCESS", detail
    lines = _log(c, detail)
    assert "g=hello-project s=from-global t=***" in lines, lines
    assert f"{hashlib.sha256(SECRET.encode()).hexdigest()}  -" in lines, lines  # the value itself reached it
    assert not any(SECRET in line for line in lines)
    # a start parameter (it sets the declared global) wins over both
    detail = wait_final(c, start(c, code, {"params": {"shared": "from-start"}}))
    assert "g=hello-project s=from-start t=***" in _log(c, detail)
    # deleted: a later run no longer has it (an unknown ${name} is left to the shell, which makes it empty)
    admin.delete(f"{base}/greeting")
    detail = wait_final(c, start(c, code))
    assert "g= s=from-global t=***" in _log(c, detail)
    # a SWITCH sees the project's (non-secret) parameters too
    routed = {
        "name": _name("sw"),
        "project": project,
        "tasks": [
            {"name": "route", "type": "SWITCH",
             "params": {"cases": [{"condition": "'${shared}' == 'from-project'", "next": "yes"}], "default": "no"}},
            {"name": "yes", "type": "SHELL", "params": {"rawScript": "true"}, "upstream": ["route"]},
            {"name": "no", "type": "SHELL", "params": {"rawScript": "true"}, "upstream": ["route"]},
        ],
    }  # fmt: skip
    ran = wait_final(c, start(c, admin.post("/api/v1/workflows", routed, release=True)["code"]))
    assert sorted(t["name"] for t in ran["tasks"] if t["state"] == "SUCCESS") == ["route", "yes"], ran
    # no API answer holds the secret
    for path in (base, f"/api/v1/workflows/{code}", f"/api/v1/instances/{detail['id']}"):
        assert SECRET not in json.dumps(admin.get(path)), path

    # refused with the field named
    bad = error_of(lambda: admin.put(f"{base}/system.biz.date", {"value": "x"}))
    assert bad.status == 400 and bad.field == "path.param"
    bad = error_of(lambda: admin.put(f"{base}/fresh", {"value": "***", "secret": True}))
    assert bad.status == 400 and bad.field == "value"
    assert error_of(lambda: admin.delete(f"{base}/never")).status == 404
    assert error_of(lambda: admin.get("/api/v1/projects/no-such-project/parameters")).status == 404

    # readers list, writers change, strangers see nothing
    reader, stranger = _name("ppr"), _name("pps")
    as_reader, as_stranger = make_user(c, reader), make_user(c, stranger)
    admin.put(f"/api/v1/projects/{project}/grants/{reader}", {"perms": ["READ"]})
    assert {p["name"]: p["value"] for p in as_reader.get(base)["items"]}["token"] == "***"
    assert error_of(lambda: as_reader.put(f"{base}/shared", {"value": "x"})).status == 403
    assert error_of(lambda: as_stranger.get(base)).status == 404
    # in the audit log, as every change
    entries = admin.get("/api/v1/audit", resource_type="project-parameters", size=100)["items"]
    assert {(e["action"], e["resource"]) for e in entries} >= {
        ("update", f"{project}/token"),
        ("delete", f"{project}/greeting"),
    }


def test_the_project_param_cli_and_sdk(api_cluster: ApiCluster) -> None:
    c = api_cluster
    project = _name("ppcli-")
    c.client().post("/api/v1/projects", {"name": project})
    for args, out in (
        (("set", project, "home", "/opt/x"), f"set project parameter home of project {project}"),
        (("list", project), "/opt/x"),
        (("delete", project, "home"), f"deleted project parameter home of project {project}"),
    ):
        run = porpoise(c, "project-param", *args)
        assert run.returncode == 0 and out in run.stdout, run.stdout + run.stderr
    # a secret from standard input, never the command line
    run = porpoise_with_stdin(c, "project-param", "set", project, "pw", "--secret", stdin=SECRET + "\n")
    assert run.returncode == 0, run.stderr
    run = porpoise(c, "project-param", "list", project, "--json")
    assert json.loads(run.stdout) == [{**json.loads(run.stdout)[0], "name": "pw", "value": "***", "secret": True}]
    run = porpoise(c, "project-param", "delete", project, "home")
    assert run.returncode != 0 and "does not exist" in run.stderr and "Traceback" not in run.stderr

    sdk = Client(api=c.client())
    sdk.set_project_param(project, "region", "eu")
    assert sdk.project_params(project) == {"pw": "***", "region": "eu"}
    sdk.set_project_param(project, "pw", "***")  # keeps the secret
    assert sdk.project_params(project)["pw"] == "***"
    sdk.delete_project_param(project, "region")
    assert sdk.project_params(project) == {"pw": "***"}


@pytest.fixture
def fresh_context_cluster(tmp_path: Path, pg_server: PostgresServer, etcd_server: EtcdServer) -> Iterator[ApiCluster]:
    """A cluster whose master reads a run's project parameters again at every dispatch (run_context_ttl 0)."""
    with launch_api_cluster(tmp_path, pg_server, etcd_server.endpoint, PORPOISE_MASTER_RUN_CONTEXT_TTL="0") as c:
        yield c


def test_a_run_under_way_sees_a_changed_parameter_once_its_context_is_old(fresh_context_cluster: ApiCluster,
                                                                           tmp_path: Path) -> None:  # fmt: skip
    # what a run read is used for master.run_context_ttl seconds; after that a dispatch reads again, so a
    # long run sees an edit (and a secret re-sealed by rotate-key) instead of holding it to its end
    c = fresh_context_cluster
    admin = c.client()
    project = _name("ttl-")
    admin.post("/api/v1/projects", {"name": project})
    base = f"/api/v1/projects/{project}/parameters"
    admin.put(f"{base}/colour", {"value": "red"})
    gate = tmp_path / "gate"
    tmp_path.chmod(0o777)  # the tenant's task waits for the file
    waits = f"echo first=${{colour}}\nwhile [ ! -e {gate} ]; do sleep 0.1; done"
    doc = {"name": _name("wf"), "project": project, "tasks": [
        {"name": "first", "type": "SHELL", "params": {"rawScript": waits}},
        {"name": "second", "type": "SHELL", "upstream": ["first"], "params": {"rawScript": "echo second=${colour}"}},
    ]}  # fmt: skip
    code = admin.post("/api/v1/workflows", doc, release=True)["code"]
    instance = start(c, code)

    def first_running() -> bool:
        tasks = admin.get(f"/api/v1/instances/{instance}")["tasks"]
        return any(t["name"] == "first" and t["state"] == "RUNNING_EXECUTION" for t in tasks)

    wait_sync(first_running, 60, what="the first task running")
    admin.put(f"{base}/colour", {"value": "blue"})
    gate.touch()
    detail = wait_final(c, instance)
    assert detail["state"] == "SUCCESS", detail
    assert "first=red" in _log(c, detail, "first") and "second=blue" in _log(c, detail, "second")
