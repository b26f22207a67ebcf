"""DolphinScheduler 3.0 - 3.2 export JSON -> Porpoise workflow documents, schedules and a report of gaps.

The input is what DolphinScheduler's "export" writes: a list of ``{processDefinition,
processTaskRelationList, taskDefinitionList, schedule}`` (3.3's ``workflowDefinition`` /
``workflowTaskRelationList`` are read too). :func:`translate` is pure: the caller (the API) passes the
workflows outside the file that references may name (``known``) and the data-source names to use, and
saves the result (engine/api/migrate.py). The reverse is engine/migrate/dolphinscheduler_export.py.

What maps to what:

- workflow: name, description, global params (verbatim, placeholders included), timeout, tenant;
- task: type, params (per type below), upstream (from the relations; ``conditionType`` JUDGE / DELAY
  edges are upstream edges too), retries / retry interval, timeout (only when ``timeoutFlag`` is
  OPEN) and its strategy, delay, priority, worker group, description, ``flag: NO`` -> disabled;
- SHELL / PYTHON: verbatim. SQL: the data source id becomes a Porpoise data source name (``datasources`` maps
  ``"<id>"`` to a name, default the id itself), ``type`` kept (POSTGRESQL, MYSQL, HIVE, CLICKHOUSE; any other
  type has no driver here), ``sqlType`` 0/1 -> query/non_query, ``displayRows`` -> ``maxRows``, ``title``
  kept, ``sendEmail`` / ``groupId`` a note (alert group ids differ). PROCEDURE: the data source as for SQL
  (POSTGRESQL or MYSQL), ``method`` and ``localParams`` verbatim. HTTP: ``httpParams`` PARAMETER -> ``query``,
  BODY -> a JSON ``body``, HEADERS -> ``headers``, ``httpBody`` -> the body (JSON when it parses);
  ``httpCheckCondition`` STATUS_CODE_DEFAULT -> ``expectedStatus: [200]``, STATUS_CODE_CUSTOM ->
  ``[condition]``, BODY_CONTAINS / BODY_NOT_CONTAINS -> ``check: {contains | not_contains: condition}``;
  ``connectTimeout`` / ``socketTimeout`` (ms) -> the larger, in seconds, as ``timeoutSeconds``. SPARK: PYTHON,
  SQL, JAVA and SCALA programs (``deployMode: local`` -> master ``local[*]``, client/cluster -> ``yarn``; a
  jar's ``mainJar.resourceName`` -> ``mainJar``). MR: the same parameters (``mainJar.resourceName`` ->
  ``mainJar``, 3.1's ``queue`` -> ``yarnQueue``); a jar named only by a resource id (3.1) is an unresolved
  reference.
- SUB_PROCESS / DEPENDENT: definition and task codes become names (the file's workflows, else the
  ``known`` ones); CONDITIONS / SWITCH: task codes become task names, SWITCH conditions are translated
  (ds_common). Schedules: Quartz crontab, time zone, start / end, failure strategy, warning type,
  priority, worker group; they are created offline, as DolphinScheduler's export leaves them.

Nothing is dropped silently: a task type Porpoise lacks, a reference nothing resolves, and a construct
the document cannot hold are *fatal* gaps (:class:`Unsupported` lists them all); with
``skip_unsupported`` the rest is imported, an unsupported task becomes a SHELL placeholder that fails
and keeps the original under ``params.dolphinscheduler``, and workflow and task descriptions say so.
Fields that have no meaning here (alert group ids, environment codes, task group ids and priorities,
resources) are *notes*: reported, never fatal.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from core.errors import InvalidInput
from engine.migrate.ds_common import (
    HTTP_PARAM_KINDS,
    ORIGINAL,
    PROCEDURE_TYPES,
    SOURCE_TYPES,
    SUPPORTED,
    js_to_expression,
    mark,
    parse_time,
    placeholder_script,
    workflow_part,
)
from engine.resources.refs import ResourceNameError, check_name, from_storage_path
from engine.workflows import document, logic
from engine.workflows.model import DefinitionError

UNSUPPORTED_TYPE, UNRESOLVED, NOT_REPRESENTABLE, NOTE = "unsupported_type", "unresolved_reference", "construct", "note"
_FAILURE_POLICY = {"DEPENDENT_FAILURE_FAILURE": "FAIL", "DEPENDENT_FAILURE_WAITING": "WAIT"}
#: a SWITCH condition that could not be translated: an unknown parameter, so the task fails at run time
UNTRANSLATED = "${dolphinscheduler_condition_not_translated}"
_LOGIC_NOISE = ("dependence", "conditionResult", "switchResult", "waitStartTimeout")


@dataclass(frozen=True)
class Gap:
    workflow: str
    task: str | None
    kind: str
    detail: str

    @property
    def fatal(self) -> bool:
        return self.kind != NOTE

    def as_dict(self) -> dict[str, Any]:
        return {"workflow": self.workflow, "task": self.task, "kind": self.kind, "detail": self.detail}


@dataclass(frozen=True)
class WorkflowRef:
    """A workflow outside the file that a SUB_PROCESS or DEPENDENT task may name by code."""

    project: str
    name: str
    #: task code -> task name
    tasks: Mapping[int, str] = field(default_factory=dict)


@dataclass
class Translation:
    documents: list[dict[str, Any]]
    #: workflow name -> body of POST /api/v1/schedules (without workflow_code)
    schedules: dict[str, dict[str, Any]]
    gaps: list[Gap]
    #: Porpoise data-source name -> the "workflow/task" names of the SQL tasks that use it
    datasources: dict[str, list[str]]


class Unsupported(InvalidInput):
    """The file holds fatal gaps; nothing may be imported unless they are skipped."""

    def __init__(self, gaps: list[Gap]) -> None:
        self.gaps = gaps
        kinds = sorted({f"{g.detail}" for g in gaps if g.kind == UNSUPPORTED_TYPE})
        text = "; ".join(f"{g.workflow}/{g.task or '-'}: {g.detail}" for g in gaps)
        super().__init__(("unsupported: " + ", ".join(kinds) + ". " if kinds else "") + text)


def _load(data: Any) -> list[Mapping[str, Any]]:
    items = [data] if isinstance(data, Mapping) else data
    if not isinstance(items, list) or not items:
        raise DefinitionError("file", "expected DolphinScheduler's export: a list of workflows")
    for i, item in enumerate(items):
        definition, relations = workflow_part(item) if isinstance(item, Mapping) else (None, None)
        if not isinstance(definition, Mapping):
            raise DefinitionError(f"[{i}].processDefinition", "is required (is this a DolphinScheduler export?)")
        if not isinstance(definition.get("name"), str) or not isinstance(definition.get("code"), int):
            raise DefinitionError(f"[{i}].processDefinition", "needs a name and a code")
        tasks = item.get("taskDefinitionList")
        if not isinstance(tasks, list) or not tasks:
            raise DefinitionError(f"[{i}].taskDefinitionList", "needs at least one task")
        if not isinstance(relations, list) or not relations:
            raise DefinitionError(f"[{i}].processTaskRelationList", "needs at least one relation")
        for j, t in enumerate(tasks):
            ok = isinstance(t, Mapping) and isinstance(t.get("code"), int) and isinstance(t.get("name"), str)
            if not ok or not isinstance(t.get("taskType"), str):
                raise DefinitionError(f"[{i}].taskDefinitionList[{j}]", "needs code, name and taskType")
            if not isinstance(t.get("taskParams", {}), Mapping | str):
                raise DefinitionError(f"[{i}].taskDefinitionList[{j}].taskParams", "must be an object")
    return items


def _params(task: Mapping[str, Any]) -> dict[str, Any]:
    raw = task.get("taskParams") or {}
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        value = None
    if not isinstance(value, Mapping):
        raise DefinitionError(f"task {task['name']!r}.taskParams", "must be a JSON object")
    return dict(value)


def _dep_task_code(value: Any, task: str) -> int:
    """A DEPENDENT item's ``depTaskCode`` (0 or missing: the whole workflow)."""
    if value is None or value == "":
        return 0
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit() and len(value) <= 20:
        return int(value)
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:40] + "..."
    raise DefinitionError(f"task {task!r}.taskParams.dependence.depTaskCode", f"must be a task code, got {shown}")


def _task_refs(params: Mapping[str, Any], task_type: str, task: str) -> Iterable[tuple[int, int]]:
    """(workflow code, task code or 0) that a SUB_PROCESS / DEPENDENT task names."""
    if task_type == "SUB_PROCESS" and isinstance(params.get("processDefinitionCode"), int):
        yield params["processDefinitionCode"], 0
    dependence = params.get("dependence") if task_type == "DEPENDENT" else None
    groups = dependence.get("dependTaskList") if isinstance(dependence, Mapping) else None
    for group in groups if isinstance(groups, list) else []:
        items = group.get("dependItemList") if isinstance(group, Mapping) else None
        for item in items if isinstance(items, list) else []:
            if isinstance(item, Mapping) and isinstance(item.get("definitionCode"), int):
                yield item["definitionCode"], _dep_task_code(item.get("depTaskCode"), task)


def referenced_codes(data: Any) -> set[int]:
    """Workflow codes SUB_PROCESS / DEPENDENT tasks name that the file does not define."""
    items = _load(data)
    defined = {workflow_part(i)[0]["code"] for i in items}
    found = set()
    for item in items:
        for t in item["taskDefinitionList"]:
            found.update(code for code, _ in _task_refs(_params(t), t["taskType"], t["name"]))
    return found - defined


class _Workflow:
    """Translation of one exported workflow (state: its gaps and task names)."""

    def __init__(self, tr: _Translator, item: Mapping[str, Any]) -> None:
        self.tr = tr
        self.definition, self.relations = workflow_part(item)
        self.name: str = self.definition["name"]
        self.tasks: list[Mapping[str, Any]] = item["taskDefinitionList"]
        self.names = {t["code"]: t["name"] for t in self.tasks}
        self.schedule = item.get("schedule")

    def gap(self, task: str | None, kind: str, detail: str) -> None:
        self.tr.gaps.append(Gap(self.name, task, kind, detail))

    def task_name(self, code: Any, task: str, where: str) -> str | None:
        name = self.names.get(code) if isinstance(code, int) else None
        if name is None:
            self.gap(task, NOT_REPRESENTABLE, f"{where} names task code {code!r}, not a task of this workflow")
        return name

    def document(self) -> dict[str, Any]:
        d = self.definition
        upstream: dict[int, list[str]] = {t["code"]: [] for t in self.tasks}
        for r in self.relations:
            pre, post = r.get("preTaskCode") or 0, r.get("postTaskCode")
            if post not in upstream or (pre and pre not in self.names):
                self.gap(None, NOT_REPRESENTABLE, f"relation {pre} -> {post} names a task not in the workflow")
                continue
            if pre and self.names[pre] not in upstream[post]:
                upstream[post].append(self.names[pre])
            if r.get("conditionParams") not in (None, {}, "", "{}"):
                self.gap(self.names[post], NOTE, f"relation conditionParams {r['conditionParams']!r} not kept")
        tasks = [self.task(t, upstream[t["code"]]) for t in self.tasks]
        doc: dict[str, Any] = {"name": self.name, "project": self.tr.project}
        description = d.get("description") or ""
        skipped = sorted(f"{t['name']} ({t['params'][ORIGINAL]['taskType']})" for t in tasks if ORIGINAL in t["params"])
        if skipped:
            description = mark(
                description, "imported with unsupported tasks as failing placeholders: " + ", ".join(skipped)
            )
        if description:
            doc["description"] = description
        tenant = d.get("tenantCode") or (self.schedule or {}).get("tenantCode") or "default"
        doc.update(timeout=int(d.get("timeout") or 0), tenant=tenant, params=self.global_params(), tasks=tasks)
        execution = d.get("executionType")
        if execution in ("SERIAL_WAIT", "SERIAL_DISCARD", "SERIAL_PRIORITY"):
            doc["execution_type"] = execution
        elif execution not in (None, "PARALLEL"):
            self.gap(None, NOTE, f"executionType {execution!r} not kept (runs in parallel)")
        if d.get("warningGroupId"):
            self.gap(None, NOTE, f"warningGroupId {d['warningGroupId']} not kept (alert group ids differ here)")
        return doc

    def global_params(self) -> list[dict[str, Any]]:
        raw = self.definition.get("globalParams") or self.definition.get("globalParamList") or []
        if isinstance(raw, str):
            try:
                raw = json.loads(raw) if raw.strip() else []
            except ValueError:
                self.gap(None, NOT_REPRESENTABLE, f"globalParams is not JSON: {raw[:80]!r}")
                raw = []
        out = []
        for p in raw:
            item = {"prop": p["prop"], "value": "" if p.get("value") is None else p["value"]}
            item.update(direct=p.get("direct") or "IN", type=p.get("type") or "VARCHAR")
            out.append(item)
        return out

    def task(self, t: Mapping[str, Any], upstream: list[str]) -> dict[str, Any]:
        name, task_type = t["name"], t["taskType"]
        params = _params(t)
        converted = self.params(name, task_type, params)
        description = t.get("description") or ""
        if converted is None:
            converted = {
                "rawScript": placeholder_script(task_type),
                ORIGINAL: {"taskType": task_type, "taskParams": params},
            }
            description = mark(description, f"unsupported DolphinScheduler task type {task_type}: failing placeholder")
            task_type = "SHELL"
        item: dict[str, Any] = {"name": name, "type": task_type, "params": converted}
        if upstream:
            item["upstream"] = upstream
        timeout = int(t.get("timeout") or 0) if t.get("timeoutFlag") == "OPEN" else 0
        item.update(
            retries=int(t.get("failRetryTimes") or 0),
            retry_interval=int(t.get("failRetryInterval") if t.get("failRetryInterval") is not None else 1),
            timeout=timeout,
            priority=t.get("taskPriority") or "MEDIUM",
            worker_group=t.get("workerGroup") or "default",
            delay_time=int(t.get("delayTime") or 0),
        )
        if timeout:
            item["timeout_strategy"] = t.get("timeoutNotifyStrategy") or "WARN"
        if description:
            item["description"] = description
        if t.get("flag") == "NO":  # switched off but kept in the graph
            item["disabled"] = True
        self.notes(t)
        return item

    def notes(self, t: Mapping[str, Any]) -> None:
        if t.get("environmentCode") not in (None, -1):
            self.gap(
                t["name"], NOTE, f"environmentCode {t['environmentCode']!r} not kept (environment codes differ here)"
            )
        if t.get("taskGroupId") not in (None, 0, -1):
            self.gap(t["name"], NOTE, f"taskGroupId {t['taskGroupId']!r} (taskGroupPriority "
                     f"{t.get('taskGroupPriority') or 0}) not kept (task group ids differ here: set the task's "
                     "task_group and task_group_priority)")  # fmt: skip
        for key, default, why in (
            ("cpuQuota", -1, "no CPU quota here"),
            ("memoryMax", -1, "no memory limit here"),
            ("isCache", "NO", "no task cache here"),
        ):
            if t.get(key) not in (None, default):
                self.gap(t["name"], NOTE, f"{key} {t[key]!r} not kept ({why})")
        if t.get("taskExecuteType") not in (None, "BATCH"):
            self.gap(t["name"], NOTE, f"taskExecuteType {t['taskExecuteType']} not kept (runs as a batch task)")

    def params(self, task: str, task_type: str, p: dict[str, Any]) -> dict[str, Any] | None:
        """Porpoise params of a task, or None when the type (or its variant) is unsupported."""
        if task_type not in SUPPORTED:
            self.gap(task, UNSUPPORTED_TYPE, task_type)
            return None
        listed = self._resource_list(task, p.get("resourceList"))
        if task_type in ("SHELL", "PYTHON"):
            out = {k: v for k, v in p.items() if not (k in _LOGIC_NOISE and _empty(v)) and k != "resourceList"}
        else:
            out = getattr(self, "_" + task_type.lower())(task, p)
            if out is None:
                return None
            out.pop("resourceList", None)
        if listed:
            out["resourceList"] = listed
        return out

    def _resource_list(self, task: str, entries: Any) -> list[dict[str, Any]]:
        """DolphinScheduler's ``resourceList`` as resource-center paths (``{"resourceName": "etl/a.sh"}``: the
        part of a storage path after ``resources/``). Saving pins each to the newest version the project's
        resource center holds; one not uploaded yet is used as ``latest`` (the newest when a run starts). A 3.1
        entry with only an id cannot be mapped."""
        if not entries:
            return []
        if not isinstance(entries, list):
            self.gap(task, NOTE, f"resourceList {entries!r} is not a list: not kept")
            return []
        out, dropped = [], []
        for entry in entries:
            raw = entry if isinstance(entry, str) else None
            if isinstance(entry, Mapping):
                raw = entry.get("resourceName") or entry.get("fullName") or entry.get("res")
            name = from_storage_path(raw) if isinstance(raw, str) and raw.strip() else ""
            try:
                out.append({"resourceName": check_name(name)})
            except ResourceNameError:
                dropped.append(entry)
        if out:
            names = ", ".join(e["resourceName"] for e in out)
            self.gap(task, NOTE, f"resourceList: {names} come from the project's resource center (porpoise"
                                 " resource upload); pinned to the versions stored at import, else the newest"
                                 " at run time")  # fmt: skip
        if dropped:
            self.gap(task, NOTE, f"resourceList entries {dropped!r} name no file by path (a resource id cannot be"
                                 " resolved here): not kept")  # fmt: skip
        return out

    def _source(self, task: str, task_type: str, p: Mapping[str, Any], out: dict[str, Any]) -> bool:
        """Set ``out``'s data source (the id's Porpoise name) and ``type``; False after a gap for a type that
        has no driver here."""
        source = str(p.get("datasource"))
        name = self.tr.datasources.get(source, source)
        out["datasource"] = name
        if name != source:
            out["datasourceId"] = p.get("datasource")
        self.tr.used_sources.setdefault(name, []).append(f"{self.name}/{task}")
        kind = str(p.get("type") or "POSTGRESQL").upper()
        allowed = PROCEDURE_TYPES if task_type == "PROCEDURE" else SOURCE_TYPES
        if kind not in allowed:
            self.gap(task, UNSUPPORTED_TYPE, f"{task_type} (data source type {kind})")
            return False
        out["type"] = kind
        return True

    def _sql(self, task: str, p: dict[str, Any]) -> dict[str, Any] | None:
        drop = ("datasource", "sqlType", "displayRows", "sendEmail", "groupId", "title")
        out = {k: v for k, v in p.items() if k not in drop}
        if not self._source(task, "SQL", p, out):
            return None
        out["sqlType"] = "non_query" if str(p.get("sqlType", "0")) == "1" else "query"
        if p.get("displayRows") is not None:
            out["maxRows"] = int(p["displayRows"])
        if p.get("segmentSeparator"):
            self.gap(task, NOTE, f"segmentSeparator {p['segmentSeparator']!r}: the sql runs as one script here")
        if p.get("title"):
            out["title"] = p["title"]
        if p.get("sendEmail") and out["sqlType"] == "query":
            self.gap(task, NOTE, f"sendEmail to alert group {p.get('groupId')!r} not kept (alert group ids differ "
                     "here): set sendEmail and groupId to a Porpoise alert group")  # fmt: skip
        return out

    def _procedure(self, task: str, p: dict[str, Any]) -> dict[str, Any] | None:
        out = {k: v for k, v in p.items() if k != "datasource"}
        if not self._source(task, "PROCEDURE", p, out):
            return None
        out["method"] = p.get("method") or ""
        return out

    def _http(self, task: str, p: dict[str, Any]) -> dict[str, Any] | None:
        drop = ("httpParams", "httpCheckCondition", "condition", "connectTimeout", "socketTimeout", "httpBody")
        out: dict[str, Any] = {k: v for k, v in p.items() if k not in drop}
        out["httpMethod"] = str(p.get("httpMethod") or "GET").upper()
        parts: dict[str, dict[str, str]] = {"query": {}, "body": {}, "headers": {}}
        for item in p.get("httpParams") or []:
            kind = HTTP_PARAM_KINDS.get(str(item.get("httpParametersType") or "").upper())
            if kind is None or not item.get("prop"):
                self.gap(task, NOT_REPRESENTABLE, f"httpParams entry {item!r}: not a PARAMETER, BODY or HEADERS")
                continue
            parts[kind][str(item["prop"])] = "" if item.get("value") is None else str(item["value"])
        out.update({k: v for k, v in parts.items() if v})
        if parts["body"]:  # DolphinScheduler sends the BODY entries as one JSON object
            out["bodyType"] = "json"
        if p.get("httpBody"):  # newer exports (3.2.1+): a body written whole
            if parts["body"]:
                self.gap(task, NOT_REPRESENTABLE, "both httpBody and BODY httpParams (Porpoise sends one body)")
            out.update(body=p["httpBody"], bodyType="raw")
            with contextlib.suppress(ValueError):  # JSON text, as DolphinScheduler sends it: a JSON body here
                parsed = json.loads(p["httpBody"])
                if isinstance(parsed, dict | list):
                    out.update(body=parsed, bodyType="json")
        check = str(p.get("httpCheckCondition") or "STATUS_CODE_DEFAULT").upper()
        condition = "" if p.get("condition") is None else str(p["condition"]).strip()
        if check == "STATUS_CODE_DEFAULT":
            out["expectedStatus"] = [200]
        elif check == "STATUS_CODE_CUSTOM":
            if not condition.isdigit() or not 100 <= int(condition) <= 599:
                self.gap(task, NOT_REPRESENTABLE, f"STATUS_CODE_CUSTOM condition {condition!r} is not a status code")
                return None
            out["expectedStatus"] = [int(condition)]
        elif check in ("BODY_CONTAINS", "BODY_NOT_CONTAINS"):
            out["check"] = {"contains" if check == "BODY_CONTAINS" else "not_contains": condition}
        else:
            self.gap(task, NOT_REPRESENTABLE, f"httpCheckCondition {check!r}")
            return None
        waits = [int(p[k]) for k in ("connectTimeout", "socketTimeout") if isinstance(p.get(k), int) and p[k] > 0]
        # DolphinScheduler's two limits in ms; Porpoise has one, for the connect and each read
        out["timeoutSeconds"] = max(1, -(-max(waits) // 1000)) if waits else 60
        return out

    def _jar(self, task: str, p: Mapping[str, Any]) -> str | None:
        """The path of a task's ``mainJar`` (``{"resourceName": ...}``), or None after an unresolved gap."""
        jar = p.get("mainJar") or {}
        if isinstance(jar, str) and jar:
            return jar
        if not isinstance(jar, Mapping) or not jar.get("resourceName"):
            self.gap(task, UNRESOLVED, f"mainJar {jar!r}: a resource id cannot be resolved here")
            return None
        return str(jar["resourceName"])

    def _spark(self, task: str, p: dict[str, Any]) -> dict[str, Any] | None:
        program = p.get("programType") or "SCALA"
        if program not in ("PYTHON", "SQL", "JAVA", "SCALA"):
            self.gap(task, UNSUPPORTED_TYPE, f"SPARK (programType {program})")
            return None
        out = {k: v for k, v in p.items() if k not in ("deployMode", "mainJar", "rawScript")}
        out["programType"] = program
        mode = p.get("deployMode") or "local"
        out["master"], out["deployMode"] = ("local[*]", "client") if mode == "local" else ("yarn", mode)
        if program == "SQL":
            out["sql"] = p.get("rawScript") or ""
        elif p.get("rawScript") and program == "PYTHON":
            out["rawScript"] = p["rawScript"]
        if program in ("JAVA", "SCALA") or (program == "PYTHON" and p.get("mainJar")):
            jar = self._jar(task, p)
            if jar is None:
                return None
            out["mainJar" if program in ("JAVA", "SCALA") else "mainFile"] = jar
        if not out.get("mainClass"):
            out.pop("mainClass", None)
        return out

    def _mr(self, task: str, p: dict[str, Any]) -> dict[str, Any] | None:
        program = p.get("programType") or "JAVA"
        if program not in ("JAVA", "SCALA", "PYTHON"):
            self.gap(task, UNSUPPORTED_TYPE, f"MR (programType {program})")
            return None
        jar = self._jar(task, p)
        if jar is None:
            return None
        out = {k: v for k, v in p.items() if k not in ("mainJar", "queue") and not _empty(v)}
        out.update(programType=program, mainJar=jar)
        queue = p.get("yarnQueue") or p.get("queue")
        if queue:
            out["yarnQueue"] = queue
        return out

    def _sub_process(self, task: str, p: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in p.items() if k != "processDefinitionCode"}
        ref = self.tr.ref(p.get("processDefinitionCode"), 0)
        if ref is None:
            self.gap(task, UNRESOLVED, f"SUB_PROCESS workflow code {p.get('processDefinitionCode')!r}")
            out["workflow_code"] = int(p.get("processDefinitionCode") or 0)
        else:
            out.update(ref)
        return out

    def _dependent(self, task: str, p: dict[str, Any]) -> dict[str, Any]:
        dep = p.get("dependence") or {}
        out = {k: v for k, v in p.items() if k not in _LOGIC_NOISE}
        groups = []
        for group in dep.get("dependTaskList") or []:
            items = []
            for it in group.get("dependItemList") or []:
                code, task_code = it.get("definitionCode"), _dep_task_code(it.get("depTaskCode"), task)
                ref = self.tr.ref(code, task_code if task_code > 0 else 0)
                if ref is None:
                    self.gap(task, UNRESOLVED, f"DEPENDENT workflow code {code!r} task code {task_code}")
                    ref = {"workflow_code": int(code or 0)}  # waits, as DolphinScheduler's would
                    if task_code > 0:
                        ref["task_code"] = task_code  # kept for export; not a task name here
                if it.get("state") not in (None, "", "SUCCESS"):
                    self.gap(task, NOTE, f"dependItem state {it['state']!r} not kept (success is required)")
                item = {**ref, "cycle": it["cycle"]} if it.get("cycle") else dict(ref)
                items.append({**item, "date_value": it.get("dateValue")})
            groups.append({"relation": group.get("relation") or "AND", "items": items})
        out.update(relation=dep.get("relation") or "AND", groups=groups)
        out["check_interval"] = dep.get("checkInterval") or 10
        out["failure_policy"] = _FAILURE_POLICY.get(dep.get("failurePolicy") or "", "FAIL")
        if dep.get("failureWaitingTime") is not None:
            out["failure_waiting_time"] = dep["failureWaitingTime"]
        return out

    def _conditions(self, task: str, p: dict[str, Any]) -> dict[str, Any]:
        dep, result = p.get("dependence") or {}, p.get("conditionResult") or {}
        out = {k: v for k, v in p.items() if k not in _LOGIC_NOISE}
        groups = dep.get("dependTaskList") or []
        relations = {g.get("relation") or "AND" for g in groups}
        if len(groups) > 1:
            relations.add(dep.get("relation") or "AND")
        if len(relations) > 1:
            self.gap(task, NOT_REPRESENTABLE, "CONDITIONS mixing AND and OR groups (Porpoise has one relation)")
        conditions = []
        for g in groups:
            for it in g.get("dependItemList") or []:
                name = self.task_name(it.get("depTaskCode"), task, "a condition")
                if name is not None:
                    conditions.append({"task": name, "status": it.get("status") or "SUCCESS"})
        out.update(relation=relations.pop() if relations else "AND", conditions=conditions)
        for key, ours in (("successNode", "success"), ("failedNode", "failure")):
            names = [self.task_name(c, task, key) for c in result.get(key) or []]
            out[ours] = [n for n in names if n is not None]
        return out

    def _switch(self, task: str, p: dict[str, Any]) -> dict[str, Any]:
        result = p.get("switchResult") or {}
        out = {k: v for k, v in p.items() if k not in _LOGIC_NOISE and not (k == "rawScript" and not v)}
        cases = []
        for case in result.get("dependTaskList") or []:
            name = self.task_name(_one(case.get("nextNode")), task, "a switch case")
            original = case.get("condition") or ""
            condition = js_to_expression(original)
            item = {"condition": condition, "next": name}
            problem = logic.expression_problem(condition)
            if problem:
                # DolphinScheduler fails the task when a condition cannot be evaluated; so does this one
                self.gap(task, NOT_REPRESENTABLE, f"SWITCH condition {original!r}: {problem}")
                item.update(condition=UNTRANSLATED, **{ORIGINAL: original})
            cases.append(item)
        out["cases"] = cases
        default = _one(result.get("nextNode"))
        if default:
            out["default"] = self.task_name(default, task, "the switch default")
        return out

    def schedule_body(self) -> dict[str, Any] | None:
        s = self.schedule
        if not s:
            return None
        tz = s.get("timezoneId") or "UTC"
        body: dict[str, Any] = {"crontab": s["crontab"], "timezone": tz}
        for key, ours in (("startTime", "start_time"), ("endTime", "end_time")):
            if s.get(key):
                body[ours] = parse_time(s[key], tz).isoformat()
        body.update(
            failure_strategy=s.get("failureStrategy") or "END",
            warning_type=s.get("warningType") or "NONE",
            priority=s.get("processInstancePriority") or s.get("workflowInstancePriority") or "MEDIUM",
            worker_group=s.get("workerGroup") or "default",
        )
        if s.get("warningGroupId"):
            self.gap(None, NOTE, f"schedule warningGroupId {s['warningGroupId']} not kept (alert group ids differ)")
        if s.get("environmentCode") not in (None, -1):
            self.gap(None, NOTE, f"schedule environmentCode {s['environmentCode']} not kept")
        return body


def _empty(value: Any) -> bool:
    return not value or (isinstance(value, Mapping) and all(_empty(v) for v in value.values()))


def _one(value: Any) -> Any:
    if isinstance(value, list):
        return value[0] if len(value) == 1 else None
    return value


class _Translator:
    def __init__(self, project: str, datasources: Mapping[str, str], known: Mapping[int, WorkflowRef]) -> None:
        self.project = project
        self.datasources = {str(k): v for k, v in datasources.items()}
        self.known = known
        self.gaps: list[Gap] = []
        self.used_sources: dict[str, list[str]] = {}
        self.in_file: dict[int, WorkflowRef] = {}

    def ref(self, code: Any, task_code: int) -> dict[str, Any] | None:
        """{workflow, [project], [task]} for a workflow (and task) code, or None if nothing defines it."""
        found = self.in_file.get(code) or self.known.get(code) if isinstance(code, int) else None
        if found is None:
            return None
        out: dict[str, Any] = {"workflow": found.name}
        if found.project != self.project:
            out["project"] = found.project
        if task_code:
            if task_code not in found.tasks:
                return None
            out["task"] = found.tasks[task_code]
        return out


def translate(
    data: Any,
    project: str,
    *,
    skip_unsupported: bool = False,
    datasources: Mapping[str, str] | None = None,
    known: Mapping[int, WorkflowRef] | None = None,
) -> Translation:
    """Translate an export. DefinitionError for a malformed file or a document Porpoise refuses (the
    field names the workflow); :class:`Unsupported` for fatal gaps unless ``skip_unsupported``."""
    items = _load(data)
    tr = _Translator(project, datasources or {}, known or {})
    workflows = [_Workflow(tr, item) for item in items]
    seen: set[str] = set()
    for wf in workflows:
        if wf.name in seen:
            raise DefinitionError(f"workflow {wf.name!r}", "appears twice in the file")
        seen.add(wf.name)
        tr.in_file[wf.definition["code"]] = WorkflowRef(project, wf.name, wf.names)
    docs, schedules = [], {}
    for wf in workflows:
        part = "processDefinition"
        try:
            docs.append(wf.document())
            part = "schedule"
            body = wf.schedule_body()
        except DefinitionError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
            # a field of an unexpected type or shape (1e400 is JSON's infinity): name the workflow, never a traceback
            raise DefinitionError(f"workflow {wf.name!r}", f"unexpected {part} content: {exc!r}") from exc
        if body is not None:
            schedules[wf.name] = body
    fatal = [g for g in tr.gaps if g.fatal]
    if fatal and not skip_unsupported:
        raise Unsupported(fatal)
    for doc, wf in zip(docs, workflows, strict=True):
        bad = {g.task for g in fatal if g.workflow == wf.name}
        for t in doc["tasks"]:
            if t["name"] in bad and ORIGINAL not in t["params"]:
                t["description"] = mark(t.get("description", ""), "imported with gaps; see the import report")
        try:
            document.parse(doc)
        except DefinitionError as exc:
            raise DefinitionError(f"workflow {wf.name!r}: {exc.field}", exc.reason) from exc
    return Translation(docs, schedules, tr.gaps, tr.used_sources)
