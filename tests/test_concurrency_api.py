"""Concurrency controls through the real API process: the workflow document's rules round-trip, task
groups (admin-only changes, live resize, queue, delete), stopping a run that waits behind its serial
rule, and backfill of downstream workflows (ALL_DEPENDENT)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import uuid
from typing import Any

import asyncpg

from engine.accounts.tokens import create_token, ensure_user
from engine.states import UserType, WorkflowState
from tests.conftest import ApiCluster
from tests.test_api import error_of


def _name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def _shell(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": "SHELL", "params": {"rawScript": "true"}, **extra}


def _save(c: ApiCluster, doc: dict[str, Any]) -> int:
    return int(c.client().post("/api/v1/workflows", doc, release="true")["code"])


def _user_token(c: ApiCluster, name: str) -> str:
    async def make() -> str:
        conn = await asyncpg.connect(c.dsn)
        try:
            user = await ensure_user(conn, name)
            await conn.execute("UPDATE users SET user_type = $2 WHERE id = $1", user, UserType.GENERAL)
            return (await create_token(conn, user, "t"))[1]
        finally:
            await conn.close()

    return asyncio.run(make())


def test_the_concurrency_rules_round_trip_in_the_document(api_cluster: ApiCluster) -> None:
    c = api_cluster
    group = _name("g")
    c.client().post("/api/v1/task-groups", {"name": group, "size": 3})
    doc = {
        "name": _name("rules"),
        "project": "conc-tests",
        "execution_type": "SERIAL_PRIORITY",
        "max_active_runs": 2,
        "timeout": 5,
        "timeout_strategy": "FAILED",
        "tasks": [_shell("a", task_group=group, task_group_priority=7, task_group_slots=2)],
    }
    code = _save(c, doc)
    got = c.client().get(f"/api/v1/workflows/{code}")
    document = got.get("document", got)
    for key in ("execution_type", "max_active_runs", "timeout_strategy"):
        assert document[key] == doc[key], key
    (task,) = document["tasks"]
    assert (task["task_group"], task["task_group_priority"], task["task_group_slots"]) == (group, 7, 2)
    # a group the task cannot use is refused naming the field
    bad = {**doc, "name": _name("bad"), "tasks": [_shell("a", task_group="no-such-group")]}
    err = error_of(lambda: c.client().post("/api/v1/workflows", bad))
    assert err.status == 400 and "tasks[0].task_group" in str(err)
    too_big = {**doc, "name": _name("big"), "tasks": [_shell("a", task_group=group, task_group_slots=4)]}
    err = error_of(lambda: c.client().post("/api/v1/workflows", too_big))
    assert err.status == 400 and "task_group_slots" in str(err)


def test_task_groups_are_changed_by_admins_and_resized_live(api_cluster: ApiCluster) -> None:
    c = api_cluster
    name = _name("pool")
    g = c.client().post("/api/v1/task-groups", {"name": name, "size": 1, "project": "conc-tests"})
    assert (g["name"], g["size"], g["used"], g["waiting"], g["project"]) == (name, 1, 0, 0, "conc-tests")
    assert error_of(lambda: c.client().post("/api/v1/task-groups", {"name": name, "size": 2})).status == 409
    general = c.client(_user_token(c, _name("user")))
    assert error_of(lambda: general.post("/api/v1/task-groups", {"name": _name("x"), "size": 1})).status == 403
    assert error_of(lambda: general.post("/api/v1/task-groups/queue/1/force-start")).status == 403
    assert general.get(f"/api/v1/task-groups/{g['id']}")["name"] == name  # anyone may read
    # two waiting queue rows (as a master queues them); growing the group admits them in order
    for tid, priority in ((900001, 1), (900002, 5)):
        c.query(
            "INSERT INTO task_group_queue (task_group_id, task_instance_id, workflow_instance_id, priority, slots)"
            " VALUES ($1, $2, 1, $3, 1)",
            g["id"],
            tid,
            priority,
        )
    queue = c.client().get(f"/api/v1/task-groups/{g['id']}/queue")["items"]
    assert [(e["task_instance_id"], e["position"]) for e in queue] == [(900002, 1), (900001, 2)]
    grown = c.client().patch(f"/api/v1/task-groups/{g['id']}", {"size": 1})
    assert (grown["used"], grown["waiting"]) == (1, 1)  # the higher priority went first
    forced = c.client().post("/api/v1/task-groups/queue/900001/force-start")
    assert forced["forced"] is True
    after = c.client().get(f"/api/v1/task-groups/{g['id']}")
    assert (after["used"], after["waiting"]) == (2, 0)  # beyond the size: a force start
    assert error_of(lambda: c.client().delete(f"/api/v1/task-groups/{g['id']}")).status == 409
    c.query("DELETE FROM task_group_queue WHERE task_group_id = $1", g["id"])
    assert c.client().delete(f"/api/v1/task-groups/{g['id']}") == {"deleted": g["id"]}


def test_a_waiting_run_is_stopped_by_the_api_and_the_next_one_is_woken(api_cluster: ApiCluster) -> None:
    c = api_cluster
    code = _save(c, {"name": _name("serial"), "project": "conc-tests", "execution_type": "SERIAL_WAIT",
                     "tasks": [_shell("a")]})  # fmt: skip
    ids = []
    for _ in range(2):  # two runs waiting (as a claim leaves them when the workflow is busy)
        rows = c.query(
            "INSERT INTO workflow_instance (name, workflow_definition_code, workflow_definition_version, project_code,"
            " state, command_type) SELECT 'w', code, version, project_code, 14, 0 FROM workflow_definition"
            " WHERE code = $1 RETURNING id",
            code,
        )
        ids.append(rows[0]["id"])
    reply = c.client().post(f"/api/v1/instances/{ids[0]}/stop")
    assert reply["accepted"] is True
    (row,) = c.query("SELECT state, state_history FROM workflow_instance WHERE id = $1", ids[0])
    history = json.loads(row["state_history"]) if isinstance(row["state_history"], str) else row["state_history"]
    assert row["state"] == WorkflowState.STOP and "stopped while waiting" in history[-1]["desc"]
    # nothing runs: the place is free, so the next waiting run was woken (one RECOVER_SERIAL_WAIT command)
    woken = c.query(
        "SELECT workflow_instance_id FROM command WHERE command_type = 11 AND workflow_definition_code = $1", code
    )
    assert [r["workflow_instance_id"] for r in woken] == [ids[1]] or c.query(
        "SELECT state FROM workflow_instance WHERE id = $1", ids[1]
    )[0]["state"] in (WorkflowState.RUNNING_EXECUTION, WorkflowState.SUCCESS)  # or a master claimed it already


def test_a_backfill_with_all_dependent_also_backfills_the_downstream_workflows_in_order(
    api_cluster: ApiCluster,
) -> None:
    c = api_cluster
    project = _name("dep")
    up = _name("up")

    def dependent_on(name: str) -> dict[str, Any]:
        params = {"items": [{"workflow": name, "cycle": "day", "date_value": "today"}]}
        return {"name": "wait", "type": "DEPENDENT", "params": params}

    mid, low, other = _name("mid"), _name("low"), _name("other")
    codes = {}
    # saved out of order: the answer's order must come from the dependencies, not from the codes
    for name, tasks in ((low, [dependent_on(mid), _shell("b", upstream=["wait"])]),
                        (mid, [dependent_on(up), _shell("b", upstream=["wait"])]),
                        (up, [_shell("a")]), (other, [_shell("a")])):  # fmt: skip
        codes[name] = _save(c, {"name": name, "project": project, "tasks": tasks})
    dates = [dt.datetime(2024, 3, d, tzinfo=dt.UTC).isoformat() for d in (1, 2)]
    reply = c.client().post(
        f"/api/v1/workflows/{codes[up]}/backfill", {"dates": dates, "dependent_mode": "ALL_DEPENDENT"}
    )
    assert [d["name"] for d in reply["dependents"]] == [mid, low]
    own = reply["command_ids"][0]
    queued = [own] + [d["command_ids"][0] for d in reply["dependents"]]
    assert queued == sorted(queued)  # upstream first
    for name, cid in zip((up, mid, low), queued, strict=True):
        rows = c.query(
            "SELECT c.workflow_definition_code, c.schedule_time, b.dates FROM command c"
            " JOIN backfill b ON b.id = (c.command_param->>'backfillId')::bigint WHERE c.id = $1",
            cid,
        )
        if rows:  # (a master may have claimed it already)
            assert rows[0]["workflow_definition_code"] == codes[name]
            assert [d.isoformat() for d in rows[0]["dates"]] == dates
    # without the mode nothing downstream is queued
    alone = c.client().post(f"/api/v1/workflows/{codes[up]}/backfill", {"dates": dates})
    assert "dependents" not in alone and len(alone["command_ids"]) == 1
