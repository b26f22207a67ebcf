"""The Python SDK (`porpoise` package): documents built in Python equal the YAML ones and are checked
locally with the server's code; against a real API (api_cluster: real master, worker, PostgreSQL,
etcd) every task type runs, `start(wait=True)` returns the finished run, logs and control actions work,
and `porpoise apply FILE.py` applies what a Python file defines."""

from __future__ import annotations

import json
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from engine.workflows import document
from engine.workflows.model import DefinitionError
from porpoise import (
    ApiError,
    Client,
    Conditions,
    Dep,
    Dependent,
    Python,
    Shell,
    Spark,
    Sql,
    SubWorkflow,
    Switch,
    Task,
    Workflow,
    WorkflowError,
    load_workflows,
)
from tests.conftest import ApiCluster
from tests.helpers import ROOT, wait_sync
from tests.test_cli import porpoise

PROJECT = "sdk-tests"


def _name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def _upstream(wf: Workflow) -> dict[str, list[str]]:
    return {t["name"]: t.get("upstream", []) for t in wf.to_document()["tasks"]}


# -- building documents (no server) ----------------------------------------------------------------


def test_operators_build_the_same_edges_as_upstream_lists() -> None:
    with Workflow("ops", project=PROJECT) as wf:
        a, b, c, d = (Shell(n, "true") for n in "abcd")
        a >> [b, c] >> d  # fan out, then fan in
        e = Shell("e", "true")
        e << d  # the other direction
        f, g = Shell("f", "true"), Shell("g", "true")
        [f, g] << e
        Shell("h", "true", upstream=[g, "f"])
    assert _upstream(wf) == {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"], "e": ["d"], "f": ["e"], "g": ["e"],
                             "h": ["g", "f"]}  # fmt: skip


def test_branches_wait_for_their_switch_and_conditions() -> None:
    with Workflow("branches", project=PROJECT, params={"n": 5}) as wf:
        first = Shell("first", "true")
        sw = Switch("route", upstream=[first])
        big, small = Shell("big", "true"), Shell("small", "true")
        sw.case("${n} > 3", big).otherwise(small)
        cond = Conditions("check", [(big, "SUCCESS")], success=[Shell("ok", "true")], failure=["repair"])
        Shell("repair", "true", upstream=[cond])
    up = _upstream(wf)
    assert up["big"] == ["route"] and up["small"] == ["route"] and up["check"] == ["big"] and up["ok"] == ["check"]
    doc = wf.to_document()
    tasks = {t["name"]: t for t in doc["tasks"]}
    assert tasks["route"]["params"] == {"cases": [{"condition": "${n} > 3", "next": "big"}], "default": "small"}
    assert tasks["check"]["params"]["success"] == ["ok"] and tasks["check"]["params"]["failure"] == ["repair"]
    assert doc["params"] == [{"prop": "n", "value": "5", "direct": "IN", "type": "VARCHAR"}]
    wf.validate()  # the server's own checks accept it


def test_every_task_type_maps_to_the_plugin_parameters() -> None:
    with Workflow("types", project=PROJECT) as wf:
        Python("py", "print(1)", interpreter="python3", inputs={"x": 1}, outputs=["y"])
        Sql("sql", "warehouse", "SELECT 1", sql_type="non_query", pre_statements=["SET x = 1"], max_rows=5)
        Spark("spark", sql="SELECT 1", master="local[1]", driver_memory="512m", conf={"a": "b"})
        SubWorkflow("sub", "child", project="other")
        SubWorkflow("sub_by_code", 1000042)
        Dependent("dep", groups=[("OR", [Dep("up", task="t", cycle="hour", date_value="last24Hours")])],
                  check_interval=5, failure_policy="WAIT", failure_waiting_time=2, timeout_seconds=60)  # fmt: skip
        Task("custom", "SHELL", {"rawScript": "true"}, disabled=True, priority="HIGH", timeout=3,
             timeout_strategy="FAILED")  # fmt: skip
    t = {x["name"]: x for x in wf.to_document()["tasks"]}
    assert t["py"]["params"] == {"rawScript": "print(1)", "interpreter": "python3", "localParams": [
        {"prop": "x", "direct": "IN", "type": "VARCHAR", "value": "1"},
        {"prop": "y", "direct": "OUT", "type": "VARCHAR", "value": ""}]}  # fmt: skip
    assert t["sql"]["params"] == {"datasource": "warehouse", "sql": "SELECT 1", "sqlType": "non_query",
                                  "preStatements": ["SET x = 1"], "maxRows": 5}  # fmt: skip
    assert t["spark"]["params"] == {"programType": "SQL", "sql": "SELECT 1", "master": "local[1]",
                                    "driverMemory": "512m", "conf": {"a": "b"}}  # fmt: skip
    assert t["sub"]["params"] == {"workflow": "child", "project": "other"}
    assert t["sub_by_code"]["params"] == {"workflow_code": 1000042}
    assert t["dep"]["params"] == {
        "relation": "AND", "groups": [{"relation": "OR", "items": [
            {"workflow": "up", "task": "t", "cycle": "hour", "date_value": "last24Hours"}]}],
        "check_interval": 5, "failure_policy": "WAIT", "failure_waiting_time": 2, "timeout_seconds": 60}  # fmt: skip
    assert t["custom"]["disabled"] is True and t["custom"]["timeout_strategy"] == "FAILED"
    parsed = {task.name: task for task in document.parse(wf.to_document()).tasks}  # the server accepts all of it
    assert parsed["custom"].disabled and not parsed["py"].disabled


def test_mistakes_are_refused_locally_naming_the_field() -> None:
    with pytest.raises(WorkflowError, match="create tasks inside"):
        Shell("orphan", "true")
    with Workflow("dup", project=PROJECT), pytest.raises(WorkflowError, match="duplicate task name"):
        Shell("a", "true")
        Shell("a", "true")
    with Workflow("bad", project=PROJECT) as wf:
        Shell("a", "true", upstream=["ghost"])
    with pytest.raises(WorkflowError) as err:
        wf.validate()
    assert err.value.field == "bad: tasks[0].upstream" and "ghost" in err.value.reason
    with Workflow("badparam", project=PROJECT) as wf2:
        Sql("q", "ds", "SELECT 1", sql_type="bogus")  # type: ignore[arg-type]
    with pytest.raises(WorkflowError) as err:
        wf2.validate()
    assert err.value.field.startswith("badparam: tasks[0].params")


def test_the_examples_python_twin_is_the_yaml_workflow() -> None:
    [from_yaml] = document.load_file(str(ROOT / "examples" / "taxi" / "taxi.yaml"))
    [from_python] = load_workflows(ROOT / "examples" / "taxi" / "taxi.py")
    assert document.parse(from_python.to_document()) == from_yaml


def test_loading_a_file_collects_its_workflows_and_skips_its_main_block(tmp_path: Path) -> None:
    marker = tmp_path / "main-ran"
    path = tmp_path / "flows.py"
    path.write_text(textwrap.dedent(f"""\
        from porpoise import Shell, Workflow
        for i in range(3):
            with Workflow(f"made_{{i}}", project="p"):
                Shell("only", "true")
        if __name__ == "__main__":
            open({str(marker)!r}, "w").close()
        """))  # fmt: skip
    assert [w.name for w in load_workflows(path)] == ["made_0", "made_1", "made_2"]
    assert not marker.exists()
    (tmp_path / "broken.py").write_text("raise RuntimeError('boom')\n")
    with pytest.raises(WorkflowError, match="RuntimeError: boom"):
        load_workflows(tmp_path / "broken.py")
    (tmp_path / "empty.py").write_text("x = 1\n")
    with pytest.raises(WorkflowError, match="defines no Workflow"):
        load_workflows(tmp_path / "empty.py")


# -- against a real API ----------------------------------------------------------------------------


@pytest.fixture
def sdk(api_cluster: ApiCluster) -> Client:
    return Client(api=api_cluster.client())


@pytest.mark.slow
def test_every_task_type_runs_and_start_wait_returns_the_finished_run(api_cluster: ApiCluster, sdk: Client) -> None:
    api_cluster.client().request("PUT", "/api/v1/datasources/sdk_meta", {"params": {"dsn": api_cluster.dsn}})
    child_name, target_name = _name("sdk_child"), _name("sdk_target")
    with Workflow(child_name, project=PROJECT, client=sdk) as child:
        Shell("leaf", "echo leaf")
    child.apply()
    with Workflow(target_name, project=PROJECT, client=sdk) as target:
        Shell("done", "true")
    target.apply()
    assert target.start(wait=True, timeout=60).succeeded  # what the DEPENDENT task waits for

    with Workflow(_name("sdk_all"), project=PROJECT, params={"n": 5}, client=sdk) as wf:
        sh = Shell("shell", "echo from-shell ${n}")
        py = Python("python", "print('${setValue(answer=42)}')", outputs=["answer"])
        sql = Sql("sql", "sdk_meta", "SELECT ${answer}::int + 1 AS plus_one", outputs=["plus_one"])
        spark = Spark("spark", sql="SELECT 1 AS one", master="local[1]")
        sub = SubWorkflow("sub", child_name, project=PROJECT)
        dep = Dependent("dep", [Dep(target_name, project=PROJECT, cycle="day", date_value="today")], check_interval=1)
        sw = Switch("route")
        big, small = Shell("big", "echo big"), Shell("small", "echo small")
        sw.case("${plus_one} > 40", big).otherwise(small)
        cond = Conditions("check", [(big, "SUCCESS")], success=[Shell("ok", "true")], failure=[Shell("bad", "true")])
        sh >> py >> sql >> sw
        [sub, dep, spark] >> cond
    wf.apply()
    run = wf.start(wait=True, timeout=240)
    states = {t.name: t.state for t in run.tasks}
    assert run.state == "SUCCESS", states
    ran = ("shell", "python", "sql", "spark", "sub", "dep", "route", "big", "check", "ok")
    # the branches not taken (the SWITCH's "small", the CONDITIONS' "bad") are listed as skipped
    assert states == {**{n: "SUCCESS" for n in ran}, "small": "SKIPPED", "bad": "SKIPPED"}
    assert "from-shell 5" in run.task("shell").log()
    assert any("plus_one" in line for line in run.task("sql").log_lines())
    assert [i.id for i in sdk.instances(wf.name, project=PROJECT)] == [run.id]
    assert cond.name == "check" and spark.type == "SPARK"


@pytest.mark.slow
def test_control_actions_and_a_failed_run(api_cluster: ApiCluster, sdk: Client, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    with Workflow(_name("sdk_ctl"), project=PROJECT, client=sdk) as wf:
        Shell("wait", f"while [ ! -e {gate} ]; do sleep 0.05; done; echo released")
    wf.apply()
    run = wf.start()
    wait_sync(lambda: run.refresh().tasks and run.tasks[0].state == "RUNNING_EXECUTION", 30, what="task running")
    assert run.stop()["accepted"]
    assert run.wait(60).state == "STOP"
    gate.touch()
    run.resume()
    assert run.wait(60).state == "SUCCESS"
    assert "released" in run.task("wait").log()
    before = run.data["run_times"]
    run.rerun()  # returns once a master took the command: wait() then follows the new run
    assert run.wait(60).state == "SUCCESS" and run.data["run_times"] == before + 1

    flag = tmp_path / "fixed"
    with Workflow(_name("sdk_fail"), project=PROJECT, client=sdk) as failing:
        Shell("fragile", f"[ -e {flag} ]")
    failing.apply()
    bad = failing.start(wait=True, timeout=60)
    assert bad.state == "FAILURE" and bad.task("fragile").state == "FAILURE"
    with pytest.raises(ApiError) as refused:
        bad.resume()  # resume needs PAUSE or STOP: the API's 409 reason comes through
    assert refused.value.status == 409
    flag.touch()
    bad.recover_failed()
    wait_sync(lambda: bad.refresh().state == "SUCCESS", 60, what="recovered run succeeded")


@pytest.mark.slow
def test_apply_a_python_file_with_the_cli_and_its_schedule(api_cluster: ApiCluster, tmp_path: Path) -> None:
    name = _name("sdk_file")
    path = tmp_path / "flow.py"
    path.write_text(textwrap.dedent(f"""\
        from porpoise import Shell, Workflow
        with Workflow({name!r}, project={PROJECT!r}, schedule="0 0 2 * * ?", timezone="Europe/Paris") as wf:
            Shell("a", "echo a") >> Shell("b", "echo b")
        """))  # fmt: skip
    out = porpoise(api_cluster, "apply", str(path), "--json")
    assert out.returncode == 0, out.stderr
    [applied] = json.loads(out.stdout)
    assert applied["name"] == name and applied["version"] == 1 and applied["created"]
    client = api_cluster.client()
    [schedule] = client.get("/api/v1/schedules", workflow=applied["code"])["items"]
    assert (schedule["crontab"], schedule["timezone"], schedule["release_state"]) == (
        "0 0 2 * * ?", "Europe/Paris", "ONLINE")  # fmt: skip
    stored = client.get(f"/api/v1/workflows/{applied['code']}")["document"]
    assert [(t["name"], t.get("upstream", [])) for t in stored["tasks"]] == [("a", []), ("b", ["a"])]
    again = porpoise(api_cluster, "apply", str(path), "--json")  # a second apply: next version, same schedule
    assert json.loads(again.stdout)[0]["version"] == 2
    assert len(client.get("/api/v1/schedules", workflow=applied["code"])["items"]) == 1
    path.write_text("raise ValueError('nope')\n")
    bad = porpoise(api_cluster, "apply", str(path))
    assert bad.returncode != 0 and "ValueError: nope" in bad.stderr and "Traceback" not in bad.stderr


def test_concurrency_options_build_the_workflow_files_fields() -> None:
    with Workflow("limited", project=PROJECT, timeout=30, timeout_strategy="FAILED", execution_type="SERIAL_WAIT",
                  max_active_runs=2) as wf:  # fmt: skip
        load = Shell("load", "true", task_group="etl_db", task_group_priority=5, task_group_slots=2)
        Shell("report", "true", upstream=[load], disabled=True)
        Shell("plain", "true")
    doc = wf.to_document()
    assert (doc["execution_type"], doc["max_active_runs"], doc["timeout"], doc["timeout_strategy"]) == (
        "SERIAL_WAIT", 2, 30, "FAILED")  # fmt: skip
    t = {x["name"]: x for x in doc["tasks"]}
    assert (t["load"]["task_group"], t["load"]["task_group_priority"], t["load"]["task_group_slots"]) == (
        "etl_db",
        5,
        2,
    )
    assert t["report"]["disabled"] is True and "task_group" not in t["plain"] and "disabled" not in t["plain"]
    yaml_twin = textwrap.dedent(f"""\
        name: limited
        project: {PROJECT}
        timeout: 30
        timeout_strategy: FAILED
        execution_type: SERIAL_WAIT
        max_active_runs: 2
        tasks:
          - {{name: load, type: SHELL, params: {{rawScript: "true"}}, task_group: etl_db, task_group_priority: 5,
              task_group_slots: 2}}
          - {{name: report, type: SHELL, params: {{rawScript: "true"}}, upstream: [load], disabled: true}}
          - {{name: plain, type: SHELL, params: {{rawScript: "true"}}}}
        """)  # fmt: skip
    assert document.parse(doc) == document.parse(yaml.safe_load(yaml_twin))
    with Workflow("defaults", project=PROJECT) as plain:
        Shell("a", "true")
    assert not {"execution_type", "max_active_runs", "timeout_strategy"} & set(plain.to_document())
    parsed = document.parse(plain.to_document())
    assert (parsed.execution_type, parsed.max_active_runs, parsed.timeout_strategy) == (0, 0, 0)


@pytest.mark.parametrize(
    ("workflow", "task", "field"),
    [
        ({"execution_type": "SERIAL"}, {}, "x: execution_type"),
        ({"max_active_runs": -1}, {}, "x: max_active_runs"),
        ({"timeout_strategy": "WARNFAILED"}, {}, "x: timeout_strategy"),
        ({}, {"task_group": ""}, "x: tasks[0].task_group"),
        ({}, {"task_group": "g", "task_group_slots": 0}, "x: tasks[0].task_group_slots"),
        ({}, {"task_group_slots": 0}, "x: tasks[0].task_group_slots"),  # checked without a group too
        ({}, {"task_group": "g", "task_group_priority": 10**9}, "x: tasks[0].task_group_priority"),
    ],
)
def test_bad_concurrency_options_are_refused_locally_naming_the_field(
    workflow: dict[str, object], task: dict[str, object], field: str
) -> None:
    with Workflow("x", project=PROJECT, **workflow) as wf:  # type: ignore[arg-type]
        Shell("a", "true", **task)  # type: ignore[arg-type]
    with pytest.raises(WorkflowError) as err:
        wf.validate()
    assert err.value.field == field, err.value


def test_a_logic_task_naming_a_task_group_is_refused_locally() -> None:
    with Workflow("x", project=PROJECT) as wf:
        SubWorkflow("sub", "child", task_group="g")
    with pytest.raises(WorkflowError) as err:
        wf.validate()
    assert err.value.field == "x: tasks[0].task_group" and "logic tasks" in err.value.reason


@pytest.mark.slow
def test_concurrency_options_apply_through_the_api_and_a_disabled_task_is_skipped(
    api_cluster: ApiCluster, sdk: Client
) -> None:
    group = _name("sdk_group")
    api_cluster.client().post("/api/v1/task-groups", {"name": group, "size": 2})
    with Workflow(_name("sdk_limited"), project=PROJECT, timeout=10, timeout_strategy="FAILED",
                  execution_type="SERIAL_DISCARD", client=sdk) as wf:  # fmt: skip
        first = Shell("first", "echo first", task_group=group, task_group_priority=3, task_group_slots=2)
        off = Shell("off", "echo never", disabled=True, upstream=[first])
        Shell("last", "echo last", upstream=[off])
    wf.apply()
    stored = sdk.workflow(wf.code)  # the server's document of what the SDK sent
    stored = stored.get("document", stored)
    assert document.parse(stored) == document.parse(wf.to_document())
    run = wf.start(wait=True, timeout=60)
    states = {t["name"]: t["state"] for t in run.data["tasks"]}
    assert run.state == "SUCCESS" and states["first"] == states["last"] == "SUCCESS", states
    assert states["off"] == "DISABLED"


def test_task_alert_options_build_the_workflow_files_fields() -> None:
    with Workflow("alerting", project=PROJECT) as wf:
        Shell("load", "true", retries=1, alert_on=["retry", "failure"], alert_group="ops")
        Shell("plain", "true")
    t = {x["name"]: x for x in wf.to_document()["tasks"]}
    assert (t["load"]["alert_on"], t["load"]["alert_group"]) == (["retry", "failure"], "ops")
    assert not {"alert_on", "alert_group"} & set(t["plain"])
    parsed = {x.name: x for x in document.parse(wf.to_document()).tasks}
    assert (parsed["load"].alert_on, parsed["load"].alert_group) == (("retry", "failure"), "ops")
    assert (parsed["plain"].alert_on, parsed["plain"].alert_group) == ((), None)


@pytest.mark.parametrize(
    ("task", "field"),
    [
        ({"alert_on": ["failure", "sometimes"]}, "tasks[0].alert_on[1]"),
        ({"alert_on": "failure"}, "tasks[0].alert_on"),
        ({"alert_group": 0}, "tasks[0].alert_group"),
        ({"alert_group": ""}, "tasks[0].alert_group"),
    ],
)
def test_a_bad_task_alert_field_is_refused_at_the_field(task: dict[str, Any], field: str) -> None:
    doc = {"name": "w", "project": PROJECT, "tasks": [{"name": "a", "type": "SHELL", "params": {"rawScript": "true"},
                                                      **task}]}  # fmt: skip
    with pytest.raises(DefinitionError) as err:
        document.parse(doc)
    assert err.value.field == field
