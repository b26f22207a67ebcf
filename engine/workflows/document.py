"""The workflow document: the one format users write, as a YAML file (``porpoise apply``) or as the JSON
body of ``POST /api/v1/workflows``. Both go through :func:`parse`, so the same checks refuse the same
mistakes with the same field names.

    name: taxi_daily                      # unique within the project
    project: examples
    description: Clean and load one day of trips
    timeout: 0                            # minutes for the whole run; 0 = none
    timeout_strategy: WARN                # WARN (an alert) | FAILED (an alert, then stop: FAILURE)
    execution_type: PARALLEL              # PARALLEL | SERIAL_WAIT | SERIAL_DISCARD | SERIAL_PRIORITY
    max_active_runs: 0                    # runs at once; 0 = no limit (PARALLEL) / 1 (serial types)
    tenant: default                       # OS user tasks run as: granted to the project (docs/SECURITY.md)
    environment: spark3                   # shell exports for every task naming none (engine/api/environments.py)
    params:                               # global params: name -> value, placeholders allowed
      biz_date: $[yyyyMMdd]
    tasks:
      - name: clean
        type: SPARK                       # SHELL | PYTHON | SQL | SPARK (plugins add more)
        params: {mainFile: clean.py}      # the plugin's own parameters
        upstream: [generate]              # task names this one waits for
        retries: 2                        # extra attempts after a failure
        retry_interval: 1                 # minutes between a failure and the retry
        timeout: 30                       # minutes; 0 = none
        timeout_strategy: FAILED          # WARN | FAILED | WARNFAILED
        priority: MEDIUM                  # HIGHEST | HIGH | MEDIUM | LOW | LOWEST
        worker_group: default
        environment: spark3               # this task's environment (wins over the workflow's)
        delay_time: 0                     # minutes to wait before the task starts
        task_group: etl_db                # at most the group's size of its slots run at once
        task_group_priority: 0            # higher first in the group's queue, then first come
        task_group_slots: 1               # slots this task takes
        alert_on: [failure, retry]        # the task's own alerts: failure | success | retry | timeout
        alert_group: ops                  # alert group (name or id) they go to; default: the run's group
        disabled: false                   # true: switched off, kept in the graph (see below)
        description: ...

A task with ``disabled: true`` stays in the workflow but never runs (DolphinScheduler's ``flag: NO``,
"forbidden"): the graph connects through it, so its downstream tasks run as though it had succeeded
once its own upstream tasks have; ``porpoise status`` lists it as disabled.

:data:`SCHEMA` (JSON Schema 2020-12) checks the shape and is published in the API's OpenAPI
document; :meth:`WorkflowDef.validate` checks the meaning (cycles, unknown upstream names, task types,
plugin parameters). Errors are :class:`DefinitionError` with a field path such as ``tasks[2].upstream``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jsonschema
import yaml

from core.schema_problem import schema_problem
from engine.workflows.definitions import WorkflowSpec
from engine.workflows.model import (
    ALERT_ON,
    EXECUTION_TYPES,
    MAX_ACTIVE_RUNS,
    MAX_GROUP_SLOTS,
    MAX_NAME,
    PRIORITIES,
    TIMEOUT_STRATEGIES,
    WORKFLOW_TIMEOUT_STRATEGIES,
    DefinitionError,
    TaskDef,
    WorkflowDef,
)

_NAME = {"type": "string", "minLength": 1, "maxLength": 255}
#: minutes are stored as 32-bit integers (as DolphinScheduler's columns)
_MINUTES = {"type": "integer", "minimum": 0, "maximum": 2**31 - 1}
#: an environment's name (engine/api/environments.py)
_ENVIRONMENT = {"type": "string", "pattern": r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"}
#: characters of a parameter's value (global or local); a start parameter has the same bound
MAX_PARAM_VALUE = 65536
_PARAM_VALUE = {"type": ["string", "number", "boolean"], "maxLength": MAX_PARAM_VALUE}
#: characters of a schema violation's message (jsonschema quotes the offending value whole)
_PARAM_LIST = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["prop"],
        "properties": {
            "prop": {"type": "string", "minLength": 1},
            "value": _PARAM_VALUE,
            "direct": {"enum": ["IN", "OUT"]},
            "type": {"type": "string"},
        },
        "additionalProperties": False,
    },
}

TASK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["name", "type"],
    "additionalProperties": False,
    "properties": {
        "name": _NAME,
        "type": {"type": "string", "minLength": 1, "description": "task plugin: SHELL, PYTHON, SQL, SPARK, ..."},
        "params": {
            "type": "object",
            "additionalProperties": True,
            "description": "the task plugin's parameters (GET /api/v1/task-types: each type's schema)",
        },
        "upstream": {
            "oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
            "description": "names of the tasks this one waits for",
        },
        "description": {"type": "string"},
        "retries": {"type": "integer", "minimum": 0, "maximum": 100},
        "retry_interval": {**_MINUTES, "description": "minutes between a failure and the retry"},
        "timeout": {**_MINUTES, "description": "minutes; 0 = none"},
        "timeout_strategy": {"enum": list(TIMEOUT_STRATEGIES)},
        "priority": {"enum": list(PRIORITIES)},
        "worker_group": {"type": "string", "minLength": 1, "maxLength": 64},
        "environment": {**_ENVIRONMENT, "description": "environment whose exports run before the task's script"},
        "delay_time": {**_MINUTES, "description": "minutes to wait before the task starts"},
        "disabled": {
            "type": "boolean",
            "description": "switched off: never runs; its downstream runs as though it had succeeded",
        },
        "task_group": {
            "type": "string",
            "minLength": 1,
            "maxLength": 255,
            "description": "task group whose slots the task takes while it runs (waits in the group's queue)",
        },
        "task_group_priority": {
            "type": "integer",
            "minimum": -1000000,
            "maximum": 1000000,
            "description": "order in the group's queue: higher first, then first come",
        },
        "task_group_slots": {"type": "integer", "minimum": 1, "maximum": MAX_GROUP_SLOTS},
        "alert_on": {
            "type": "array",
            "items": {"enum": list(ALERT_ON)},
            "uniqueItems": True,
            "description": "ends of an attempt that raise the task's own alert: failure (no retry left), retry "
            "(another attempt follows), timeout (a WARN timeout fired), success",
        },
        "alert_group": {
            "oneOf": [
                {"type": "integer", "minimum": 1},
                {"type": "string", "minLength": 1, "maxLength": 255},
            ],
            "description": "alert group (id or name) of the task's alerts; default: the run's warning group",
        },
    },
}

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["name", "project", "tasks"],
    "additionalProperties": False,
    "properties": {
        "name": {**_NAME, "maxLength": MAX_NAME},
        "project": _NAME,
        "description": {"type": "string"},
        "timeout": {**_MINUTES, "description": "the whole run's time limit in minutes (from its start); 0 = none"},
        "timeout_strategy": {
            "enum": list(WORKFLOW_TIMEOUT_STRATEGIES),
            "description": "WARN (default): an alert; FAILED: an alert, then the run is stopped and ends FAILURE",
        },
        "execution_type": {
            "enum": list(EXECUTION_TYPES),
            "description": "a run that finds the workflow at max_active_runs: PARALLEL / SERIAL_WAIT wait for a"
            " place (in order), SERIAL_DISCARD is not started (STOP with the reason), SERIAL_PRIORITY stops the"
            " oldest run and starts once it has ended",
        },
        "max_active_runs": {
            "type": "integer",
            "minimum": 0,
            "maximum": MAX_ACTIVE_RUNS,
            "description": "runs active at once; 0 = the default: no limit for PARALLEL, 1 for the serial types",
        },
        "tenant": {"type": "string", "minLength": 1, "maxLength": 64},
        "environment": {**_ENVIRONMENT, "description": "environment of every task that names none"},
        "params": {
            "oneOf": [
                {"type": "object", "additionalProperties": _PARAM_VALUE},
                _PARAM_LIST,
            ],
            "description": "global parameters: name -> value (placeholders such as $[yyyyMMdd] allowed)",
        },
        "tasks": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/Task"}},
    },
    "$defs": {"Task": TASK_SCHEMA},
}

_VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def check_shape(doc: Any) -> None:
    """Raise DefinitionError for the most relevant JSON-schema violation of ``doc``."""
    problem = schema_problem(_VALIDATOR, doc)
    if problem is not None:
        raise DefinitionError(*problem)


def _global_params(raw: Any) -> tuple[Mapping[str, Any], ...]:
    if raw is None:
        return ()
    if isinstance(raw, dict):
        return tuple({"prop": k, "direct": "IN", "type": "VARCHAR", "value": _text(v)} for k, v in raw.items())
    return tuple(
        {"prop": p["prop"], "direct": p.get("direct", "IN"), "type": p.get("type", "VARCHAR"),
         "value": _text(p.get("value", ""))}
        for p in raw
    )  # fmt: skip


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse(doc: Any) -> WorkflowDef:
    """A checked WorkflowDef from a document (already-parsed YAML or JSON). Raises DefinitionError."""
    check_shape(doc)
    tasks = []
    for t in doc["tasks"]:
        upstream = t.get("upstream") or ()
        if isinstance(upstream, str):
            upstream = (upstream,)
        timeout = t.get("timeout", 0)
        strategy = t.get("timeout_strategy")
        tasks.append(
            TaskDef(
                name=t["name"],
                task_type=t["type"],
                params=t.get("params") or {},
                upstream=tuple(upstream),
                description=t.get("description", ""),
                priority=PRIORITIES[t.get("priority", "MEDIUM")],
                worker_group=t.get("worker_group", "default"),
                retries=t.get("retries", 0),
                retry_interval=t.get("retry_interval", 1),
                timeout=timeout,
                timeout_strategy=TIMEOUT_STRATEGIES[strategy or "WARN"] if timeout else None,
                delay_time=t.get("delay_time", 0),
                disabled=t.get("disabled", False),
                task_group=t.get("task_group", ""),
                task_group_priority=t.get("task_group_priority", 0),
                task_group_slots=t.get("task_group_slots", 1),
                alert_on=tuple(t.get("alert_on", ())),
                alert_group=t.get("alert_group"),
                environment=t.get("environment", doc.get("environment", "")),
            )
        )
    wf = WorkflowDef(
        name=doc["name"],
        project=doc["project"],
        tasks=tuple(tasks),
        description=doc.get("description", ""),
        global_params=_global_params(doc.get("params")),
        timeout=doc.get("timeout", 0),
        tenant=doc.get("tenant", "default"),
        execution_type=EXECUTION_TYPES[doc.get("execution_type", "PARALLEL")],
        max_active_runs=doc.get("max_active_runs", 0),
        timeout_strategy=WORKFLOW_TIMEOUT_STRATEGIES[doc.get("timeout_strategy", "WARN")],
    )
    try:
        wf.validate()
    except DefinitionError as exc:
        # the model names the plugin field task_type; the document calls it type
        field = "params" if exc.field == "global_params" else exc.field.replace(".task_type", ".type")
        raise DefinitionError(field, exc.reason) from exc
    return wf


def read_documents(path: str) -> list[Any]:
    """The raw workflow documents of a YAML file: one document, a list, or several ``---`` documents."""
    try:
        with open(path, encoding="utf-8") as fh:
            docs = [d for d in yaml.safe_load_all(fh) if d is not None]
    except OSError as exc:
        raise DefinitionError("file", f"cannot read {path}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise DefinitionError("file", f"{path} is not valid YAML: {exc}") from exc
    flat: list[Any] = []
    for d in docs:
        flat.extend(d if isinstance(d, list) else [d])
    if not flat:
        raise DefinitionError("file", f"{path} holds no workflow")
    return flat


def load_file(path: str) -> list[WorkflowDef]:
    """Every workflow of a YAML file, checked; the field of an error names the workflow when there are several."""
    docs = read_documents(path)
    out = []
    for i, d in enumerate(docs):
        try:
            out.append(parse(d))
        except DefinitionError as exc:
            where = f"workflow[{i}]." if len(docs) > 1 else ""
            raise DefinitionError(f"{where}{exc.field}", exc.reason) from exc
    return out


_PRIORITY_NAMES = {v: k for k, v in PRIORITIES.items()}
_STRATEGY_NAMES = {v: k for k, v in TIMEOUT_STRATEGIES.items()}
_EXECUTION_NAMES = {v: k for k, v in EXECUTION_TYPES.items()}


def to_document(
    spec: WorkflowSpec, project: str, description: str = "", environments: Mapping[int, str] | None = None
) -> dict[str, Any]:
    """The document of a stored version (what GET returns; applying it again changes nothing).
    ``environments``: environment code -> name, for the tasks that name one."""
    environments = environments or {}
    names = {code: t.name for code, t in spec.tasks.items()}
    tasks = []
    for code in spec.dag.topological():
        t = spec.tasks[code]
        item: dict[str, Any] = {"name": t.name, "type": t.task_type, "params": dict(t.params)}
        ups = [names[u] for u in spec.dag.upstream[code]]
        if ups:
            item["upstream"] = ups
        item.update(
            retries=t.retries,
            retry_interval=t.retry_interval,
            timeout=t.timeout,
            priority=_PRIORITY_NAMES.get(t.priority, "MEDIUM"),
            worker_group=t.worker_group,
            delay_time=t.delay_time,
        )
        if t.timeout and t.timeout_strategy is not None:
            item["timeout_strategy"] = _STRATEGY_NAMES[t.timeout_strategy]
        if t.disabled:
            item["disabled"] = True
        if environments.get(t.environment_code):
            item["environment"] = environments[t.environment_code]
        if t.task_group:
            item.update(task_group=t.task_group, task_group_priority=t.task_group_priority,
                        task_group_slots=t.task_group_slots)  # fmt: skip
        if t.alert_on:
            item["alert_on"] = [w for w in ALERT_ON if w in t.alert_on]
        if t.alert_group_id:
            item["alert_group"] = t.alert_group or t.alert_group_id
        tasks.append(item)
    doc: dict[str, Any] = {"name": spec.name, "project": project}
    if description:
        doc["description"] = description
    doc.update(
        timeout=spec.timeout,
        tenant=spec.tenant,
    )
    if spec.execution_type:
        doc["execution_type"] = _EXECUTION_NAMES.get(spec.execution_type, "PARALLEL")
    if spec.max_active_runs:
        doc["max_active_runs"] = spec.max_active_runs
    if spec.timeout_strategy:
        doc["timeout_strategy"] = "FAILED"
    doc.update(
        params=[{k: p[k] for k in ("prop", "value", "direct", "type") if k in p} for p in spec.global_params],
        tasks=tasks,
    )
    return doc
