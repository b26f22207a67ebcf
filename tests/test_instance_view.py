"""What the web UI shows of runs and rights, end to end on a real cluster (the api_cluster fixture): the instance
detail counts tasks (not relation rows), lists the tasks a SWITCH branch skipped, and says how each run came to
be (run type) and for which business date; GET /api/v1/me carries the caller's rights per project (issue 28)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.conftest import ApiCluster
from tests.test_api import claimed, start, wait_final
from tests.test_users_e2e import make_user

pytestmark = pytest.mark.slow

PROJECT = "ui-view"


def _sh(name: str, *upstream: str) -> dict[str, Any]:
    return {"name": name, "type": "SHELL", "params": {"rawScript": "true"}, "upstream": list(upstream)}


def _switch_doc(name: str) -> dict[str, Any]:
    """a -> route (SWITCH: always left) -> left -> below_left -> join; route -> right -> below_right -> join:
    7 tasks with 8 relation rows (join has two upstream tasks)."""
    route = {"name": "route", "type": "SWITCH", "upstream": ["a"],
             "params": {"cases": [{"condition": "1 == 1", "next": "left"}], "default": "right"}}  # fmt: skip
    tasks = [_sh("a"), route, _sh("left", "route"), _sh("right", "route"), _sh("below_left", "left"),
             _sh("below_right", "right"), _sh("join", "below_left", "below_right")]  # fmt: skip
    return {"name": name, "project": PROJECT, "tasks": tasks}


def test_instance_detail_counts_tasks_and_lists_skipped_branches(api_cluster: ApiCluster) -> None:
    c = api_cluster
    code = c.client().post("/api/v1/workflows", _switch_doc(f"view_{uuid.uuid4().hex[:8]}"), release=True)["code"]
    detail = wait_final(c, start(c, code))
    assert detail["state"] == "SUCCESS"
    assert detail["tasks_total"] == 7  # the tasks, not the 8 relation rows (join's two)
    by_name = {t["name"]: t for t in detail["tasks"]}
    assert sorted(by_name) == ["a", "below_left", "below_right", "join", "left", "right", "route"]
    assert {n for n, t in by_name.items() if t["state"] == "SKIPPED"} == {"right", "below_right"}
    skipped = by_name["right"]
    assert skipped["id"] is None and skipped["finished"] and skipped["current"] and skipped["type"] == "SHELL"
    assert by_name["join"]["state"] == "SUCCESS"
    # the run says how it came to be; a manual start has no business date
    assert detail["run_type"] == "manual" and detail["schedule_time"] is None
    listed = c.client().get("/api/v1/instances", workflow=code)["items"]
    assert [(i["id"], i["run_type"]) for i in listed] == [(detail["id"], "manual")]


def test_backfill_runs_carry_their_business_date_and_run_type(api_cluster: ApiCluster) -> None:
    c = api_cluster
    doc = {"name": f"view_bf_{uuid.uuid4().hex[:8]}", "project": PROJECT, "tasks": [_sh("a")]}
    code = c.client().post("/api/v1/workflows", doc, release=True)["code"]
    answer = c.client().post(f"/api/v1/workflows/{code}/backfill", {"dates": ["2026-03-01T00:00:00Z"]})
    (command,) = answer["command_ids"]
    detail = wait_final(c, claimed(c, command))
    assert detail["run_type"] == "backfill"
    assert detail["schedule_time"].startswith("2026-03-01T00:00:00")
    (listed,) = c.client().get("/api/v1/instances", workflow=code)["items"]
    assert listed["run_type"] == "backfill" and listed["schedule_time"] == detail["schedule_time"]
    rerun = c.client().post(f"/api/v1/instances/{detail['id']}/rerun")
    assert rerun["accepted"]
    again = wait_final(c, claimed(c, rerun["command_id"]))
    assert again["id"] == detail["id"] and again["run_type"] == "rerun"


def test_me_carries_the_callers_rights_per_project(api_cluster: ApiCluster) -> None:
    c = api_cluster
    tag = uuid.uuid4().hex[:8]
    owner_name, reader_name = f"own_{tag}", f"read_{tag}"
    owner, reader = make_user(c, owner_name), make_user(c, reader_name)
    mine, theirs, hidden = f"mine-{tag}", f"theirs-{tag}", f"hidden-{tag}"
    owner.post("/api/v1/projects", {"name": theirs})
    owner.post("/api/v1/projects", {"name": hidden})
    reader.post("/api/v1/projects", {"name": mine})
    owner.put(f"/api/v1/projects/{theirs}/grants/{reader_name}", {"perms": ["READ"]})

    me = reader.get("/api/v1/me")
    assert me["name"] == reader_name and me["admin"] is False
    rights = {p["name"]: p["perms"] for p in me["projects"]}
    assert rights == {mine: ["EXECUTE", "READ", "WRITE"], theirs: ["READ"]}  # hidden: not there at all
    owner.put(f"/api/v1/projects/{theirs}/grants/{reader_name}", {"perms": ["EXECUTE"]})
    rights = {p["name"]: p["perms"] for p in reader.get("/api/v1/me")["projects"]}
    assert rights[theirs] == ["EXECUTE", "READ"]

    # a token of reduced rights: the rights this call may use
    token = reader.post("/api/v1/tokens", {"name": "ro", "perms": ["READ"], "expires_in_days": 1})["token"]
    capped = c.client(token).get("/api/v1/me")
    assert {p["name"]: p["perms"] for p in capped["projects"]} == {mine: ["READ"], theirs: ["READ"]}
    assert capped["token_perms"] == ["READ"]

    # an admin: admin, every project with every right
    admin = c.client().get("/api/v1/me")
    assert admin["admin"] is True
    rights = {p["name"]: p["perms"] for p in admin["projects"]}
    assert rights[hidden] == ["EXECUTE", "READ", "WRITE"] and rights[mine] == ["EXECUTE", "READ", "WRITE"]
