"""Logic tasks run by the master, end to end with real api + master + worker processes: CONDITIONS,
SWITCH, SUB_PROCESS (nesting, stop / pause / resume propagation) and DEPENDENT."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.infra.etcd import EtcdServer
from engine.states import TaskState, WorkflowState
from engine.workflows.model import TaskDef
from registry import EtcdClient, MembershipView
from tests import tls
from tests.cluster_harness import command, instance_for, save, shell, started, tasks_of
from tests.conftest import ApiCluster
from tests.helpers import NodeProc, wait_sync
from tests.test_api import error_of, start, wait_final

pytestmark = pytest.mark.slow
PROJECT = "logic-tests"


def sh(name: str, script: str, upstream: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"name": name, "type": "SHELL", "params": {"rawScript": script}, "upstream": list(upstream)}


def create(c: ApiCluster, tasks: list[dict[str, Any]], name: str | None = None, **extra: Any) -> tuple[int, str]:
    name = name or f"wf_{uuid.uuid4().hex[:8]}"
    doc = {"name": name, "project": PROJECT, "tasks": tasks, **extra}
    return int(c.client().post("/api/v1/workflows", doc, release="true")["code"]), name


def states(detail: dict[str, Any]) -> dict[str, str]:
    """The tasks that ran (a branch's skipped tasks are listed too, as SKIPPED: see skipped)."""
    return {t["name"]: t["state"] for t in detail["tasks"] if t["state"] != "SKIPPED"}


def skipped(detail: dict[str, Any]) -> set[str]:
    return {t["name"] for t in detail["tasks"] if t["state"] == "SKIPPED"}


def test_conditions_take_the_branch_the_upstream_result_selects(api_cluster: ApiCluster) -> None:
    c = api_cluster
    tasks = [
        sh("load", "exit ${code}"),
        {"name": "check", "type": "CONDITIONS", "upstream": ["load"],
         "params": {"conditions": [{"task": "load", "status": "SUCCESS"}], "success": ["publish"],
                    "failure": ["repair"]}},
        sh("publish", "true", ("check",)),
        sh("announce", "true", ("publish",)),
        sh("repair", "true", ("check",)),
    ]  # fmt: skip
    code, _ = create(c, tasks, params={"code": "0"})
    ok = wait_final(c, start(c, code))
    assert ok["state"] == "SUCCESS"
    assert states(ok) == {"load": "SUCCESS", "check": "SUCCESS", "publish": "SUCCESS", "announce": "SUCCESS"}
    assert skipped(ok) == {"repair"}
    # the failure is handled by the CONDITIONS task: the repair branch runs and the workflow succeeds
    bad = wait_final(c, start(c, code, {"params": {"code": "4"}}))
    assert bad["state"] == "SUCCESS"
    assert states(bad) == {"load": "FAILURE", "check": "SUCCESS", "repair": "SUCCESS"}
    assert skipped(bad) == {"publish", "announce"}


def test_switch_picks_the_first_true_case_or_the_default(api_cluster: ApiCluster) -> None:
    c = api_cluster
    tasks = [
        sh("prepare", "echo '${setValue(rows=7)}'"),
        {"name": "route", "type": "SWITCH", "upstream": ["prepare"],
         "params": {"cases": [{"condition": "'${env}' == 'prod'", "next": "prod"},
                              {"condition": "${rows} > 5 and '${env}' != 'skip'", "next": "big"}],
                    "default": "other"}},
        sh("prod", "true", ("route",)), sh("big", "true", ("route",)), sh("other", "true", ("route",)),
        sh("after_big", "true", ("big",)),
    ]  # fmt: skip
    tasks[0]["params"]["localParams"] = [{"prop": "rows", "direct": "OUT", "type": "VARCHAR", "value": ""}]
    code, _ = create(c, tasks, params={"env": "dev"})
    runs = {env: wait_final(c, start(c, code, {"params": {"env": env}})) for env in ("prod", "dev", "skip")}
    assert all(d["state"] == "SUCCESS" for d in runs.values())
    ran = {env: sorted(n for n in states(d) if n not in ("prepare", "route")) for env, d in runs.items()}
    assert ran == {"prod": ["prod"], "dev": ["after_big", "big"], "skip": ["other"]}


def test_a_switch_with_an_unsafe_or_broken_expression_is_refused(api_cluster: ApiCluster) -> None:
    c = api_cluster
    for condition in ("__import__('os').system('true')", "open('/etc/passwd')", "1 +"):
        tasks = [sh("a", "true"), {"name": "s", "type": "SWITCH", "upstream": ["a"],
                                   "params": {"cases": [{"condition": condition, "next": "b"}]}},
                 sh("b", "true", ("s",))]  # fmt: skip
        err = error_of(lambda tasks=tasks: create(c, tasks))
        assert err.status == 400 and err.field == "tasks[1].params.cases[0].condition", (condition, err)
    tasks = [sh("a", "true"), {"name": "s", "type": "SWITCH", "upstream": ["a"],
                               "params": {"cases": [{"condition": "1 == 1", "next": "a"}]}}]  # fmt: skip
    err = error_of(lambda: create(c, tasks))
    assert err.status == 400 and "downstream" in str(err)


def test_a_switch_condition_that_can_never_be_evaluated_is_refused_naming_the_field(api_cluster: ApiCluster) -> None:
    c = api_cluster
    hostile = {
        "1000000**1000000 > 0": "'**' result over 1024 bits",
        "'a'*10**9 == 'b'": "a string over 4096 characters",
        "(" * 40 + "1" + ")" * 40: "brackets nested more than 32 deep",
        "9" * 5000 + " > 0": "over the limit of 4096",
    }
    for condition, reason in hostile.items():
        tasks = [sh("a", "true"), {"name": "s", "type": "SWITCH", "upstream": ["a"],
                                   "params": {"cases": [{"condition": condition, "next": "b"}]}},
                 sh("b", "true", ("s",))]  # fmt: skip
        err = error_of(lambda tasks=tasks: create(c, tasks))
        assert err.status == 400 and err.field == "tasks[1].params.cases[0].condition", (condition[:40], err)
        assert reason in str(err), (condition[:40], err)


#: start-time values of ${n} in the condition "${n} > 0": each makes the substituted condition one that
#: would freeze (or exhaust) the master, and each must fail the SWITCH task with this reason instead
HOSTILE_VALUES = {
    "2000000**2000000": "'**' result over 1024 bits",
    "1000000**1000000": "'**' result over 1024 bits",
    "'a'*10**9": "a string over 4096 characters",
    "(" * 40 + "1" + ")" * 40: "brackets nested more than 32 deep",
    "9" * 5000: "over the limit of 4096",
}
FAILURE, SUCCESS = 6, 7


async def _master_registration(endpoint: str, root: str) -> int:
    client = EtcdClient([endpoint], access=tls.etcd_access())
    try:
        view = MembershipView(client, root)
        await view.start()
        await view.close()
        (master,) = view.masters()
        return master.create_revision
    finally:
        await client.close()


async def test_an_expensive_switch_condition_fails_the_task_and_the_master_keeps_its_lease(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str, tmp_path: Path
) -> None:
    """A value substituted into a condition at run time (start params, upstream OUT values) is not
    checked when the definition is saved. Before the bounded evaluator, ``1000000**1000000`` held the
    master's GIL for seconds: the lease expired, the master exited, the instances never finished."""
    overrides = [f"worker.log_dir={tmp_path / 'logs'}", f"worker.exec_dir={tmp_path / 'exec'}"]
    (master,), _ = await started(node_factory, etcd_server, etcd_root, fresh_db, worker_overrides=overrides)
    registration = await _master_registration(etcd_server.endpoint, etcd_root)
    route = TaskDef("route", "SWITCH", {"cases": [{"condition": "${n} > 0", "next": "big"}], "default": "small"},
                    upstream=("a",))  # fmt: skip
    n = {"prop": "n", "direct": "IN", "type": "VARCHAR", "value": "1"}
    code = await save(fresh_db, "hostile_switch", [shell("a", "true"), route, shell("big", "true", ("route",)),
                      shell("small", "true", ("route",))], global_params=(n,))  # fmt: skip
    plain = await save(fresh_db, "plain", [shell("p", "true")])
    hostile = [(await command(fresh_db, code, command_param={"StartParams": {"n": v}}))[0] for v in HOSTILE_VALUES]
    (fine,) = await command(fresh_db, code, command_param={"StartParams": {"n": "5"}})
    (other,) = await command(fresh_db, plain)
    for cid, reason in zip(hostile, HOSTILE_VALUES.values(), strict=True):
        wi = await instance_for(fresh_db, cid, timeout=60)
        rows = {r["name"]: r for r in await tasks_of(fresh_db, wi["id"])}
        assert wi["state"] == FAILURE and {k: r["state"] for k, r in rows.items()} == {"a": SUCCESS, "route": FAILURE}
        failed = [json.loads(line) for line in (await asyncio.to_thread(master.proc.tail, 100_000)).splitlines()
                  if line.startswith("{") and '"logic task failed"' in line]  # fmt: skip
        (entry,) = [e for e in failed if e.get("task_instance_id") == rows["route"]["id"]]
        assert reason in entry["reason"] and entry["reason"].startswith("cannot evaluate '${n} > 0'"), entry
        assert entry["workflow_instance_id"] == wi["id"]
    # the master kept running workflows: the same condition with a sane value, another workflow
    ok = await instance_for(fresh_db, fine, timeout=60)
    assert ok["state"] == SUCCESS and {r["name"] for r in await tasks_of(fresh_db, ok["id"])} == {"a", "route", "big"}
    assert (await instance_for(fresh_db, other, timeout=60))["state"] == SUCCESS
    # ... and never lost its lease: still alive, the same registration, never a session LOST
    assert master.proc.exited() is None
    assert await _master_registration(etcd_server.endpoint, etcd_root) == registration
    assert '"new": "LOST"' not in await asyncio.to_thread(master.proc.tail, 100_000)


def test_sub_workflows_nest_five_deep_with_fan_out(api_cluster: ApiCluster, tmp_path: Path) -> None:
    c = api_cluster
    ledger = tmp_path / "ledger"
    prefix = f"nest_{uuid.uuid4().hex[:6]}"
    create(c, [sh("leaf", f"echo leaf >> {ledger}")], name=f"{prefix}_5")
    for level in range(4, 0, -1):
        child = f"{prefix}_{level + 1}"
        create(c, [{"name": f"sub{i}", "type": "SUB_PROCESS", "params": {"workflow": child}} for i in (1, 2)]
               + [sh("after", "true", ("sub1", "sub2"))], name=f"{prefix}_{level}")  # fmt: skip
    top = c.client().get("/api/v1/workflows", name=f"{prefix}_1")["items"][0]["code"]
    detail = wait_final(c, start(c, top), timeout=120)
    assert detail["state"] == "SUCCESS"
    assert ledger.read_text().split() == ["leaf"] * 16
    rows = c.query(
        "SELECT w.state, w.is_sub_workflow, d.name FROM workflow_instance w JOIN workflow_definition d"
        " ON d.code = w.workflow_definition_code WHERE d.name LIKE $1",
        f"{prefix}_%",
    )
    assert len(rows) == 1 + 2 + 4 + 8 + 16 and all(r["state"] == WorkflowState.SUCCESS for r in rows)
    assert sum(r["is_sub_workflow"] for r in rows) == 30
    links = c.query(
        "SELECT count(*) AS n FROM sub_workflow_relation r JOIN workflow_instance w ON w.id = r.workflow_instance_id"
        " JOIN workflow_definition d ON d.code = w.workflow_definition_code WHERE d.name LIKE $1",
        f"{prefix}_%",
    )
    assert links[0]["n"] == 30


def _child_of(c: ApiCluster, parent_id: int) -> dict[str, Any]:
    found: dict[str, Any] = {}

    def running() -> bool:
        rows = c.query(
            "SELECT w.id, w.state FROM sub_workflow_relation r JOIN workflow_instance w"
            " ON w.id = r.workflow_instance_id WHERE r.parent_workflow_instance_id = $1 ORDER BY r.id DESC",
            parent_id,
        )
        if rows and rows[0]["state"] == WorkflowState.RUNNING_EXECUTION:
            tasks = c.query("SELECT state FROM task_instance WHERE workflow_instance_id = $1", rows[0]["id"])
            if tasks and tasks[0]["state"] == TaskState.RUNNING_EXECUTION:
                found.update(rows[0])
                return True
        return False

    wait_sync(running, 30, what="child running its task")
    return found


def test_stopping_a_parent_stops_its_sub_workflow(api_cluster: ApiCluster, tmp_path: Path) -> None:
    c = api_cluster
    gate = tmp_path / "gate"
    _, child = create(c, [sh("wait", f"while [ ! -f {gate} ]; do sleep 0.05; done")])
    code, _ = create(
        c, [{"name": "sub", "type": "SUB_PROCESS", "params": {"workflow": child}}, sh("x", "true", ("sub",))]
    )
    parent = start(c, code)
    kid = _child_of(c, parent)
    c.client().post(f"/api/v1/instances/{parent}/stop")
    detail = wait_final(c, parent)
    assert detail["state"] == "STOP" and states(detail) == {"sub": "KILL"}
    assert c.client().get(f"/api/v1/instances/{kid['id']}")["state"] == "STOP"


def test_pausing_a_parent_pauses_its_sub_workflow_and_resume_resumes_the_same_child(
    api_cluster: ApiCluster, tmp_path: Path
) -> None:
    c = api_cluster
    gate, ledger = tmp_path / "gate", tmp_path / "ledger"
    _, child = create(c, [sh("first", f"while [ ! -f {gate} ]; do sleep 0.05; done"),
                          sh("second", f"echo second >> {ledger}", ("first",))])  # fmt: skip
    code, _ = create(c, [{"name": "sub", "type": "SUB_PROCESS", "params": {"workflow": child}},
                         sh("x", f"echo x >> {ledger}", ("sub",))])  # fmt: skip
    parent = start(c, code)
    kid = _child_of(c, parent)
    c.client().post(f"/api/v1/instances/{parent}/pause")
    gate.touch()  # the running task finishes; nothing after it starts
    assert wait_final(c, parent)["state"] == "PAUSE"
    assert wait_final(c, kid["id"])["state"] == "PAUSE"
    assert not ledger.exists()
    c.client().post(f"/api/v1/instances/{parent}/resume")
    wait_sync(lambda: c.client().get(f"/api/v1/instances/{parent}")["state"] == "SUCCESS", 60, what="parent done")
    assert c.client().get(f"/api/v1/instances/{kid['id']}")["state"] == "SUCCESS"
    assert ledger.read_text().split() == ["second", "x"]
    children = c.query(
        "SELECT DISTINCT workflow_instance_id FROM sub_workflow_relation WHERE parent_workflow_instance_id = $1", parent
    )
    assert [r["workflow_instance_id"] for r in children] == [kid["id"]]  # resumed, not started anew


def test_dependent_waits_for_the_other_workflow_then_follows_its_result(api_cluster: ApiCluster) -> None:
    c = api_cluster
    up_code, up_name = create(c, [sh("make", "exit ${code}")], params={"code": "0"})
    dep = {"name": "wait_for", "type": "DEPENDENT",
           "params": {"items": [{"workflow": up_name, "task": "make", "cycle": "day", "date_value": "today"}],
                      "check_interval": 1}}  # fmt: skip
    code, _ = create(c, [dep, sh("after", "true", ("wait_for",))])
    waiting = start(c, code)

    def task_state() -> str | None:
        tasks = states(c.client().get(f"/api/v1/instances/{waiting}"))
        return tasks.get("wait_for")

    wait_sync(lambda: task_state() == "RUNNING_EXECUTION", 30, what="dependent waiting")
    assert c.client().get(f"/api/v1/instances/{waiting}")["state"] == "RUNNING_EXECUTION"
    assert wait_final(c, start(c, up_code))["state"] == "SUCCESS"
    detail = wait_final(c, waiting)
    assert detail["state"] == "SUCCESS" and states(detail) == {"wait_for": "SUCCESS", "after": "SUCCESS"}
    # today's newest run of the dependency failed: the dependent fails (failure_policy FAIL)
    assert wait_final(c, start(c, up_code, {"params": {"code": "1"}}))["state"] == "FAILURE"
    failed = wait_final(c, start(c, code))
    assert failed["state"] == "FAILURE" and states(failed) == {"wait_for": "FAILURE"}


def test_dependent_on_a_missing_yesterday_keeps_waiting_until_stopped(api_cluster: ApiCluster) -> None:
    c = api_cluster
    _, up_name = create(c, [sh("make", "true")])
    dep = {"name": "wait_for", "type": "DEPENDENT",
           "params": {"relation": "OR", "groups": [{"relation": "AND", "items": [
               {"workflow": up_name, "cycle": "day", "date_value": "last1Days"}]}], "check_interval": 1}}  # fmt: skip
    code, _ = create(c, [dep])
    wid = start(c, code)
    wait_sync(lambda: states(c.client().get(f"/api/v1/instances/{wid}")).get("wait_for") == "RUNNING_EXECUTION", 30)
    checks_before = c.query("SELECT update_time FROM task_instance WHERE workflow_instance_id = $1", wid)
    assert checks_before
    c.client().post(f"/api/v1/instances/{wid}/stop")
    detail = wait_final(c, wid)
    assert detail["state"] == "STOP" and states(detail) == {"wait_for": "KILL"}


def test_dependent_gives_up_after_its_timeout(api_cluster: ApiCluster) -> None:
    c = api_cluster
    _, up_name = create(c, [sh("make", "true")])
    dep = {"name": "wait_for", "type": "DEPENDENT",
           "params": {"items": [{"workflow": up_name, "cycle": "day", "date_value": "last2Days"}],
                      "check_interval": 1, "timeout_seconds": 1}}  # fmt: skip
    code, _ = create(c, [dep, sh("after", "true", ("wait_for",))])
    detail = wait_final(c, start(c, code))
    assert detail["state"] == "FAILURE" and states(detail) == {"wait_for": "FAILURE"}
    task = detail["tasks"][0]
    assert task["duration_ms"] >= 1000  # waited its timeout, then gave up


def test_a_sub_workflow_whose_child_cannot_be_made_fails_with_the_reason(api_cluster: ApiCluster) -> None:
    c = api_cluster
    _, child = create(c, [sh("t", "true")])
    # an upstream OUT value the API cannot see in advance becomes the child's start parameter; its
    # $[...] is past the date range (written so the worker does not resolve it in the script itself)
    emit = sh("emit", "d='$'; echo \"\\${setValue(x=${d}[yyyyMMdd+99999999])}\"")
    emit["params"]["localParams"] = [{"prop": "x", "direct": "OUT"}]
    code, _ = create(c, [emit, {"name": "sub", "type": "SUB_PROCESS", "params": {"workflow": child},
                                "upstream": ["emit"]}])  # fmt: skip
    detail = wait_final(c, start(c, code))
    assert detail["state"] == "FAILURE" and states(detail) == {"emit": "SUCCESS", "sub": "FAILURE"}
    (row,) = c.query(
        "SELECT e.message FROM sub_workflow_relation r JOIN error_command e ON e.id = r.command_id"
        " WHERE r.parent_workflow_instance_id = $1",
        detail["id"],
    )
    assert "StartParams.x: bad time placeholder $[yyyyMMdd+99999999]: the date is out of range" in row["message"], row[
        "message"
    ]


def test_sub_workflows_nested_past_the_depth_limit_fail_with_the_reason(api_cluster: ApiCluster) -> None:
    """Issue 24 item 5: a SUB_PROCESS chain deeper than master.max_sub_workflow_depth (10) starts no more
    children: the SUB_PROCESS 10 levels down fails saying why, and the failure comes back up."""
    c = api_cluster
    prefix = f"deep_{uuid.uuid4().hex[:6]}"
    create(c, [sh("leaf", "true")], name=f"{prefix}_12")
    for level in range(11, 0, -1):
        create(c, [{"name": "sub", "type": "SUB_PROCESS", "params": {"workflow": f"{prefix}_{level + 1}"}}],
               name=f"{prefix}_{level}")  # fmt: skip
    top = c.client().get("/api/v1/workflows", name=f"{prefix}_1")["items"][0]["code"]
    detail = wait_final(c, start(c, top), timeout=120)
    assert detail["state"] == "FAILURE"
    rows = c.query(
        "SELECT d.name FROM workflow_instance w JOIN workflow_definition d ON d.code = w.workflow_definition_code"
        " WHERE d.name LIKE $1",
        f"{prefix}_%",
    )
    assert sorted(r["name"] for r in rows) == sorted(f"{prefix}_{n}" for n in range(1, 12))  # 11 instances: 0..10 deep
    deepest = c.query(
        "SELECT t.id FROM task_instance t JOIN workflow_instance w ON w.id = t.workflow_instance_id"
        " JOIN workflow_definition d ON d.code = w.workflow_definition_code WHERE d.name = $1",
        f"{prefix}_11",
    )
    assert c.client().get(f"/api/v1/tasks/{deepest[0]['id']}")["state"] == "FAILURE"
    (row,) = c.query(
        "SELECT e.id, e.message FROM sub_workflow_relation r JOIN error_command e ON e.id = r.command_id"
        " WHERE r.parent_task_instance_id = $1",
        deepest[0]["id"],
    )
    assert "nested too deeply" in row["message"] and "max_sub_workflow_depth is 10" in row["message"], row["message"]
    assert c.client().get(f"/api/v1/commands/{row['id']}")["status"] == "ERROR"
