"""Tenants end to end on real processes (api_cluster: master, worker, API over PostgreSQL and etcd): admins
create them and grant them to projects (API and CLI); a workflow may name only a tenant granted to its project,
checked when it is saved and again when it is started; its tasks then run as that OS user."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.conftest import ApiCluster
from tests.test_api import claimed, error_of, shell_doc, wait_final
from tests.test_cli import porpoise
from tests.test_users_e2e import make_user

pytestmark = pytest.mark.slow


def _name(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def test_a_workflow_may_use_only_a_tenant_granted_to_its_project(api_cluster: ApiCluster) -> None:
    c = api_cluster
    admin = c.client()
    alice = _name("alice")
    as_alice = make_user(c, alice)
    project, other = _name("pt-"), _name("pt-other-")
    as_alice.post("/api/v1/projects", {"name": project})
    admin.post("/api/v1/projects", {"name": other})
    # "nobody" is an OS user on every Linux worker; the tenant list is the admin's
    tenant = "nobody"
    if tenant not in [t["name"] for t in admin.get("/api/v1/tenants", size=500)["items"]]:
        admin.post("/api/v1/tenants", {"name": tenant, "description": "unprivileged"})
    assert error_of(lambda: as_alice.post("/api/v1/tenants", {"name": _name("t")})).status == 403
    bad = error_of(lambda: admin.post("/api/v1/tenants", {"name": "Bad Name"}))
    assert bad.status == 400 and bad.field == "name"
    assert error_of(lambda: admin.post("/api/v1/tenants", {"name": "default"})).status == 400
    assert error_of(lambda: admin.post("/api/v1/tenants", {"name": tenant})).status == 409

    wf = _name("wf")
    doc = shell_doc(wf, project, tenant=tenant)
    doc["tasks"][0]["params"]["rawScript"] = "id -un"
    # not granted to the project: refused for its owner and for an admin alike, naming the field
    for who in (as_alice, admin):
        err = error_of(lambda w=who: w.post("/api/v1/workflows", doc, release=True))
        assert err.status == 403 and err.field == "tenant" and tenant in str(err), err
    # a general user does not see tenants not granted to their projects
    assert tenant not in [t["name"] for t in as_alice.get("/api/v1/tenants")["items"]]
    # tenants go to projects, not users
    to_user = {"resource_type": "tenant", "resource": tenant, "user": alice}
    assert error_of(lambda: admin.post("/api/v1/grants", to_user)).field == "user"
    grant = admin.post("/api/v1/grants", {"resource_type": "tenant", "resource": tenant, "project": other})
    assert error_of(lambda: as_alice.post("/api/v1/workflows", doc, release=True)).field == "tenant"
    admin.delete(f"/api/v1/grants/{grant['id']}")

    grant = admin.post("/api/v1/grants", {"resource_type": "tenant", "resource": tenant, "project": project})
    assert grant["resource"] == tenant and grant["project"] == project
    assert project in next(t for t in as_alice.get("/api/v1/tenants")["items"] if t["name"] == tenant)["projects"]
    code = as_alice.post("/api/v1/workflows", doc, release=True)["code"]
    instance = claimed(c, as_alice.post(f"/api/v1/workflows/{code}/start", {})["command_id"])
    detail = wait_final(c, instance)
    assert detail["state"] == "SUCCESS", detail
    task = next(t["id"] for t in detail["tasks"] if t["name"] == "a")
    assert "nobody" in [line.strip() for line in as_alice.get(f"/api/v1/tasks/{task}/log")["lines"]]

    # in use: the tenant cannot be deleted
    in_use = error_of(lambda: admin.delete(f"/api/v1/tenants/{tenant}"))
    assert in_use.status == 409 and wf in str(in_use)
    # the grant revoked: the saved workflow may no longer start (nor backfill)
    admin.delete(f"/api/v1/grants/{grant['id']}")
    err = error_of(lambda: as_alice.post(f"/api/v1/workflows/{code}/start", {}))
    assert err.status == 403 and err.field == "tenant"
    err = error_of(lambda: as_alice.post(f"/api/v1/workflows/{code}/backfill", {"dates": ["2026-01-01T00:00:00"]}))
    assert err.status == 403 and err.field == "tenant"
    schedule = {"workflow_code": code, "crontab": "0 0 * * *", "online": True}
    err = error_of(lambda: as_alice.post("/api/v1/schedules", schedule))
    assert err.status == 403 and err.field == "tenant"
    # the default tenant needs no grant
    plain = as_alice.post("/api/v1/workflows", shell_doc(_name("wf"), project), release=True)
    assert plain["created"]


def test_the_tenant_cli(api_cluster: ApiCluster) -> None:
    c = api_cluster
    tenant, project = _name("t_"), _name("pcli-")
    c.client().post("/api/v1/projects", {"name": project})
    for args, out in (
        (("create", tenant, "--description", "etl jobs"), f"created tenant {tenant}"),
        (("grant", tenant, "--project", project), f"granted tenant {tenant} to project {project}"),
        (("list",), tenant),
        (("revoke", tenant, "--project", project), f"revoked tenant {tenant} from project {project}"),
        (("delete", tenant), f"deleted tenant {tenant}"),
    ):
        run = porpoise(c, "tenant", *args)
        assert run.returncode == 0 and out in run.stdout, run.stdout + run.stderr
    run = porpoise(c, "tenant", "list", "--json")
    assert tenant not in [t["name"] for t in json.loads(run.stdout)]
    run = porpoise(c, "tenant", "delete", tenant)
    assert run.returncode != 0 and "does not exist" in run.stderr and "Traceback" not in run.stderr
