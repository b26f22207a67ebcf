"""Worker groups managed in the cluster, on real processes (api_cluster: master, worker, API over PostgreSQL and
etcd): an admin assigns the running worker to a new group through the API, CLI or SDK, and the master sends
that group's waiting tasks to it without a restart; a task whose group has no live worker says so."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from porpoise.client import Client
from tests.conftest import ApiCluster
from tests.helpers import wait_sync
from tests.test_api import error_of, shell_doc, start, wait_final
from tests.test_cli import porpoise
from tests.test_users_e2e import make_user

pytestmark = pytest.mark.slow


def _name(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def _waiting_task(c: ApiCluster, instance: int, reason: str) -> dict[str, Any]:
    found: dict[str, Any] = {}

    def says_so() -> bool:
        nonlocal found
        tasks = c.client().get(f"/api/v1/instances/{instance}")["tasks"]
        found = next((t for t in tasks if t["name"] == "a"), {})
        return found.get("waiting") == reason

    wait_sync(says_so, 30, what=f"task a waiting: {reason}")
    return found


def test_an_assigned_worker_takes_its_groups_waiting_tasks_without_a_restart(api_cluster: ApiCluster) -> None:
    c = api_cluster
    admin = c.client()
    address = admin.get("/api/v1/cluster")["workers"][0]["address"]
    group = _name("wg_")
    doc = shell_doc(_name("wf"), "wg-tests")
    doc["tasks"] = [{"name": "a", "type": "SHELL", "params": {"rawScript": "echo ran"}, "worker_group": group}]
    code = admin.post("/api/v1/workflows", doc, release=True)["code"]
    instance = start(c, code)
    task = _waiting_task(c, instance, f"no live worker in worker group {group!r}")
    assert task["state"] in ("SUBMITTED_SUCCESS", "DISPATCH") and not task["host"]

    made = admin.post("/api/v1/worker-groups", {"name": group, "addresses": [address], "description": "etl"})
    assert made == {**made, "name": group, "addresses": [address], "live": [address], "managed": True}
    detail = wait_final(c, instance)
    assert detail["state"] == "SUCCESS", detail
    assert [t["host"] for t in detail["tasks"]] == [address] and "waiting" not in detail["tasks"][0]
    listed = {g["name"]: g for g in admin.get("/api/v1/worker-groups")["items"]}
    assert listed[group]["live"] == [address] and address in listed["default"]["live"]
    assert not listed["default"]["managed"]

    # taken out again (masters follow within master.worker_group_refresh_interval)
    assert admin.patch(f"/api/v1/worker-groups/{group}", {"addresses": []})["live"] == []

    # refused with the field named; in use; admins only; audited
    bad = error_of(lambda: admin.post("/api/v1/worker-groups", {"name": _name("wg"), "addresses": ["10.9.9.9:1"]}))
    assert bad.status == 400 and bad.field == "addresses[0]"
    assert error_of(lambda: admin.post("/api/v1/worker-groups", {"name": "default", "addresses": []})).field == "name"
    assert error_of(lambda: admin.post("/api/v1/worker-groups", {"name": group, "addresses": []})).status == 409
    in_use = error_of(lambda: admin.delete(f"/api/v1/worker-groups/{group}"))
    assert in_use.status == 409 and doc["name"] in str(in_use)
    as_user = make_user(c, _name("wgu"))
    assert error_of(lambda: as_user.post("/api/v1/worker-groups", {"name": _name("wg"), "addresses": []})).status == 403
    assert group in [g["name"] for g in as_user.get("/api/v1/worker-groups")["items"]]
    entries = admin.get("/api/v1/audit", resource_type="worker-groups", size=100)["items"]
    assert {("create", None), ("patch", group)} <= {(e["action"], e["resource"]) for e in entries}


def test_the_worker_group_cli_and_sdk(api_cluster: ApiCluster) -> None:
    c = api_cluster
    address = c.client().get("/api/v1/cluster")["workers"][0]["address"]
    group = _name("wgcli_")
    for args, out in (
        (("create", group, "--worker", address), f"created worker group {group}: {address}"),
        (("list",), group),
        (("update", group, "--description", "nightly"), f"updated worker group {group}: {address}"),
        (("delete", group), f"deleted worker group {group}"),
    ):
        run = porpoise(c, "worker-group", *args)
        assert run.returncode == 0 and out in run.stdout, run.stdout + run.stderr
    run = porpoise(c, "worker-group", "list", "--json")
    assert group not in [g["name"] for g in json.loads(run.stdout)]
    run = porpoise(c, "worker-group", "create", group, "--worker", "10.9.9.9:1")
    assert run.returncode != 0 and "not a registered worker" in run.stderr and "Traceback" not in run.stderr

    sdk = Client(api=c.client())
    assert sdk.create_worker_group(group, [address])["live"] == [address]
    assert sdk.set_worker_group(group, [])["addresses"] == []
    assert [g["addresses"] for g in sdk.worker_groups() if g["name"] == group] == [[]]
    assert sdk.delete_worker_group(group) == {"deleted": group}
