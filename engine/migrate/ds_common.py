"""What DolphinScheduler import and export share: the export file's keys (3.0 - 3.2, and 3.3's renamed
ones), time formats, the SWITCH condition dialects, and the placeholder of a task type Porpoise lacks.

DolphinScheduler evaluates a SWITCH condition as JavaScript after replacing ``${name}``; Porpoise
evaluates a safe Python-style expression (engine/workflows/logic.py). The operators that differ are
translated token by token outside string literals (``&&`` <-> ``and``, ``||`` <-> ``or``, ``!`` <->
``not``, ``===`` <-> ``==``, ``!==`` <-> ``!=``, ``true``/``false`` <-> ``True``/``False``); everything
else, placeholders included, is kept verbatim.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import Any
from zoneinfo import ZoneInfo

#: task types translated field by field (others are unsupported)
SUPPORTED = (
    "SHELL", "PYTHON", "SQL", "PROCEDURE", "HTTP", "SPARK", "MR", "SUB_PROCESS", "DEPENDENT", "CONDITIONS", "SWITCH",
)  # fmt: skip
#: the data-source types SQL and PROCEDURE tasks run on here (engine/tasks/sql_dialects)
SOURCE_TYPES = ("POSTGRESQL", "MYSQL", "HIVE", "CLICKHOUSE")
PROCEDURE_TYPES = ("POSTGRESQL", "MYSQL")
#: DolphinScheduler's HTTP parameter kinds -> the Porpoise HTTP param holding them
HTTP_PARAM_KINDS = {"PARAMETER": "query", "BODY": "body", "HEADERS": "headers"}
#: the key of a placeholder task's params that keeps the original DolphinScheduler task
ORIGINAL = "dolphinscheduler"
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"

_JS_TO_PY = {"&&": " and ", "||": " or ", "===": "==", "!==": "!=", "!": " not ", "true": "True", "false": "False"}
_PY_TO_JS = {"and": "&&", "or": "||", "not": "!", "True": "true", "False": "false"}
_STRING = r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\""
_JS_TOKEN = re.compile(rf"({_STRING})|(===|!==|&&|\|\||!(?!=)|\btrue\b|\bfalse\b)")
_PY_TOKEN = re.compile(rf"({_STRING})|(\band\b|\bor\b|\bnot\b|\bTrue\b|\bFalse\b)")


def js_to_expression(condition: str) -> str:
    """A DolphinScheduler SWITCH condition in Porpoise's expression syntax."""
    out = _JS_TOKEN.sub(lambda m: m.group(1) or _JS_TO_PY[m.group(2)], condition)
    return re.sub(r"\s{2,}", " ", out).strip()


def expression_to_js(expression: str) -> str:
    """The reverse of :func:`js_to_expression`."""
    out = _PY_TOKEN.sub(lambda m: m.group(1) or _PY_TO_JS[m.group(2)], expression)
    return re.sub(r"!\s+", "!", out)


def workflow_part(item: Mapping[str, Any]) -> tuple[Any, Any]:
    """(definition, relations) of one exported workflow, under 3.0-3.2 or 3.3 key names."""
    definition = item.get("processDefinition", item.get("workflowDefinition"))
    relations = item.get("processTaskRelationList", item.get("workflowTaskRelationList"))
    return definition, relations


def parse_time(value: str, tz: str) -> dt.datetime:
    """A DolphinScheduler ``yyyy-MM-dd HH:mm:ss`` (wall time in ``tz``) as an aware datetime."""
    return dt.datetime.strptime(value, TIME_FORMAT).replace(tzinfo=ZoneInfo(tz))


def format_time(value: dt.datetime, tz: str) -> str:
    return value.astimezone(ZoneInfo(tz)).strftime(TIME_FORMAT)


def placeholder_script(task_type: str) -> str:
    return (
        f"echo 'porpoise: DolphinScheduler task type {task_type} is not supported here; this placeholder"
        f" fails (the original definition is kept in params.{ORIGINAL})' >&2\nexit 1"
    )


def mark(text: str, note: str) -> str:
    """``text`` with ``note`` appended once (importing an export of an import adds nothing)."""
    tag = f"[porpoise: {note}]"
    if tag in text:
        return text
    return f"{text} {tag}" if text else tag
