"""Environments end to end on real processes (api_cluster: master, worker, API over PostgreSQL and etcd):
admins create, edit, grant and delete them (API, CLI, SDK); a workflow or a task names one, checked when
saved; a SHELL task's script runs the environment's exports first."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from porpoise import Shell, Workflow
from porpoise.client import Client
from tests.conftest import ApiCluster
from tests.test_api import error_of, shell_doc, start, wait_final
from tests.test_cli import porpoise
from tests.test_users_e2e import make_user

pytestmark = pytest.mark.slow


def _name(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def _lines(c: ApiCluster, detail: dict, task: str = "a") -> list[str]:
    tid = next(t["id"] for t in detail["tasks"] if t["name"] == task)
    return [line.rstrip("\n") for line in c.client().get(f"/api/v1/tasks/{tid}/log")["lines"]]


def test_a_task_runs_its_environments_exports_granted_and_checked_at_save(api_cluster: ApiCluster) -> None:
    c = api_cluster
    admin = c.client()
    env, probe = _name("spark3_"), _name("probe-")
    config = f"export SPARK_HOME=/opt/{probe}\nexport ENV_PROBE={probe}\n"
    made = admin.post("/api/v1/environments", {"name": env, "config": config, "worker_groups": ["default"]})
    assert made == {**made, "name": env, "config": config, "worker_groups": ["default"], "projects": []}
    assert error_of(lambda: admin.post("/api/v1/environments", {"name": env, "config": "x"})).status == 409
    bad = error_of(lambda: admin.post("/api/v1/environments", {"name": "bad name", "config": "x"}))
    assert bad.status == 400 and bad.field == "name"

    alice = _name("alice")
    as_alice = make_user(c, alice)
    project = _name("penv-")
    as_alice.post("/api/v1/projects", {"name": project})
    assert error_of(lambda: as_alice.post("/api/v1/environments", {"name": _name("e"), "config": "x"})).status == 403
    assert env not in [e["name"] for e in as_alice.get("/api/v1/environments")["items"]]
    assert error_of(lambda: as_alice.get(f"/api/v1/environments/{env}")).status == 404

    doc = shell_doc(_name("wf"), project)
    doc["tasks"][0]["params"]["rawScript"] = 'echo "probe=$ENV_PROBE home=$SPARK_HOME"'
    doc["tasks"][0]["environment"] = env
    # not granted, and unknown: the same 400 at the field
    err = error_of(lambda: as_alice.post("/api/v1/workflows", doc, release=True))
    assert err.status == 400 and err.field == "tasks[0].environment" and env in str(err), err
    unknown = {**doc, "environment": "no_such_env", "tasks": [dict(doc["tasks"][0], environment=env), doc["tasks"][1]]}
    admin.post("/api/v1/grants", {"resource_type": "environment", "resource": env, "project": project})
    err = error_of(lambda: as_alice.post("/api/v1/workflows", unknown, release=True))
    assert err.status == 400 and err.field == "environment", err

    code = as_alice.post("/api/v1/workflows", doc, release=True)["code"]
    stored = as_alice.get(f"/api/v1/workflows/{code}")["document"]
    assert stored["tasks"][0]["environment"] == env and "environment" not in stored["tasks"][1]
    detail = wait_final(c, start(c, code))
    assert detail["state"] == "SUCCESS", detail
    assert f"probe={probe} home=/opt/{probe}" in _lines(c, detail)
    # task b names none: nothing exported
    assert "probe=" not in " ".join(_lines(c, detail, "b"))
    assert [e["projects"] for e in as_alice.get("/api/v1/environments")["items"] if e["name"] == env] == [[project]]

    # an edit reaches the next run, without saving the workflow again
    admin.patch(f"/api/v1/environments/{env}", {"config": "export ENV_PROBE=edited\n"})
    assert "probe=edited home=" in _lines(c, wait_final(c, start(c, code)))

    # a workflow-level environment is every task's that names none
    both = shell_doc(_name("wf"), project, environment=env)
    both["tasks"][1]["params"]["rawScript"] = 'echo "b sees $ENV_PROBE"'
    code2 = as_alice.post("/api/v1/workflows", both, release=True)["code"]
    assert "b sees edited" in _lines(c, wait_final(c, start(c, code2)), "b")

    # in use: refused; audit log has the changes
    in_use = error_of(lambda: admin.delete(f"/api/v1/environments/{env}"))
    assert in_use.status == 409 and project in str(in_use)
    assert error_of(lambda: as_alice.patch(f"/api/v1/environments/{env}", {"config": "x"})).status == 403
    entries = admin.get("/api/v1/audit", resource_type="environments", size=100)["items"]
    assert ("patch", env) in {(e["action"], e["resource"]) for e in entries}


def test_the_environment_cli_and_sdk(api_cluster: ApiCluster, tmp_path: Path) -> None:
    c = api_cluster
    env, project = _name("cli_env_"), _name("pcli-env-")
    c.client().post("/api/v1/projects", {"name": project})
    exports = tmp_path / "env.sh"
    exports.write_text("export JAVA_HOME=/opt/jdk17\n")
    for args, out in (
        (("create", env, "--file", str(exports), "--worker-group", "default"), f"created environment {env}"),
        (("update", env, "--description", "jdk 17"), f"updated environment {env}"),
        (("grant", env, "--project", project), f"granted environment {env} to project {project}"),
        (("list",), env),
        (("revoke", env, "--project", project), f"revoked environment {env} from project {project}"),
        (("delete", env), f"deleted environment {env}"),
    ):
        run = porpoise(c, "environment", *args)
        assert run.returncode == 0 and out in run.stdout, run.stdout + run.stderr
    run = porpoise(c, "environment", "list", "--json")
    assert env not in [e["name"] for e in json.loads(run.stdout)]
    run = porpoise(c, "environment", "delete", env)
    assert run.returncode != 0 and "does not exist" in run.stderr and "Traceback" not in run.stderr
    run = porpoise(c, "environment", "create", env, "--file", str(tmp_path / "missing.sh"))
    assert run.returncode != 0 and "cannot read --file" in run.stderr and "Traceback" not in run.stderr

    sdk = Client(api=c.client())
    made = sdk.create_environment(env, "export ENV_PROBE=from-sdk\n", worker_groups=["default"])
    assert made["name"] == env
    assert sdk.edit_environment(env, description="sdk")["description"] == "sdk"
    sdk.grant_environment(env, project=project)
    with Workflow(_name("sdkwf"), project, environment=env) as wf:
        Shell("a", 'echo "sdk=$ENV_PROBE"')
    assert wf.to_document()["environment"] == env
    wf.apply(sdk)
    run = sdk.start(wf.name, project=project).wait(60)
    assert run.succeeded and "sdk=from-sdk" in run.task("a").log()
    assert [e["name"] for e in sdk.environments() if e["name"] == env] == [env]
