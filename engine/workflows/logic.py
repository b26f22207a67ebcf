"""Logic tasks the master runs itself: their parameters, checked when a definition is saved, and the
pure decisions of CONDITIONS and SWITCH.

- ``CONDITIONS``: ``{"relation": "AND"|"OR", "conditions": [{"task": <upstream>, "status":
  "SUCCESS"|"FAILURE"}], "success": [<downstream>...], "failure": [<downstream>...]}``. It runs once
  its upstream tasks are finished, failed or not (a failure it follows does not fail the workflow);
  when the conditions hold the ``failure`` branch is skipped, else the ``success`` branch.
- ``SWITCH``: ``{"cases": [{"condition": "<expression>", "next": <downstream>}], "default":
  <downstream>}``. ``${name}`` in a condition is replaced by the parameter's value (globals and
  upstream OUT values) as text, as DolphinScheduler does (quote it for a string: ``'${env}' ==
  'prod'``); the expression is then evaluated by engine/workflows/expressions.py — literals,
  comparisons, ``in``, ``and or not`` (or ``&& || !``), arithmetic and string operations, all with
  size limits; no names, calls, attributes or imports, so a value can change the decision but never
  run code, and no value can make the evaluation expensive (at most ``MAX_CASES`` conditions, each
  with bounded work; the master evaluates them in a thread beside its event loop).
  The first true case wins, else the default; every other branch is skipped. No match and no
  default, or a condition that cannot be evaluated, fails the task with the reason.
- ``SUB_PROCESS``: ``{"workflow": <name>, "project": <name, default: this one>}`` or
  ``{"workflow_code": <code>}``: a child workflow instance.
- ``DEPENDENT``: see engine/scheduling/dependent.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from engine.scheduling.dependent import check_params as check_dependent
from engine.tasks.base import ParamError, describe_params
from engine.tasks.registry import check_schema
from engine.workflows import expressions
from engine.workflows.expressions import ExpressionError

CONDITIONS, SWITCH, SUB_PROCESS, DEPENDENT = "CONDITIONS", "SWITCH", "SUB_PROCESS", "DEPENDENT"
#: decided at once by the master (no waiting)
INSTANT = frozenset({CONDITIONS, SWITCH})
_VAR = re.compile(r"\$\{([^}]+)\}")
#: conditions of one SWITCH task: each is evaluated with bounded work, so this bounds the decision
MAX_CASES = 100


_NAMES = {"type": "array", "items": {"type": "string"}}
_DEPENDENT_ITEMS = {
    "type": "array",
    "items": {"type": "object"},
    "description": "[{workflow (or workflow_code), task, cycle, date_value}]",
}
#: the parameter schemas of the logic tasks (as the plugins' params_schema: served to the UI, checked in
#: validate after the checks above, pinned to them by tests/test_task_param_schemas.py)
SCHEMAS: dict[str, dict[str, Any]] = {
    SUB_PROCESS: describe_params(
        {
            "workflow": {"type": "string", "description": "the child workflow's name"},
            "project": {"type": "string", "description": "its project (default: this one)"},
            "workflow_code": {"type": "integer", "description": "or the child workflow's code"},
        },
        examples=({"workflow": "child"}, {"workflow_code": 1}, {"workflow": "child", "project": "p"}),
    ),
    DEPENDENT: describe_params(
        {
            "relation": {"enum": ["AND", "OR"], "default": "AND"},
            "items": _DEPENDENT_ITEMS,
            "groups": {"type": "array", "items": {"type": "object"}, "description": "[{relation, items}]"},
            "check_interval": {"type": "number", "minimum": 1, "default": 10, "description": "seconds"},
            "failure_policy": {"enum": ["FAIL", "WAIT"], "default": "FAIL"},
            "timeout_seconds": {"type": "number", "minimum": 0, "default": 0, "description": "0 = no limit"},
            "failure_waiting_time": {"type": "number", "minimum": 0, "default": 0, "description": "minutes"},
        },
        examples=(
            {"items": [{"workflow": "upstream_workflow", "cycle": "day", "date_value": "today"}]},
            {"relation": "OR", "check_interval": 1, "failure_policy": "WAIT", "timeout_seconds": 5,
             "failure_waiting_time": 1,
             "groups": [{"relation": "AND", "items": [{"workflow": "w", "cycle": "day", "date_value": "today"}]}]},
        ),
    ),
    CONDITIONS: describe_params(
        {
            "relation": {"enum": ["AND", "OR"], "default": "AND"},
            "conditions": {"type": "array", "items": {"type": "object"}, "description": "[{task, status}]"},
            "success": {**_NAMES, "description": "downstream tasks run when the conditions hold"},
            "failure": {**_NAMES, "description": "downstream tasks run when they do not"},
        },
        required=("conditions",),
        examples=({"relation": "AND", "conditions": [{"task": "up", "status": "SUCCESS"}], "success": ["ok"],
                   "failure": ["ko"]},),
    ),
    SWITCH: describe_params(
        {
            "cases": {"type": "array", "items": {"type": "object"}, "description": "[{condition, next}]"},
            "default": {"type": "string", "description": "the downstream task when no case holds"},
        },
        required=("cases",),
        examples=({"cases": [{"condition": "1 == 1", "next": "ok"}], "default": "ko"},),
    ),
}  # fmt: skip


def validate(task_type: str, params: Mapping[str, Any], upstream: set[str], downstream: set[str]) -> None:
    """Check a logic task's params against its place in the DAG; ParamError names the field."""
    if task_type == CONDITIONS:
        _conditions(params, upstream, downstream)
    elif task_type == SWITCH:
        _switch(params, downstream)
    elif task_type == SUB_PROCESS:
        if "workflow_code" in params and not isinstance(params["workflow_code"], int):
            raise ParamError("workflow_code", "must be an integer (the code of a workflow)")
        if not isinstance(params.get("workflow"), str) and not isinstance(params.get("workflow_code"), int):
            raise ParamError("workflow", "SUB_PROCESS needs workflow (a name) or workflow_code")
    elif task_type == DEPENDENT:
        check_dependent(params)
    if task_type in SCHEMAS:
        check_schema(SCHEMAS[task_type], params)


def _names(params: Mapping[str, Any], key: str, allowed: set[str], where: str) -> list[str]:
    value = params.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ParamError(key, "must be a list of task names")
    for name in value:
        if name not in allowed:
            raise ParamError(key, f"{name!r} is not {where} of this task")
    return value


def _conditions(params: Mapping[str, Any], upstream: set[str], downstream: set[str]) -> None:
    if params.get("relation", "AND") not in ("AND", "OR"):
        raise ParamError("relation", "must be AND or OR")
    conds = params.get("conditions")
    if not isinstance(conds, list) or not conds:
        raise ParamError("conditions", "needs at least one {task, status}")
    for i, c in enumerate(conds):
        if not isinstance(c, Mapping) or c.get("task") not in upstream:
            raise ParamError(f"conditions[{i}].task", "must name an upstream task of this task")
        if c.get("status", "SUCCESS") not in ("SUCCESS", "FAILURE"):
            raise ParamError(f"conditions[{i}].status", "must be SUCCESS or FAILURE")
    ok = _names(params, "success", downstream, "downstream")
    bad = _names(params, "failure", downstream, "downstream")
    if set(ok) & set(bad):
        raise ParamError("failure", "a task cannot be on both branches")


def _switch(params: Mapping[str, Any], downstream: set[str]) -> None:
    cases = params.get("cases")
    if not isinstance(cases, list) or not cases:
        raise ParamError("cases", "needs at least one {condition, next}")
    if len(cases) > MAX_CASES:
        raise ParamError("cases", f"at most {MAX_CASES} cases")
    for i, case in enumerate(cases):
        if not isinstance(case, Mapping) or not isinstance(case.get("condition"), str) or not case["condition"]:
            raise ParamError(f"cases[{i}].condition", "is required")
        if case.get("next") not in downstream:
            raise ParamError(f"cases[{i}].next", "must name a downstream task of this task")
        problem = expression_problem(case["condition"])
        if problem:
            raise ParamError(f"cases[{i}].condition", problem)
    default = params.get("default")
    if default is not None and (not isinstance(default, str) or default not in downstream):
        raise ParamError("default", "must name a downstream task of this task")


# -- decisions --------------------------------------------------------------------------------------


def conditions_hold(params: Mapping[str, Any], outcome: Mapping[str, str]) -> bool:
    """``outcome``: upstream task name -> SUCCESS / FAILURE (skipped tasks are absent)."""
    checks = [outcome.get(c["task"]) == c.get("status", "SUCCESS") for c in params["conditions"]]
    return all(checks) if params.get("relation", "AND") == "AND" else any(checks)


def conditions_skip(params: Mapping[str, Any], outcome: Mapping[str, str]) -> list[str]:
    """The branch not taken (task names)."""
    return list(params.get("failure", []) if conditions_hold(params, outcome) else params.get("success", []))


def substitute(expression: str, values: Mapping[str, str]) -> str:
    """``expression`` with each ``${name}`` replaced by its value; ExpressionError for an unknown
    name or a result over the length limit (measured before the text is built)."""
    names = [m.group(1) for m in _VAR.finditer(expression)]
    missing = [n for n in names if n not in values]
    if missing:
        raise ExpressionError(expressions.SYNTAX, f"unknown parameter ${{{missing[0]}}}")
    length = len(expression) + sum(len(values[n]) - len(n) - 3 for n in names)
    if length > expressions.MAX_LENGTH:
        raise ExpressionError(
            expressions.LIMIT,
            f"{length} characters once its parameters are substituted, over the limit of {expressions.MAX_LENGTH}",
        )
    return _VAR.sub(lambda m: values[m.group(1)], expression)


def _shown(text: str, limit: int = 120) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def evaluate(expression: str, values: Mapping[str, str]) -> bool:
    """Evaluate a SWITCH condition; ExpressionError (a ValueError) says why it cannot be evaluated."""
    text = expression
    try:
        text = substitute(expression, values)
        return bool(expressions.evaluate(text))
    except ExpressionError as exc:
        shown = _shown(expression) if text == expression else f"{_shown(expression)} (as {_shown(text)})"
        raise ExpressionError(exc.kind, f"cannot evaluate {shown}: {exc.reason}") from None


def expression_problem(expression: str) -> str:
    """Why a condition can never be evaluated (syntax, refused constructs, limits), or ''. Its
    parameters are tried as 0: a type error or a division by zero may depend on the real values."""
    sample = {m.group(1): "0" for m in _VAR.finditer(expression)}
    try:
        evaluate(expression, sample)
    except ExpressionError as exc:
        return "" if exc.kind == expressions.VALUE else exc.reason
    return ""


def switch_choice(params: Mapping[str, Any], values: Mapping[str, str]) -> tuple[str | None, list[str]]:
    """(chosen task or None, branch tasks to skip). ValueError if a condition cannot be evaluated."""
    targets = [c["next"] for c in params["cases"]]
    if params.get("default"):
        targets.append(params["default"])
    chosen = next((c["next"] for c in params["cases"] if evaluate(c["condition"], values)), params.get("default"))
    return chosen, [t for t in dict.fromkeys(targets) if t != chosen]
