"""DolphinScheduler export <-> Porpoise documents (pure translation, no processes): every real export
file under tests/fixtures/dolphinscheduler-exports imports or is refused with exactly its unsupported types;
field mappings by table; import -> export -> import gives equal documents and schedules."""

from __future__ import annotations

import datetime as dt
import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from engine.migrate import dolphinscheduler as ds
from engine.migrate.dolphinscheduler_export import Codes, export
from engine.migrate.ds_common import expression_to_js, js_to_expression
from engine.workflows import document
from engine.workflows.model import DefinitionError

#: the exports (and where each came from: SOURCES.md) live in the repository
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "dolphinscheduler-exports"


def load(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


#: file -> (workflows imported, fatal gaps as (task, kind, detail)) without --skip-unsupported
EXPECTED: dict[str, tuple[list[str], set[tuple[str, str, str]]]] = {
    "ds20x-labelled-3.0.5_batch-export_python.json": (["python1"], set()),
    "ds31_batch-export_shell-python-sql-subprocess.json": (["shell1", "python1", "sql_p1", "subprocess1"], set()),
    "ds320_conditions-shell.json": (["条件节点测试工作流"], set()),
    "ds320_dependent-shell-python-sql_schedule.json": (["依赖节点测试"], set()),
    "ds320_subprocess-shell_schedules.json": (["sub_process", "内部子流程测试"], set()),
    "ds32_apache-api-test_shell.json": (["test"], set()),
    "ds33dev_apache-api-test_shell_workflowDefinition.json": (["test"], set()),
    "ds320_batch-export_mr.json": (["mr12"], set()),
    "ds320_batch-export_sqoop.json": ([], {("sqoop1", ds.UNSUPPORTED_TYPE, "SQOOP")}),
    # 3.1 names a jar by resource id only: nothing here can resolve it
    "ds31_ui-export_spark.json": ([], {
        ("spark_task1", ds.UNRESOLVED, "mainJar {'id': 9}: a resource id cannot be resolved here"),
    }),
    "ds320_sql-python-spark_schedule.json": (["sql-python-spark工作流"], set()),
    "ds31_ui-export_switch.json": ([], {
        ("switch_task1", ds.NOT_REPRESENTABLE, "SWITCH condition 'if $test==1': cannot evaluate 'if $test==1':"
         " syntax error: invalid syntax"),
        ("switch_task1", ds.NOT_REPRESENTABLE, "SWITCH condition 'if $test==2': cannot evaluate 'if $test==2':"
         " syntax error: invalid syntax"),
    }),
    "ds31_dependent-spark.json": ([], {
        ("茄子roi计算依赖", ds.UNRESOLVED, "DEPENDENT workflow code 13524225520672 task code 0"),
        ("星空roi计算依赖", ds.UNRESOLVED, "DEPENDENT workflow code 13544367880867 task code 0"),
    }),
    "ds31-vendor_dlc-dependent-shell_schedules.json": ([], None),  # type: ignore[dict-item]  # checked below
}  # fmt: skip


def test_every_fixture_is_listed() -> None:
    assert sorted(p.name for p in FIXTURES.glob("*.json")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_export_imports_or_is_refused_with_its_gaps(name: str) -> None:
    workflows, fatal = EXPECTED[name]
    data = load(name)
    if workflows:
        tr = ds.translate(data, "imp")
        assert [d["name"] for d in tr.documents] == workflows
        assert not [g for g in tr.gaps if g.fatal]
        for d in tr.documents:
            document.parse(d)
        return
    with pytest.raises(ds.Unsupported) as refused:
        ds.translate(data, "imp")
    got = {(g.task, g.kind, g.detail) for g in refused.value.gaps}
    if fatal is not None:
        assert got == fatal
    # with --skip-unsupported the rest imports, and every gap is marked
    tr = ds.translate(data, "imp", skip_unsupported=True)
    assert {(g.task, g.kind, g.detail) for g in tr.gaps if g.fatal} == got
    for d in tr.documents:
        document.parse(d)
    marked = {
        (d["name"], t["name"]) for d in tr.documents for t in d["tasks"] if "[porpoise:" in t.get("description", "")
    }
    assert {(g.workflow, g.task) for g in tr.gaps if g.fatal} <= marked


def test_the_vendor_export_lists_its_dlc_tasks_and_external_dependencies() -> None:
    with pytest.raises(ds.Unsupported) as refused:
        ds.translate(load("ds31-vendor_dlc-dependent-shell_schedules.json"), "imp")
    gaps = refused.value.gaps
    assert sorted(g.task for g in gaps if g.kind == ds.UNSUPPORTED_TYPE) == [
        "da.dws_dynamics_metric_df", "dwd_xingye_user_portrait_df", "dws_xingye_creator_metric_df",
        "dws_xingye_creator_metric_df同步ck",
    ]  # fmt: skip
    assert "unsupported: DLC." in str(refused.value)
    assert {g.task for g in gaps if g.kind == ds.UNRESOLVED} == {"依赖检测", "依赖检查"}
    tr = ds.translate(load("ds31-vendor_dlc-dependent-shell_schedules.json"), "imp", skip_unsupported=True)
    wf = tr.documents[0]
    placeholder = next(t for t in wf["tasks"] if t["name"] == "dws_xingye_creator_metric_df")
    assert placeholder["type"] == "SHELL" and "exit 1" in placeholder["params"]["rawScript"]
    assert placeholder["params"]["dolphinscheduler"]["taskType"] == "DLC"
    assert "dws_xingye_creator_metric_df (DLC)" in wf["description"]
    # the DEPENDENT task between them keeps its in-file dependency (dep3 -> shell_pre/shell11)
    dep3 = next(d for d in tr.documents if d["name"] == "dep3")
    items = dep3["tasks"][0]["params"]["groups"][0]["items"]
    assert items == [
        {"workflow": "shell_pre", "task": "shell11", "cycle": "day", "date_value": "last1Days"},
        {"workflow": "shell_pre2", "cycle": "day", "date_value": "last1Days"},
    ]


def test_fields_map_as_dolphinscheduler_means_them() -> None:
    tr = ds.translate(load("ds31-vendor_dlc-dependent-shell_schedules.json"), "imp", skip_unsupported=True)
    first = tr.documents[0]
    dep = next(t for t in first["tasks"] if t["name"] == "依赖检测")
    assert (dep["retries"], dep["retry_interval"], dep["timeout"]) == (2, 3, 0)
    assert dep["params"]["check_interval"] == 600
    assert (dep["params"]["failure_policy"], dep["params"]["failure_waiting_time"]) == ("WAIT", 120)
    assert [t["name"] for t in first["tasks"] if t.get("upstream") == ["依赖检测"]] == ["dwd_xingye_user_portrait_df"]
    dlc = tr.documents[4]
    assert dlc["timeout"] == 240
    assert tr.schedules[first["name"]] == {
        "crontab": "0 0 2 * * ? *", "timezone": "Asia/Shanghai", "start_time": "2024-01-25T00:00:00+08:00",
        "end_time": "2124-01-25T00:00:00+08:00", "failure_strategy": "CONTINUE", "warning_type": "FAILURE",
        "priority": "MEDIUM", "worker_group": "default",
    }  # fmt: skip
    assert any(g.kind == ds.NOTE and "warningGroupId 4" in g.detail for g in tr.gaps)


TASK_CASES = [
    # (DolphinScheduler task fields, expected document fields)
    ({"failRetryTimes": 3, "failRetryInterval": 2}, {"retries": 3, "retry_interval": 2}),
    ({"timeoutFlag": "OPEN", "timeout": 30, "timeoutNotifyStrategy": "FAILED"},
     {"timeout": 30, "timeout_strategy": "FAILED"}),
    ({"timeoutFlag": "OPEN", "timeout": 5, "timeoutNotifyStrategy": None}, {"timeout": 5, "timeout_strategy": "WARN"}),
    ({"timeoutFlag": "CLOSE", "timeout": 30, "timeoutNotifyStrategy": "FAILED"}, {"timeout": 0}),
    ({"delayTime": 4, "taskPriority": "HIGHEST", "workerGroup": "gpu"},
     {"delay_time": 4, "priority": "HIGHEST", "worker_group": "gpu"}),
    ({"description": "nightly"}, {"description": "nightly"}),
]  # fmt: skip


def _one_task(**fields: Any) -> list[dict[str, Any]]:
    task = {"code": 11, "name": "t", "taskType": "SHELL", "flag": "YES",
            "taskParams": {"rawScript": "echo ${x} $[yyyyMMdd-1]", "localParams": []}, **fields}  # fmt: skip
    return [{
        "processDefinition": {"code": 1, "name": "wf", "globalParams": '[{"prop":"x","direct":"IN","type":"VARCHAR",'
                              '"value":"$[yyyy-MM-dd]"}]', "timeout": 0, "tenantCode": "etl"},
        "processTaskRelationList": [{"preTaskCode": 0, "postTaskCode": 11, "conditionType": "NONE"}],
        "taskDefinitionList": [task], "schedule": None,
    }]  # fmt: skip


@pytest.mark.parametrize(("fields", "expected"), TASK_CASES)
def test_task_fields(fields: dict[str, Any], expected: dict[str, Any]) -> None:
    doc = ds.translate(_one_task(**fields), "p").documents[0]
    task = doc["tasks"][0]
    assert {k: task.get(k) for k in expected} == expected
    assert task["params"]["rawScript"] == "echo ${x} $[yyyyMMdd-1]"  # placeholders verbatim
    assert doc["params"] == [{"prop": "x", "value": "$[yyyy-MM-dd]", "direct": "IN", "type": "VARCHAR"}]
    assert doc["tenant"] == "etl"


def test_a_disabled_task_imports_disabled_and_exports_back() -> None:
    docs = ds.translate(_one_task(flag="NO"), "p").documents
    assert docs[0]["tasks"][0]["disabled"] is True
    assert "disabled" not in ds.translate(_one_task(flag="YES"), "p").documents[0]["tasks"][0]
    document.parse(docs[0])  # the server's checks accept it


@pytest.mark.parametrize(
    ("js", "ours"),
    [
        ("${a} == 1 && ${b} != 'x'", "${a} == 1 and ${b} != 'x'"),
        ("!(${a} === 2) || true", "not (${a} == 2) or True"),
        ("'a && b' == \"c || d\"", "'a && b' == \"c || d\""),
        ("${n} !== 3", "${n} != 3"),
    ],
)
def test_switch_conditions_translate_both_ways(js: str, ours: str) -> None:
    assert js_to_expression(js) == ours
    assert js_to_expression(expression_to_js(ours)) == ours


def test_malformed_files_name_the_field() -> None:
    for data, field in (
        ({}, "[0].processDefinition"),
        (_typed("DEPENDENT", "{not json"), "task 't'.taskParams"),
        ([{"processDefinition": {"code": 1, "name": "x"}, "taskDefinitionList": []}], "[0].taskDefinitionList"),
        ("text", "file"),
    ):
        with pytest.raises(DefinitionError) as exc:
            ds.translate(data, "p")
        assert exc.value.field == field


def test_unexpected_content_names_the_workflow() -> None:
    odd = _typed("DEPENDENT", {"dependence": {"dependTaskList": ["x", {"dependItemList": [7]}]}})
    assert ds.referenced_codes(odd) == set()
    bad_timeout = _one_task(timeoutFlag="OPEN", timeout="soon")
    bad_params = _one_task()
    bad_params[0]["processDefinition"]["globalParams"] = '[{"value": "no prop"}]'
    bad_schedule = _one_task()
    bad_schedule[0]["schedule"] = {"crontab": "0 0 2 * * ? *", "timezoneId": "UTC", "startTime": "yesterday"}
    for data, part in ((bad_timeout, "processDefinition"), (bad_params, "processDefinition"),
                       (bad_schedule, "schedule")):  # fmt: skip
        with pytest.raises(DefinitionError) as exc:
            ds.translate(data, "p")
        assert exc.value.field == "workflow 'wf'" and exc.value.reason.startswith(f"unexpected {part} content")


def _codes(tr: ds.Translation, project: str) -> dict[tuple[str, str], Codes]:
    counter = itertools.count(1000)
    return {
        (project, d["name"]): Codes(next(counter), 7, {t["name"]: next(counter) for t in d["tasks"]})
        for d in tr.documents
    }


def _schedule_in(body: dict[str, Any]) -> dict[str, Any]:
    out = dict(body)
    for key in ("start_time", "end_time"):
        if key in out:
            out[key] = dt.datetime.fromisoformat(out[key])
    return out


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_import_export_import_gives_the_same_documents(name: str) -> None:
    data = load(name)
    first = ds.translate(data, "imp", skip_unsupported=True, datasources={"1": "warehouse"})
    refs = _codes(first, "imp")
    exported = [
        export(d, refs[("imp", d["name"])], refs,
               _schedule_in(first.schedules[d["name"]]) if d["name"] in first.schedules else None)
        for d in first.documents
    ]  # fmt: skip
    text = json.dumps(exported)  # what the CLI writes
    second = ds.translate(json.loads(text), "imp", skip_unsupported=True, datasources={"1": "warehouse"})
    assert second.documents == first.documents
    assert second.schedules == first.schedules
    assert [g for g in second.gaps if g.fatal] == [g for g in first.gaps if g.fatal]


def _typed(task_type: str, params: dict[str, Any], **more: Any) -> list[dict[str, Any]]:
    data = _one_task()
    task = data[0]["taskDefinitionList"][0]
    task.update(taskType=task_type, taskParams=params, **more)
    return data


PARAM_CASES = [
    # (type, DolphinScheduler taskParams, expected Porpoise params (subset))
    ("SQL", {"type": "POSTGRESQL", "datasource": 3, "sql": "select 1", "sqlType": "0", "displayRows": 10,
             "preStatements": ["set x=1"], "postStatements": [], "localParams": []},
     {"datasource": "wh", "datasourceId": 3, "sql": "select 1", "sqlType": "query", "maxRows": 10,
      "preStatements": ["set x=1"], "type": "POSTGRESQL"}),
    ("SQL", {"type": "POSTGRESQL", "datasource": 9, "sql": "delete from t", "sqlType": "1"},
     {"datasource": "9", "sqlType": "non_query"}),
    ("SPARK", {"programType": "SQL", "rawScript": "select 1", "deployMode": "local", "driverMemory": "512M",
               "numExecutors": 2, "sparkVersion": "SPARK2", "mainClass": ""},
     {"programType": "SQL", "sql": "select 1", "master": "local[*]", "deployMode": "client", "driverMemory": "512M",
      "numExecutors": 2}),
    ("SPARK", {"programType": "PYTHON", "mainJar": {"resourceName": "/jobs/a.py"}, "deployMode": "cluster"},
     {"mainFile": "/jobs/a.py", "master": "yarn", "deployMode": "cluster"}),
    ("SQL", {"type": "MYSQL", "datasource": 3, "sql": "select ${d}", "sqlType": "0", "title": "daily ${d}"},
     {"datasource": "wh", "type": "MYSQL", "sqlType": "query", "title": "daily ${d}"}),
    ("SQL", {"type": "HIVE", "datasource": 3, "sql": "insert overwrite table t select 1", "sqlType": "1"},
     {"datasource": "wh", "type": "HIVE", "sqlType": "non_query"}),
    ("SQL", {"type": "CLICKHOUSE", "datasource": 3, "sql": "select 1", "sqlType": 0, "sendEmail": False,
             "groupId": 0, "title": ""},
     {"datasource": "wh", "type": "CLICKHOUSE", "sqlType": "query", "sendEmail": None, "groupId": None,
      "title": None}),
    ("PROCEDURE", {"type": "MYSQL", "datasource": 3, "method": "call p(${a}, ${b})",
                   "localParams": [{"prop": "a", "direct": "IN", "type": "INTEGER", "value": "1"},
                                   {"prop": "b", "direct": "OUT", "type": "VARCHAR", "value": ""}]},
     {"datasource": "wh", "datasourceId": 3, "type": "MYSQL", "method": "call p(${a}, ${b})",
      "localParams": [{"prop": "a", "direct": "IN", "type": "INTEGER", "value": "1"},
                      {"prop": "b", "direct": "OUT", "type": "VARCHAR", "value": ""}]}),
    ("PROCEDURE", {"type": "POSTGRESQL", "datasource": 4, "method": "CALL q()"},
     {"datasource": "4", "type": "POSTGRESQL", "method": "CALL q()"}),
    ("HTTP", {"url": "https://api.example.org/jobs/${id}", "httpMethod": "POST", "httpParams": [
        {"prop": "day", "httpParametersType": "PARAMETER", "value": "${d}"},
        {"prop": "name", "httpParametersType": "BODY", "value": "nightly"},
        {"prop": "Authorization", "httpParametersType": "HEADERS", "value": "Bearer ${token}"}],
        "httpCheckCondition": "STATUS_CODE_DEFAULT", "condition": "", "connectTimeout": 10000,
        "socketTimeout": 45500, "localParams": []},
     {"url": "https://api.example.org/jobs/${id}", "httpMethod": "POST", "query": {"day": "${d}"},
      "body": {"name": "nightly"}, "bodyType": "json", "headers": {"Authorization": "Bearer ${token}"},
      "expectedStatus": [200], "timeoutSeconds": 46, "httpParams": None, "connectTimeout": None}),
    ("HTTP", {"url": "http://h/x", "httpMethod": "GET", "httpParams": [], "httpCheckCondition": "STATUS_CODE_CUSTOM",
              "condition": "201"},
     {"httpMethod": "GET", "expectedStatus": [201], "timeoutSeconds": 60, "query": None, "check": None}),
    ("HTTP", {"url": "http://h/x", "httpMethod": "PUT", "httpCheckCondition": "BODY_CONTAINS", "condition": "ok"},
     {"httpMethod": "PUT", "check": {"contains": "ok"}, "expectedStatus": None}),
    ("HTTP", {"url": "http://h/x", "httpMethod": "DELETE", "httpCheckCondition": "BODY_NOT_CONTAINS",
              "condition": "error", "httpBody": "{\"a\": 1}"},
     {"httpMethod": "DELETE", "check": {"not_contains": "error"}, "body": {"a": 1}, "bodyType": "json"}),
    ("PYTHON", {"rawScript": "print(1)", "dependence": {}, "conditionResult": {"successNode": [], "failedNode": []},
                "switchResult": {}, "waitStartTimeout": {}},
     {"rawScript": "print(1)"}),
]  # fmt: skip


@pytest.mark.parametrize(("task_type", "params", "expected"), PARAM_CASES)
def test_task_params(task_type: str, params: dict[str, Any], expected: dict[str, Any]) -> None:
    tr = ds.translate(_typed(task_type, params), "p", datasources={"3": "wh"})
    got = tr.documents[0]["tasks"][0]["params"]
    assert {k: got.get(k) for k in expected} == expected
    if task_type == "PYTHON":
        assert set(got) == {"rawScript"}


def test_logic_tasks_name_their_tasks() -> None:
    conditions = ds.translate(load("ds320_conditions-shell.json"), "p").documents[0]
    condi = next(t for t in conditions["tasks"] if t["name"] == "condi")
    assert condi["upstream"] == ["shell1", "shell2"]
    assert {k: condi["params"][k] for k in ("relation", "conditions", "success", "failure")} == {
        "relation": "AND",
        "conditions": [{"task": "shell1", "status": "SUCCESS"}, {"task": "shell2", "status": "FAILURE"}],
        "success": ["shell3"], "failure": ["shell4"],
    }  # fmt: skip
    dependent = ds.translate(load("ds320_dependent-shell-python-sql_schedule.json"), "p").documents[0]
    dep = next(t for t in dependent["tasks"] if t["type"] == "DEPENDENT")["params"]
    me = "依赖节点测试"
    assert dep["groups"] == [
        {"relation": "AND", "items": [{"workflow": me, "task": "shell节点", "cycle": "day", "date_value": "today"}]},
        {
            "relation": "AND",
            "items": [{"workflow": me, "task": "python节点", "cycle": "month", "date_value": "thisMonth"}],
        },
    ]
    assert (dep["relation"], dep["check_interval"], dep["failure_policy"]) == ("AND", 10, "FAIL")
    parent = ds.translate(load("ds320_subprocess-shell_schedules.json"), "p").documents[1]
    assert next(t for t in parent["tasks"] if t["type"] == "SUB_PROCESS")["params"]["workflow"] == "sub_process"
    known = {15866592686592: ds.WorkflowRef("other", "shell_x", {})}
    data = load("ds31_batch-export_shell-python-sql-subprocess.json")[3:]  # subprocess1 without its child
    sub = next(t for t in ds.translate(data, "p", known=known).documents[0]["tasks"] if t["type"] == "SUB_PROCESS")
    assert (sub["params"]["workflow"], sub["params"]["project"]) == ("shell_x", "other")
    with pytest.raises(ds.Unsupported, match="SUB_PROCESS workflow code 15866592686592"):
        ds.translate(data, "p")


def test_switch_cases_and_default() -> None:
    data = load("ds31_ui-export_switch.json")
    cases = data[0]["taskDefinitionList"][2]["taskParams"]["switchResult"]["dependTaskList"]
    cases[0]["condition"], cases[1]["condition"] = "${test} == 1 || ${test} == 3", "!(${test} == 1)"
    switch = ds.translate(data, "p").documents[0]["tasks"][2]
    assert switch["params"]["cases"] == [
        {"condition": "${test} == 1 or ${test} == 3", "next": "switch_shell1"},
        {"condition": "not (${test} == 1)", "next": "switch_shell2"},
    ]
    assert switch["params"]["default"] == "switch_shell1"
    # an untranslatable condition, skipped: it fails at run time as in DolphinScheduler, the original is kept
    skipped = ds.translate(load("ds31_ui-export_switch.json"), "p", skip_unsupported=True).documents[0]["tasks"][2]
    assert skipped["params"]["cases"][0] == {"condition": ds.UNTRANSLATED, "next": "switch_shell1",
                                             "dolphinscheduler": "if $test==1"}  # fmt: skip
    assert "[porpoise: imported with gaps" in skipped["description"]


@pytest.mark.parametrize(
    ("task_type", "params", "detail"),
    [
        ("SQL", {"type": "ORACLE", "datasource": 3, "sql": "select 1 from dual"}, "SQL (data source type ORACLE)"),
        ("PROCEDURE", {"type": "HIVE", "datasource": 3, "method": "call p()"}, "PROCEDURE (data source type HIVE)"),
        (
            "HTTP",
            {"url": "http://h/", "httpCheckCondition": "STATUS_CODE_CUSTOM", "condition": "ok"},
            "STATUS_CODE_CUSTOM condition 'ok' is not a status code",
        ),
        (
            "HTTP",
            {"url": "http://h/", "httpParams": [{"prop": "a", "httpParametersType": "COOKIE", "value": "1"}]},
            "httpParams entry {'prop': 'a', 'httpParametersType': 'COOKIE', 'value': '1'}: not a PARAMETER, BODY or "
            "HEADERS",
        ),
    ],
)
def test_what_has_no_counterpart_is_a_fatal_gap(task_type: str, params: dict[str, Any], detail: str) -> None:
    with pytest.raises(ds.Unsupported) as refused:
        ds.translate(_typed(task_type, params), "p", datasources={"3": "wh"})
    assert [(g.task, g.detail) for g in refused.value.gaps] == [("t", detail)]


def test_task_groups_environments_and_result_mail_are_notes_naming_what_to_set() -> None:
    sql = {"type": "MYSQL", "datasource": 3, "sql": "select 1", "sqlType": "0", "sendEmail": True, "groupId": 5,
           "title": "rows"}  # fmt: skip
    tr = ds.translate(_typed("SQL", sql, taskGroupId=7, taskGroupPriority=2, environmentCode=1234), "p")
    task = tr.documents[0]["tasks"][0]
    assert "sendEmail" not in task["params"] and "groupId" not in task["params"] and task["params"]["title"] == "rows"
    assert "task_group" not in task
    notes = sorted(g.detail for g in tr.gaps if g.kind == ds.NOTE)
    assert notes == [
        "environmentCode 1234 not kept (environment codes differ here)",
        "sendEmail to alert group 5 not kept (alert group ids differ here): set sendEmail and groupId to a Porpoise"
        " alert group",
        "taskGroupId 7 (taskGroupPriority 2) not kept (task group ids differ here: set the task's task_group and "
        "task_group_priority)",
    ]
    plain = ds.translate(_typed("SQL", {**sql, "sendEmail": False}, taskGroupId=0, environmentCode=-1), "p")
    assert [g for g in plain.gaps if g.kind == ds.NOTE] == []


@pytest.mark.parametrize(
    ("task_type", "params"),
    [
        (
            "HTTP",
            {"url": "https://x/${id}", "httpMethod": "POST", "httpCheckCondition": "STATUS_CODE_CUSTOM",
             "condition": "202", "connectTimeout": 5000, "socketTimeout": 7000, "httpParams": [
                 {"prop": "q", "httpParametersType": "PARAMETER", "value": "1"},
                 {"prop": "b", "httpParametersType": "BODY", "value": "${v}"},
                 {"prop": "X-Token", "httpParametersType": "HEADERS", "value": "${t}"}]},
        ),
        ("HTTP", {"url": "http://h/", "httpCheckCondition": "BODY_NOT_CONTAINS", "condition": "FAILED"}),
        ("HTTP", {"url": "http://h/", "httpMethod": "PUT", "httpBody": "raw text"}),
        ("HTTP", {"url": "http://h/", "httpMethod": "POST", "httpBody": '{"a": {"b": [1, true]}}'}),
        ("PROCEDURE", {"type": "MYSQL", "datasource": 1, "method": "call p(${a})",
                       "localParams": [{"prop": "a", "direct": "OUT", "type": "INTEGER", "value": ""}]}),
        ("SQL", {"type": "HIVE", "datasource": 1, "sql": "select 1", "sqlType": "0", "title": "t", "displayRows": 10,
                 "preStatements": [], "postStatements": []}),
    ],
)  # fmt: skip
def test_http_procedure_and_typed_sql_export_and_import_back_the_same(task_type: str, params: dict[str, Any]) -> None:
    params = {"localParams": [], "resourceList": [], **params}  # what every export has
    first = ds.translate(_typed(task_type, params), "imp", datasources={"1": "warehouse"})
    refs = _codes(first, "imp")
    exported = [export(d, refs[("imp", d["name"])], refs) for d in first.documents]
    assert exported[0]["taskDefinitionList"][0]["taskType"] == task_type
    second = ds.translate(json.loads(json.dumps(exported)), "imp", datasources={"1": "warehouse"})
    assert second.documents == first.documents
    if task_type == "HTTP":
        back = exported[0]["taskDefinitionList"][0]["taskParams"]
        for key in ("httpCheckCondition", "condition", "httpParams", "httpBody"):
            if key in params:
                assert back[key] == params[key]
        if "connectTimeout" in params:
            assert back["connectTimeout"] == back["socketTimeout"] == 7000


def test_a_resource_list_becomes_resource_center_paths() -> None:
    params = {
        "rawScript": "bash etl/a.sh",
        "localParams": [],
        "resourceList": [
            {"id": 3, "resourceName": "hdfs://ns/dolphinscheduler/etl/resources/etl/a.sh"},  # 3.2: storage path
            {"id": 4, "res": "b.py", "fullName": "/lib/b.py"},  # 3.1: full name
            {"id": 9},  # 3.1: an id alone cannot be mapped
        ],
    }
    tr = ds.translate(_typed("SHELL", params), "p")
    task = tr.documents[0]["tasks"][0]
    assert task["params"]["resourceList"] == [{"resourceName": "etl/a.sh"}, {"resourceName": "lib/b.py"}]
    notes = [g.detail for g in tr.gaps if g.task == "t" and not g.fatal]
    assert any("etl/a.sh, lib/b.py come from the project's resource center" in n for n in notes), notes
    assert any("{'id': 9}" in n and "not kept" in n for n in notes), notes
    document.parse(tr.documents[0])  # the server's checks accept it
    # an empty list (what every export has) leaves nothing
    assert (
        "resourceList"
        not in ds.translate(_typed("SHELL", {**params, "resourceList": []}), "p").documents[0]["tasks"][0]["params"]
    )
