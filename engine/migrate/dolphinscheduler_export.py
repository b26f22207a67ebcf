"""Porpoise workflow documents -> DolphinScheduler's export JSON (the reverse of dolphinscheduler.py).

The output has the 3.1 shape (``processDefinition``, ``processTaskRelationList``,
``taskDefinitionList``, ``schedule``), which DolphinScheduler 3.0 - 3.2 import and
:func:`engine.migrate.dolphinscheduler.translate` reads back to the same documents. Codes are
Porpoise's definition codes; names of other workflows (SUB_PROCESS, DEPENDENT) become their codes
through ``refs``. A placeholder of an unsupported task is written back as the original task.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from core.errors import InvalidInput
from engine.migrate.ds_common import ORIGINAL, expression_to_js, format_time

_FAILURE_POLICY = {"FAIL": "DEPENDENT_FAILURE_FAILURE", "WAIT": "DEPENDENT_FAILURE_WAITING"}
_DEPENDENT_KEYS = ("relation", "groups", "items", "check_interval", "failure_policy", "failure_waiting_time")


@dataclass(frozen=True)
class Codes:
    """A stored workflow's codes: its own, its project's, and its tasks' (name -> code)."""

    code: int
    project_code: int
    tasks: Mapping[str, int] = field(default_factory=dict)
    version: int = 1


class ExportError(InvalidInput):
    """A reference that cannot be written as a code (the workflow it names does not exist)."""


def _ref(refs: Mapping[tuple[str, str], Codes], by_code: Mapping[int, Codes], item: Mapping[str, Any],
         project: str) -> tuple[Codes | None, int]:  # fmt: skip
    if isinstance(item.get("workflow_code"), int):
        return by_code.get(item["workflow_code"]), item["workflow_code"]
    found = refs.get((item.get("project") or project, item["workflow"]))
    if found is None:
        raise ExportError(f"workflow {item.get('project') or project}/{item['workflow']} does not exist")
    return found, found.code


def _params(
    task: Mapping[str, Any], codes: Codes, refs: Mapping[tuple[str, str], Codes], project: str
) -> tuple[str, dict[str, Any]]:
    """(DolphinScheduler task type, taskParams) of a document task."""
    p = dict(task.get("params") or {})
    kind = task["type"]
    by_code = {c.code: c for c in refs.values()}
    if ORIGINAL in p and isinstance(p[ORIGINAL], Mapping) and "taskType" in p[ORIGINAL]:
        return p[ORIGINAL]["taskType"], dict(p[ORIGINAL].get("taskParams") or {})
    p.setdefault("localParams", [])
    p.setdefault("resourceList", [])
    if kind in ("SQL", "PROCEDURE"):
        name = p.pop("datasource")
        ident = p.pop("datasourceId", None)
        p["datasource"] = ident if ident is not None else (int(name) if str(name).isdigit() else name)
        p["type"] = p.get("type") or "POSTGRESQL"
    if kind == "HTTP":
        p = _http(p)
    elif kind == "SQL":
        p["sqlType"] = "1" if p.pop("sqlType", "query") == "non_query" else "0"
        p["displayRows"] = p.pop("maxRows", 10)
        p.setdefault("preStatements", [])
        p.setdefault("postStatements", [])
    elif kind == "SPARK":
        master, mode = p.pop("master", "local[*]"), p.pop("deployMode", "client")
        p["deployMode"] = "local" if master.startswith("local") else mode
        if "sql" in p:
            p["rawScript"] = p.pop("sql")
        if "mainFile" in p:
            p["mainJar"] = {"resourceName": p.pop("mainFile")}
        elif isinstance(p.get("mainJar"), str):
            p["mainJar"] = {"resourceName": p["mainJar"]}
        p.setdefault("programType", "PYTHON")
    elif kind == "MR":
        if isinstance(p.get("mainJar"), str):
            p["mainJar"] = {"resourceName": p["mainJar"]}
        p.setdefault("programType", "JAVA")
    elif kind == "SUB_PROCESS":
        _, code = _ref(refs, by_code, p, project)
        p = {k: v for k, v in p.items() if k not in ("workflow", "project", "workflow_code")}
        p["processDefinitionCode"] = code
    elif kind == "DEPENDENT":
        p = _dependent(p, refs, by_code, project)
    elif kind == "CONDITIONS":
        relation = p.pop("relation", "AND")
        items = [{"depTaskCode": codes.tasks[c["task"]], "status": c.get("status", "SUCCESS")}
                 for c in p.pop("conditions")]  # fmt: skip
        p["dependence"] = {"relation": relation, "dependTaskList": [{"relation": relation, "dependItemList": items}]}
        p["conditionResult"] = {
            "successNode": [codes.tasks[n] for n in p.pop("success", [])],
            "failedNode": [codes.tasks[n] for n in p.pop("failure", [])],
        }
    elif kind == "SWITCH":
        cases = [
            {"condition": c.get(ORIGINAL) or expression_to_js(c["condition"]), "nextNode": codes.tasks[c["next"]]}
            for c in p.pop("cases")
        ]
        default = p.pop("default", None)
        p["switchResult"] = {"dependTaskList": cases, "nextNode": codes.tasks[default] if default else None}
    return kind, p


def _http(p: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in p.items() if k not in ("query", "headers", "body", "bodyType", "expectedStatus",
                                                   "check", "timeoutSeconds")}  # fmt: skip
    out["httpMethod"] = str(p.get("httpMethod") or "GET").upper()
    entries = []
    body = p.get("body")
    flat = isinstance(body, Mapping) and all(isinstance(v, str) for v in body.values())
    for key, kind in (("query", "PARAMETER"), ("body", "BODY"), ("headers", "HEADERS")):
        value = p.get(key)
        if isinstance(value, Mapping) and (key != "body" or flat):
            entries += [{"prop": k, "httpParametersType": kind, "value": str(v)} for k, v in value.items()]
    if body is not None and not flat:  # text, a list, or an object with values other than strings
        out["httpBody"] = body if isinstance(body, str) else json.dumps(body)
    out["httpParams"] = entries
    check, expected = p.get("check") or {}, p.get("expectedStatus") or []
    if "contains" in check:
        out.update(httpCheckCondition="BODY_CONTAINS", condition=check["contains"])
    elif "not_contains" in check:
        out.update(httpCheckCondition="BODY_NOT_CONTAINS", condition=check["not_contains"])
    elif expected and expected != [200]:
        out.update(httpCheckCondition="STATUS_CODE_CUSTOM", condition=str(expected[0]))
    else:
        out.update(httpCheckCondition="STATUS_CODE_DEFAULT", condition="")
    timeout_ms = int(float(p.get("timeoutSeconds", 60)) * 1000)
    out.update(connectTimeout=timeout_ms, socketTimeout=timeout_ms)
    return out


def _dependent(p: dict[str, Any], refs: Mapping[tuple[str, str], Codes], by_code: Mapping[int, Codes],
               project: str) -> dict[str, Any]:  # fmt: skip
    from engine.scheduling.dependent import DATE_VALUES, groups

    out = {k: v for k, v in p.items() if k not in _DEPENDENT_KEYS}
    task_list = []
    for relation, items in groups(p):
        dep_items = []
        for item in items:
            found, code = _ref(refs, by_code, item, project)
            task_code = int(item.get("task_code") or 0)
            if item.get("task"):
                if found is None or item["task"] not in found.tasks:
                    raise ExportError(f"task {item['task']!r} of workflow {item.get('workflow', code)} does not exist")
                task_code = found.tasks[item["task"]]
            dep_items.append({
                "projectCode": found.project_code if found else 0, "definitionCode": code, "depTaskCode": task_code,
                "cycle": item.get("cycle") or DATE_VALUES[item["date_value"]], "dateValue": item["date_value"],
            })  # fmt: skip
        task_list.append({"relation": relation, "dependItemList": dep_items})
    dep: dict[str, Any] = {"relation": p.get("relation", "AND"), "dependTaskList": task_list}
    dep["checkInterval"] = p.get("check_interval", 10)
    dep["failurePolicy"] = _FAILURE_POLICY[p.get("failure_policy", "FAIL")]
    if "failure_waiting_time" in p:
        dep["failureWaitingTime"] = p["failure_waiting_time"]
    out["dependence"] = dep
    return out


def _task(task: Mapping[str, Any], codes: Codes, refs: Mapping[tuple[str, str], Codes], project: str) -> dict[str, Any]:
    kind, params = _params(task, codes, refs, project)
    timeout = int(task.get("timeout") or 0)
    return {
        "code": codes.tasks[task["name"]], "name": task["name"], "version": codes.version,
        "description": task.get("description", ""), "projectCode": codes.project_code, "taskType": kind,
        "taskParams": params, "flag": "NO" if task.get("disabled") else "YES",
        "taskPriority": task.get("priority", "MEDIUM"), "workerGroup": task.get("worker_group", "default"),
        "environmentCode": -1, "failRetryTimes": int(task.get("retries") or 0),
        "failRetryInterval": int(task.get("retry_interval", 1)), "timeoutFlag": "OPEN" if timeout else "CLOSE",
        "timeoutNotifyStrategy": task.get("timeout_strategy", "WARN") if timeout else None, "timeout": timeout,
        "delayTime": int(task.get("delay_time") or 0), "resourceIds": "", "taskGroupId": 0, "taskGroupPriority": 0,
        "cpuQuota": -1, "memoryMax": -1, "taskExecuteType": "BATCH",
    }  # fmt: skip


def _locations(tasks: list[Mapping[str, Any]], codes: Codes) -> str:
    """Positions for DolphinScheduler's DAG editor: one column per depth."""
    depth: dict[str, int] = {}
    for t in tasks:  # documents list tasks in dependency order
        ups = t.get("upstream") or []
        depth[t["name"]] = 1 + max((depth.get(u, 0) for u in ([ups] if isinstance(ups, str) else ups)), default=-1)
    rows: dict[int, int] = {}
    out = []
    for t in tasks:
        d = depth[t["name"]]
        rows[d] = rows.get(d, 0) + 1
        out.append({"taskCode": codes.tasks[t["name"]], "x": 80 + 240 * d, "y": 60 + 100 * (rows[d] - 1)})
    return json.dumps(out)


def _schedule(s: Mapping[str, Any], codes: Codes, name: str) -> dict[str, Any]:
    tz = s.get("timezone") or "UTC"
    end = s.get("end_time") or dt.datetime(2124, 1, 1, tzinfo=dt.UTC)
    return {
        "processDefinitionCode": codes.code, "processDefinitionName": name,
        "startTime": format_time(s["start_time"], tz), "endTime": format_time(end, tz), "timezoneId": tz,
        "crontab": s["crontab"], "failureStrategy": s.get("failure_strategy", "END"),
        "warningType": s.get("warning_type", "NONE"), "releaseState": "OFFLINE", "warningGroupId": 0,
        "processInstancePriority": s.get("priority", "MEDIUM"), "workerGroup": s.get("worker_group", "default"),
        "environmentCode": -1,
    }  # fmt: skip


def export(
    doc: Mapping[str, Any],
    codes: Codes,
    refs: Mapping[tuple[str, str], Codes],
    schedule: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One workflow as DolphinScheduler's ``DagDataSchedule``. ``schedule`` has the fields of the
    schedules API (start_time / end_time as datetimes). ExportError for a reference to nothing."""
    project = doc["project"]
    tasks = list(doc["tasks"])
    params = [{"prop": p["prop"], "direct": p.get("direct", "IN"), "type": p.get("type", "VARCHAR"),
               "value": p.get("value", "")} for p in (doc.get("params") or [])]  # fmt: skip
    definition = {
        "code": codes.code, "name": doc["name"], "version": codes.version, "description": doc.get("description", ""),
        "projectCode": codes.project_code, "projectName": project, "releaseState": "OFFLINE",
        "globalParams": json.dumps(params), "globalParamList": params, "flag": "YES",
        "locations": _locations(tasks, codes), "timeout": int(doc.get("timeout") or 0), "warningGroupId": 0,
        "executionType": doc.get("execution_type", "PARALLEL"), "tenantCode": doc.get("tenant", "default"),
    }  # fmt: skip
    relations = []
    for t in tasks:
        ups = t.get("upstream") or []
        for up in [ups] if isinstance(ups, str) else ups or [None]:
            relations.append({
                "name": "", "processDefinitionCode": codes.code, "processDefinitionVersion": codes.version,
                "projectCode": codes.project_code, "preTaskCode": codes.tasks[up] if up else 0,
                "preTaskVersion": codes.version if up else 0, "postTaskCode": codes.tasks[t["name"]],
                "postTaskVersion": codes.version, "conditionType": "NONE", "conditionParams": {},
            })  # fmt: skip
    return {
        "processDefinition": definition,
        "processTaskRelationList": relations,
        "taskDefinitionList": [_task(t, codes, refs, project) for t in tasks],
        "schedule": _schedule(schedule, codes, doc["name"]) if schedule else None,
    }
