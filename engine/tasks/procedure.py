"""PROCEDURE: call a stored procedure on a POSTGRESQL or MYSQL (MariaDB) data source, as DolphinScheduler does.

``method`` is the whole call statement with placeholders, e.g. ``CALL p(${a}, ${b})``: each ``${name}`` that
is an OUT entry of ``localParams`` becomes an OUT argument, any other is bound as an IN value (its value
resolved like any parameter, typed by its ``localParams`` entry: VARCHAR, INTEGER, LONG, FLOAT, DOUBLE,
DATE, TIME, TIMESTAMP, BOOLEAN). The OUT values become the task's OUT parameters, passed downstream.

PostgreSQL: procedures with OUT / INOUT arguments (``CALL`` answers their values as one row; an OUT argument
is passed as NULL). MySQL: the OUT arguments are session variables read back after the call. The runner is
engine/tasks/sql_runner.py (one connection, kill cancels the call on the server).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from typing import Any

from engine.tasks import placing
from engine.tasks.base import Launch, ParamError, TaskContext, TaskPlugin, describe_params, require_str, runner_env
from engine.tasks.sql import check_type, source_stdin
from engine.tasks.sql_dialects import IN_MARK, OUT_MARK, PROCEDURE_TYPES, SOURCE_TYPES

#: the placeholders of ``method``
PLACEHOLDER = re.compile(r"\$\{\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*\}")
_IN_MARK = re.compile(re.escape(IN_MARK))
#: localParams types an IN value may declare
IN_TYPES = ("VARCHAR", "INTEGER", "LONG", "FLOAT", "DOUBLE", "DATE", "TIME", "TIMESTAMP", "BOOLEAN")


class ProcedureTask(TaskPlugin):
    task_type = "PROCEDURE"
    params_schema = describe_params(
        {
            "datasource": {"type": "string", "description": "name of a POSTGRESQL or MYSQL data source"},
            "type": {"enum": list(SOURCE_TYPES), "description": "the data source's type (checked when given)"},
            "method": {
                "type": "string",
                "contentMediaType": "text/x-sql",
                "description": "the call with ${name} for each IN / OUT argument, e.g. CALL p(${a}, ${b})",
            },
        },
        required=("datasource", "method"),
        examples=(
            {
                "datasource": "warehouse",
                "type": "POSTGRESQL",
                "method": "CALL add_one(${a}, ${b})",
                "localParams": [
                    {"prop": "a", "direct": "IN", "type": "INTEGER", "value": "41"},
                    {"prop": "b", "direct": "OUT", "type": "INTEGER", "value": ""},
                ],
            },
        ),
    )

    @classmethod
    def validate(cls, params: Mapping[str, Any]) -> None:
        super().validate(params)
        require_str(params, "datasource")
        method = require_str(params, "method")
        check_type(params)
        kind = str(params.get("type") or "").upper()
        if kind and kind not in PROCEDURE_TYPES:
            raise ParamError("type", f"PROCEDURE runs on {' and '.join(PROCEDURE_TYPES)} data sources, not {kind}")
        declared = {p.prop: p for p in cls.local_params(params)}
        for name in PLACEHOLDER.findall(method):
            prop = declared.get(name)
            if prop is not None and prop.direct == "IN" and prop.type.upper() not in IN_TYPES:
                raise ParamError("localParams", f"{name}: an IN argument's type is one of {', '.join(IN_TYPES)}")

    def launch(self, ctx: TaskContext) -> Launch:
        p = ctx.task_params
        name = p["datasource"]
        source = ctx.datasources.get(name)
        if source is None:
            raise ParamError("datasource", f"data source {name!r} is not defined")
        kind = str(source.get("type") or "POSTGRESQL").upper()
        if kind not in PROCEDURE_TYPES:
            raise ParamError("datasource", f"{name!r} is {kind}: PROCEDURE runs on {' and '.join(PROCEDURE_TYPES)}")
        declared = {lp.prop: lp for lp in self.local_params(p)}
        ins: list[dict[str, str]] = []
        outs: list[str] = []

        def mark(match: re.Match[str]) -> str:
            prop = match.group(1)
            entry = declared.get(prop)
            if entry is not None and entry.direct == "OUT":
                outs.append(prop)
                return OUT_MARK
            if prop not in ctx.values:
                raise ParamError("method", f"${{{prop}}} is neither an OUT parameter nor a known value")
            ins.append({"prop": prop, "value": ctx.values[prop], "type": entry.type.upper() if entry else "VARCHAR"})
            return IN_MARK

        # $[...] time placeholders first (as text), then ${name} -> bound IN values and OUT arguments
        template = ctx.render(PLACEHOLDER.sub(lambda m: "\x01" + m.group(1) + "\x02", p["method"]))
        method = re.sub(r"\x01([^\x02]*)\x02", lambda m: mark(PLACEHOLDER.match("${" + m.group(1) + "}")), template)
        if kind == "MYSQL" and placing.quoted_marks(method, _IN_MARK):
            raise ParamError(
                "method",
                "an IN parameter inside quotes or a comment: the MySQL driver splices its value in as a quoted"
                " literal, so write ${name} without quotes (CALL p(${name}))",
            )
        display = method.replace(IN_MARK, "?").replace(OUT_MARK, "?")
        job = {"kind": "procedure", "method": method, "display": display, "ins": ins, "outs": outs}
        return Launch(
            argv=[sys.executable, "-m", "engine.tasks.sql_runner", "job.json"],
            files={"job.json": json.dumps(job)},
            env=runner_env(),
            stdin=source_stdin(name, source, p.get("type")),
        )
