"""DolphinScheduler import / export end to end, on real api + master + worker processes: the real export
files import through the API and the CLI, run to SUCCESS where their tasks can run here, refuse with
their unsupported types (creating nothing), and survive import -> export -> import unchanged."""

from __future__ import annotations

import copy
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from engine.client import ApiClientError
from tests.conftest import ApiCluster
from tests.sql_servers import MariaDb
from tests.test_api import claimed, error_of, wait_final
from tests.test_cli import porpoise
from tests.test_migrate_dolphinscheduler import EXPECTED, load

pytestmark = pytest.mark.slow


def _project() -> str:
    return f"ds_{uuid.uuid4().hex[:8]}"


def _import(c: ApiCluster, data: Any, project: str, **extra: Any) -> dict[str, Any]:
    return c.client().post("/api/v1/import/dolphinscheduler", {"export": data, "project": project, **extra})


def _scripts(data: Any, scripts: dict[str, str]) -> Any:
    """A copy of an export whose named tasks run ``scripts`` instead: several samples hold placeholder
    commands (``aaa``, ``eco1``) that fail in DolphinScheduler as well."""
    data = copy.deepcopy(data)
    for item in data:
        for task in item["taskDefinitionList"]:
            if task["name"] in scripts:
                task["taskParams"]["rawScript"] = scripts[task["name"]]
    return data


def _run(c: ApiCluster, project: str, name: str, **body: Any) -> dict[str, Any]:
    client = c.client()
    code = client.get("/api/v1/workflows", project=project, name=name)["items"][0]["code"]
    command = client.post(f"/api/v1/workflows/{code}/start", body)
    return wait_final(c, claimed(c, command["command_id"]), timeout=90)


def _states(detail: dict[str, Any]) -> dict[str, str]:
    """The tasks that ran (not the ones a SWITCH branch skipped, listed as SKIPPED)."""
    return {t["name"]: t["state"] for t in detail["tasks"] if t["state"] != "SKIPPED"}


def test_shell_python_and_sub_process_exports_run(api_cluster: ApiCluster) -> None:
    c, project = api_cluster, _project()
    source = f"src_{uuid.uuid4().hex[:6]}"
    c.client().request("PUT", f"/api/v1/datasources/{source}", {"params": {"dsn": c.dsn}})
    batch = load("ds31_batch-export_shell-python-sql-subprocess.json")
    # the SQL task's data source (DolphinScheduler id 1) must exist: nothing is imported until it does
    err = error_of(lambda: _import(c, batch, project))
    assert err.status == 400 and err.field == "datasources" and "sql_p1/sql_task1" in str(err)
    assert c.client().get("/api/v1/workflows", project=project)["total"] == 0
    # mapped to a source of another type than the task's (a POSTGRESQL task): refused at that task
    other = f"my_{uuid.uuid4().hex[:6]}"
    c.client().request("PUT", f"/api/v1/datasources/{other}",
                       {"type": "MYSQL", "params": {"host": "127.0.0.1", "port": 3306, "database": "d"}})  # fmt: skip
    err = error_of(lambda: _import(c, batch, project, datasources={"1": other}))
    assert err.status == 400 and "is MYSQL, not POSTGRESQL" in str(err), err
    assert err.field == "export: workflow 'sql_p1': tasks[0].params.datasource", err
    assert c.client().get("/api/v1/workflows", project=project)["total"] == 0
    answer = _import(c, batch, project, datasources={"1": source}, release=True)
    assert [w["name"] for w in answer["workflows"]] == ["shell1", "python1", "sql_p1", "subprocess1"]
    assert answer["datasources"] == {source: ["sql_p1/sql_task1"]}
    for name in ("shell1", "python1", "subprocess1"):
        detail = _run(c, project, name)
        assert detail["state"] == "SUCCESS", (name, detail)
    assert _states(detail) == {"sub_task_shell1": "SUCCESS", "sub_task1": "SUCCESS"}
    # the sub-process started an instance of the imported shell1 (its code was mapped to the name)
    shell1 = c.client().get("/api/v1/workflows", project=project, name="shell1")["items"][0]["code"]
    assert c.client().get("/api/v1/instances", workflow=shell1)["total"] == 2

    python = load("ds20x-labelled-3.0.5_batch-export_python.json")
    answer = _import(c, python, _project(), release=True)
    assert any("resourceList" in g["detail"] for g in answer["gaps"])  # reported, not fatal
    assert _run(c, answer["project"], "python1")["state"] == "SUCCESS"
    for name in ("ds32_apache-api-test_shell.json", "ds33dev_apache-api-test_shell_workflowDefinition.json"):
        answer = _import(c, load(name), _project(), release=True)
        assert _run(c, answer["project"], "test")["state"] == "SUCCESS"


def test_sub_process_with_schedules_and_sql_run(api_cluster: ApiCluster, mariadb: MariaDb) -> None:
    c, project = api_cluster, _project()
    data = _scripts(
        load("ds320_subprocess-shell_schedules.json"),
        {
            "innershell1": "echo inner1",
            "innerShell2": "echo inner2",
            "pre_shell": "echo pre",
            "post_shell": "echo post",
        },
    )
    answer = _import(c, data, project, release=True)
    schedule_ids = [w["schedule_id"] for w in answer["workflows"]]
    assert all(schedule_ids)
    stored = c.client().get(f"/api/v1/schedules/{schedule_ids[0]}")
    assert (stored["crontab"], stored["timezone"], stored["release_state"]) == (
        "0 0 * * * ? *",
        "Asia/Shanghai",
        "OFFLINE",
    )
    assert (stored["failure_strategy"], stored["start_time"][:19]) == ("CONTINUE", "2024-10-22T16:00:00")
    detail = _run(c, project, "内部子流程测试")
    assert detail["state"] == "SUCCESS"
    assert _states(detail) == {"pre_shell": "SUCCESS", "subNode": "SUCCESS", "post_shell": "SUCCESS"}

    # the SQL task is written for MYSQL: it keeps its type and runs on a MYSQL data source (MariaDB)
    source = f"my_{uuid.uuid4().hex[:6]}"
    params = {k: v for k, v in mariadb.source().items() if k != "type"}
    c.client().request("PUT", f"/api/v1/datasources/{source}", {"type": "MYSQL", "params": params})
    project = _project()
    answer = _import(c, load("ds320_dependent-shell-python-sql_schedule.json"), project,
                     datasources={"1": source}, release=True)  # fmt: skip
    assert not [g for g in answer["gaps"] if g["task"] == "sql节点"]
    # the DEPENDENT task waits for this month's earlier runs (as in DolphinScheduler); the SQL task alone runs
    detail = _run(c, project, "依赖节点测试", start_tasks=["sql节点"], scope="TASK_ONLY")
    assert detail["state"] == "SUCCESS" and _states(detail) == {"sql节点": "SUCCESS"}
    log = c.client().get(f"/api/v1/tasks/{detail['tasks'][0]['id']}/log", limit=5000)
    assert "query returned 1 row(s)" in "\n".join(log["lines"])  # MariaDB's now()


def test_conditions_and_switch_exports_take_their_branches(api_cluster: ApiCluster) -> None:
    c, project = api_cluster, _project()
    data = _scripts(
        load("ds320_conditions-shell.json"),
        {"shell1": "echo ok", "shell2": "exit 3", "shell3": "echo success branch", "shell4": "echo failure branch"},
    )
    _import(c, data, project, release=True)
    detail = _run(c, project, "条件节点测试工作流")
    # shell1 SUCCESS and shell2 FAILURE: the condition holds, the success branch runs, the other is skipped
    assert detail["state"] == "SUCCESS", detail
    states = _states(detail)
    assert (states["shell1"], states["shell2"], states["condi"], states["shell3"]) == (
        "SUCCESS", "FAILURE", "SUCCESS", "SUCCESS",
    )  # fmt: skip
    assert "shell4" not in states

    switch = load("ds31_ui-export_switch.json")
    err = error_of(lambda: _import(c, switch, project))
    assert err.status == 400 and "if $test==1" in str(err)
    # the sample's conditions are not valid JavaScript either; with ${test} they are
    fixed = _scripts(switch, {"switch_shell1": "echo one", "switch_shell2": "echo two"})
    cases = fixed[0]["taskDefinitionList"][2]["taskParams"]["switchResult"]["dependTaskList"]
    cases[0]["condition"], cases[1]["condition"] = "${test} == 1 && true", "${test} == 2"
    fixed[0]["processDefinition"]["globalParams"] = '[{"prop":"test","direct":"IN","type":"VARCHAR","value":"2"}]'
    _import(c, fixed, project, release=True)
    detail = _run(c, project, "switch_proc1")
    assert detail["state"] == "SUCCESS" and _states(detail) == {"switch_task1": "SUCCESS", "switch_shell2": "SUCCESS"}


def test_cli_import_refuses_unsupported_types_then_skips_them(api_cluster: ApiCluster, tmp_path: Path) -> None:
    c, project = api_cluster, _project()
    path = tmp_path / "sqoop.json"
    path.write_text(json.dumps(load("ds320_batch-export_sqoop.json")))
    refused = porpoise(c, "import", "dolphinscheduler", str(path), "--project", project)
    assert refused.returncode != 0
    assert "unsupported: SQOOP" in refused.stderr and "sqoop_process1/sqoop1: SQOOP" in refused.stderr
    assert c.client().get("/api/v1/workflows", project=project)["total"] == 0
    done = porpoise(c, "import", "dolphinscheduler", str(path), "--project", project, "--skip-unsupported", "--json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert [(g["task"], g["kind"], g["detail"]) for g in answer["gaps"]] == [("sqoop1", "unsupported_type", "SQOOP")]
    code = answer["workflows"][0]["code"]
    doc = c.client().get(f"/api/v1/workflows/{code}")["document"]
    assert (
        "sqoop1 (SQOOP)" in doc["description"] and doc["tasks"][0]["params"]["dolphinscheduler"]["taskType"] == "SQOOP"
    )


def test_mr_and_spark_jar_exports_import_as_tasks_of_their_own(api_cluster: ApiCluster, tmp_path: Path) -> None:
    c, project = api_cluster, _project()
    path = tmp_path / "mr.json"
    path.write_text(json.dumps(load("ds320_batch-export_mr.json")))
    done = porpoise(c, "import", "dolphinscheduler", str(path), "--project", project, "--json")
    assert done.returncode == 0, done.stderr
    code = json.loads(done.stdout)["workflows"][0]["code"]
    task = c.client().get(f"/api/v1/workflows/{code}")["document"]["tasks"][0]
    assert task["type"] == "MR" and task["params"]["mainClass"] == "org.apache.hadoop.examples.WordCount"
    assert task["params"]["mainJar"] == "dolphinscheduler/default/resources/hadoop-mapreduce-examples-3.2.1.jar"


def test_import_export_import_round_trip(api_cluster: ApiCluster, tmp_path: Path) -> None:
    c = api_cluster
    # a source of each type the samples' SQL tasks name as data source 1 (an import checks the type)
    sources = {"POSTGRESQL": f"src_{uuid.uuid4().hex[:6]}", "MYSQL": f"my_{uuid.uuid4().hex[:6]}"}
    c.client().request("PUT", f"/api/v1/datasources/{sources['POSTGRESQL']}", {"params": {"dsn": c.dsn}})
    c.client().request("PUT", f"/api/v1/datasources/{sources['MYSQL']}",
                       {"type": "MYSQL", "params": {"host": "127.0.0.1", "port": 3306, "database": "d"}})  # fmt: skip
    for i, name in enumerate(sorted(EXPECTED)):  # every sample, unsupported tasks kept as placeholders
        first, second = _project(), _project()
        data = load(name)
        kinds = {t["taskParams"].get("type") for item in data for t in item["taskDefinitionList"]
                 if t["taskType"] in ("SQL", "PROCEDURE")}  # fmt: skip
        source = sources["MYSQL" if "MYSQL" in kinds else "POSTGRESQL"]
        _import(c, data, first, skip_unsupported=True, datasources={"1": source})
        if i == 0:  # once through the CLI (a process each), the rest through the API
            path = tmp_path / f"{first}.json"
            out = porpoise(c, "export", "--format", "dolphinscheduler", "--project", first, "-o", str(path))
            assert out.returncode == 0, out.stderr
            exported = json.loads(path.read_text())
        else:
            exported = c.client().post("/api/v1/export/dolphinscheduler", {"project": first})
        _import(c, exported, second, skip_unsupported=True, datasources={"1": source})
        assert _documents(c, second) == _documents(c, first), name
        assert _schedules(c, second) == _schedules(c, first), name


def _documents(c: ApiCluster, project: str) -> list[dict[str, Any]]:
    client = c.client()
    out = []
    for w in client.get("/api/v1/workflows", project=project, size=500)["items"]:
        doc = client.get(f"/api/v1/workflows/{w['code']}")["document"]
        out.append({k: v for k, v in doc.items() if k != "project"})
    return sorted(out, key=lambda d: d["name"])


def _schedules(c: ApiCluster, project: str) -> list[tuple[Any, ...]]:
    rows = c.query(
        "SELECT d.name, s.crontab, s.timezone_id, s.start_time, s.end_time, s.failure_strategy, s.warning_type,"
        " s.workflow_instance_priority, s.worker_group FROM schedule s JOIN workflow_definition d"
        " ON d.code = s.workflow_definition_code JOIN project p ON p.code = d.project_code WHERE p.name = $1",
        project,
    )
    return sorted(tuple(r) for r in rows)


def test_export_of_an_unknown_workflow_is_a_404(api_cluster: ApiCluster) -> None:
    client = api_cluster.client()
    project = _project()
    err = error_of(lambda: client.post("/api/v1/export/dolphinscheduler", {"project": project, "workflows": ["x"]}))
    assert err.status == 404 and err.field == "project"  # no such project (the access check names it)
    client.post("/api/v1/projects", {"name": project})
    err = error_of(lambda: client.post("/api/v1/export/dolphinscheduler", {"project": project, "workflows": ["x"]}))
    assert err.status == 404 and err.field == "workflows"
    err = error_of(lambda: client.post("/api/v1/import/dolphinscheduler", {"export": [{"nothing": 1}]}))
    assert err.status == 400 and err.field == "export: [0].processDefinition"
    assert isinstance(err, ApiClientError)


def test_spark_sql_export_runs_locally(api_cluster: ApiCluster) -> None:
    c, project = api_cluster, _project()
    data = load("ds31_dependent-spark.json")
    # the sample's DEPENDENT tasks name workflows of another DolphinScheduler project: refused, then kept
    # (they would wait, as in DolphinScheduler) and reported
    err = error_of(lambda: _import(c, data, project))
    assert err.status == 400 and {d["kind"] for d in err.details} == {"unresolved_reference"}
    spark = data[0]["taskDefinitionList"][2]
    spark["taskParams"]["rawScript"] = "select 40 + 2 as answer"  # the sample's tables do not exist here
    answer = _import(c, data, project, skip_unsupported=True, release=True)
    assert sorted(g["task"] for g in answer["gaps"] if g["kind"] == "unresolved_reference") == [
        "星空roi计算依赖", "茄子roi计算依赖",
    ]  # fmt: skip
    detail = _run(c, project, "跨项目依赖任务", start_tasks=["各项目计算结果汇总"], scope="TASK_ONLY")
    assert detail["state"] == "SUCCESS", detail
    log = c.client().get(f"/api/v1/tasks/{detail['tasks'][0]['id']}/log", limit=5000)
    assert "42" in "\n".join(log["lines"])


def test_a_sub_process_naming_a_workflow_outside_the_file_resolves_by_code(api_cluster: ApiCluster) -> None:
    c, first, second = api_cluster, _project(), _project()
    data = _scripts(load("ds320_subprocess-shell_schedules.json"), {n: "echo x" for n in ("innershell1", "innerShell2",
                    "pre_shell", "post_shell")})  # fmt: skip
    _import(c, data, first, release=True)
    exported = c.client().post("/api/v1/export/dolphinscheduler", {"project": first, "workflows": ["内部子流程测试"]})
    assert len(exported) == 1  # the child is not exported along (as in DolphinScheduler)
    _import(c, exported, second, release=True)
    code = c.client().get("/api/v1/workflows", project=second, name="内部子流程测试")["items"][0]["code"]
    task = next(t for t in c.client().get(f"/api/v1/workflows/{code}")["document"]["tasks"] if t["name"] == "subNode")
    assert (task["params"]["workflow"], task["params"]["project"]) == ("sub_process", first)
    assert _run(c, second, "内部子流程测试")["state"] == "SUCCESS"


def test_a_failure_midway_imports_nothing(api_cluster: ApiCluster) -> None:
    c, project = api_cluster, _project()
    data = load("ds320_subprocess-shell_schedules.json")
    data[1]["schedule"]["crontab"] = "0 0 0 LW * ?"  # the second workflow's schedule is refused at save time
    err = error_of(lambda: _import(c, data, project))
    assert err.status == 400 and err.field == "export: workflow '内部子流程测试': schedule.crontab", err
    assert c.client().get("/api/v1/workflows", project=project)["total"] == 0
    assert c.query("SELECT count(*) FROM schedule s JOIN workflow_definition d ON d.code = s.workflow_definition_code"
                   " JOIN project p ON p.code = d.project_code WHERE p.name = $1", project)[0][0] == 0  # fmt: skip
