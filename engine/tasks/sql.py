"""SQL: statements against a named data source (POSTGRESQL, MYSQL, CLICKHOUSE, HIVE: the data source's type
decides the driver, engine/tasks/sql_dialects).

The worker runs ``python -m engine.tasks.sql_runner`` in the task's process group (so kill and timeout
work like any task; the kill cancels the running statement on the server). The connection params reach it
on its standard input (a pipe the runner reads once), never its environment (readable by every process of the
tenant's user while it runs), a file or the log. A query reads at most ``limit`` rows, writes at most
``maxRows`` of them to the log, and its columns can be exported as OUT params.

Parameters are bound, as DolphinScheduler binds them: each ``${name}`` becomes a bind placeholder of the data
source's driver (``$1`` for PostgreSQL, ``%s`` for MySQL and Hive, ``%(p1)s`` for ClickHouse; a quote pair around
it is eaten, so ``'${day}'`` binds the value) and its value is sent apart from the statement, so a value is
never SQL. ``!{name}`` is the one raw text substitution, for what the workflow's writers wrote only
(engine.tasks.placing.sql). PostgreSQL gets each value as the type it infers for its placeholder.

Besides DolphinScheduler's parameters (datasource, sql, sqlType, preStatements, postStatements, maxRows)
``loadFiles`` bulk-loads CSV files from the worker's disk with COPY ... FROM STDIN after the pre-statements
and before ``sql``, in the same transaction: ``[{file: <path or glob>, table: <name>, columns: [...],
header: true}]`` (a glob matching nothing fails the task). Files are read only from the worker's
``worker.sql_load_dirs``: the runner checks each matched file's real path (links resolved, so neither
``..`` nor a symbolic link leads out of them); a path outside fails the task naming it.

A query with ``sendEmail: true`` mails its rows to the EMAIL senders of alert group ``groupId`` under ``title``
(engine/tasks/sql_email.py).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from engine.tasks import placing
from engine.tasks.base import (
    MAX_STDIN,
    Launch,
    ParamError,
    TaskContext,
    TaskPlugin,
    describe_params,
    optional,
    require_str,
    runner_env,
)
from engine.tasks.sql_dialects import SOURCE_TYPES

SQL_TYPES = ("query", "non_query")


#: rows a query reads when ``limit`` is 0 or absent (DolphinScheduler's QUERY_LIMIT)
DEFAULT_LIMIT = 10000


def source_stdin(
    name: str, source: Mapping[str, Any], task_type: str | None, senders: Sequence[Mapping[str, Any]] = ()
) -> str:
    """The runner's standard input for data source ``name`` (its params, secrets open, as JSON, with the
    ``senders`` of a result e-mail under ``email_senders``); ParamError when the task's ``type`` (the
    DolphinScheduler field) names another type than the data source has, or the params are too large for the
    pipe."""
    kind = source_kind(source)
    if task_type and task_type.upper() != kind:
        raise ParamError("type", f"data source {name!r} is {kind}, not {task_type}")
    text = json.dumps({**source, "type": kind, **({"email_senders": list(senders)} if senders else {})})
    if len(text.encode()) > MAX_STDIN:
        raise ParamError("datasource", f"data source {name!r}: its params are over {MAX_STDIN} bytes")
    return text


def source_kind(source: Mapping[str, Any]) -> str:
    return str(source.get("type") or "POSTGRESQL").upper()


#: each driver's marker of the n-th bound value, and whether a literal % must be doubled beside them
_MARKERS: dict[str, tuple[Callable[[int], str], bool]] = {
    "POSTGRESQL": (lambda i: f"${i}", False),
    "MYSQL": (lambda i: "%s", True),
    "HIVE": (lambda i: "%s", True),
    "CLICKHOUSE": (lambda i: f"%(p{i})s", True),
}


def check_type(params: Mapping[str, Any]) -> None:
    kind = optional(params, "type", str, "")
    if kind and kind.upper() not in SOURCE_TYPES:
        raise ParamError("type", f"must be one of {', '.join(SOURCE_TYPES)}, got {kind!r}")


class SqlTask(TaskPlugin):
    task_type = "SQL"
    params_schema = describe_params(
        {
            "datasource": {"type": "string", "description": "name of a data source"},
            "type": {"enum": list(SOURCE_TYPES), "description": "the data source's type (checked when given)"},
            "sql": {"type": "string", "contentMediaType": "text/x-sql", "description": "the statement to run"},
            "sqlType": {"enum": list(SQL_TYPES), "default": "query", "description": "query: rows to the log"},
            "preStatements": {"type": "array", "items": {"type": "string"}, "description": "run first"},
            "postStatements": {"type": "array", "items": {"type": "string"}, "description": "run last"},
            "maxRows": {"type": "integer", "minimum": 0, "default": 1000, "description": "rows logged at most"},
            "limit": {"type": "integer", "minimum": 0, "default": 0, "description": "rows read at most (0: 10000)"},
            "sendEmail": {"type": "boolean", "default": False, "description": "query: mail the rows to groupId"},
            "groupId": {"type": ["integer", "null"], "minimum": 0,
                        "description": "id of the alert group whose EMAIL senders get the rows"},
            "title": {"type": ["string", "null"],
                      "description": "the e-mail's title (default: <task name> query result sets)"},
            "loadFiles": {
                "type": "array",
                "description": "CSV files bulk-loaded before sql: [{file, table, columns, header}]",
                "items": {"type": "object"},
            },
        },
        required=("datasource", "sql"),
        examples=(
            {"datasource": "warehouse", "sql": "select 1", "sqlType": "query"},
            {"datasource": "warehouse", "type": "POSTGRESQL", "sql": "select 1", "preStatements": ["select 0"],
             "postStatements": [], "maxRows": 10, "limit": 100,
             "loadFiles": [{"file": "a.csv", "table": "t", "columns": ["x"], "header": True}]},
            {"datasource": "warehouse", "sql": "select day, total from sales", "sqlType": "query", "sendEmail": True,
             "groupId": 2, "title": "sales on ${day}"},
        ),
    )  # fmt: skip

    @classmethod
    def validate(cls, params: Mapping[str, Any]) -> None:
        super().validate(params)
        require_str(params, "datasource")
        require_str(params, "sql")
        sql_type = optional(params, "sqlType", str, "query")
        if sql_type not in SQL_TYPES:
            raise ParamError("sqlType", f"must be one of {', '.join(SQL_TYPES)}, got {sql_type!r}")
        max_rows = optional(params, "maxRows", int, 1000)
        if max_rows < 0:
            raise ParamError("maxRows", "must be >= 0")
        if optional(params, "limit", int, 0) < 0:
            raise ParamError("limit", "must be >= 0")
        check_type(params)
        if optional(params, "sendEmail", bool, False):
            if sql_type != "query":
                raise ParamError("sendEmail", "needs sqlType query (only a query's rows can be mailed)")
            group = params.get("groupId")
            if not isinstance(group, int) or isinstance(group, bool) or group < 1:
                raise ParamError("groupId", "sendEmail needs the id of the alert group to mail the rows to")
        optional(params, "title", str, "")
        for name in ("preStatements", "postStatements"):
            stmts = optional(params, name, list, [])
            if not all(isinstance(s, str) for s in stmts):
                raise ParamError(name, "must be a list of SQL strings")
        for i, load in enumerate(optional(params, "loadFiles", list, [])):
            where = f"loadFiles[{i}]"
            if not isinstance(load, dict) or not isinstance(load.get("file"), str) or not load["file"].strip():
                raise ParamError(where, "needs file (a path or glob of CSV files on the worker)")
            if not isinstance(load.get("table"), str) or not load["table"].strip():
                raise ParamError(f"{where}.table", "is required")
            columns = load.get("columns", [])
            if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
                raise ParamError(f"{where}.columns", "must be a list of column names")
            if not isinstance(load.get("header", True), bool):
                raise ParamError(f"{where}.header", "must be true or false")

    def launch(self, ctx: TaskContext) -> Launch:
        p = ctx.task_params
        name = p["datasource"]
        source = ctx.datasources.get(name)
        if source is None:
            raise ParamError("datasource", f"data source {name!r} is not defined")
        if p.get("loadFiles") and not ctx.load_dirs:
            raise ParamError("loadFiles", "this worker allows no directory to load files from (worker.sql_load_dirs)")
        mail = p.get("sendEmail", False) and p.get("sqlType", "query") == "query"
        stdin = source_stdin(name, source, p.get("type"), ctx.email_senders if mail else ())
        marker, percent = _MARKERS.get(source_kind(source), _MARKERS["POSTGRESQL"])

        #: the declared type of each local parameter: a bound value goes to the server as that type (as
        #: DolphinScheduler's setInParameter binds it), others as text
        declared = {lp.prop: lp.type for lp in self.local_params(p) if lp.direct == "IN"}

        def bound(field: str, text: str) -> dict[str, Any]:
            try:
                statement, args, names = placing.sql_bound(text, ctx.values, ctx.when, ctx.trusted, marker, percent)
            except ParamError as exc:
                raise ParamError(field, f"{exc.field}: {exc.reason}") from None
            return {
                "sql": statement,
                "args": args,
                "names": names,
                "types": [declared.get(n, "VARCHAR") for n in names],
            }

        job = {
            "pre": [bound(f"preStatements[{i}]", s) for i, s in enumerate(p.get("preStatements", []))],
            "sql": bound("sql", p["sql"]),
            "post": [bound(f"postStatements[{i}]", s) for i, s in enumerate(p.get("postStatements", []))],
            "load": [
                {
                    "file": ctx.render(x["file"]),
                    "table": x["table"],
                    "columns": x.get("columns") or None,
                    "header": x.get("header", True),
                }
                for x in p.get("loadFiles", [])
            ],
            "load_dirs": list(ctx.load_dirs),
            "query": p.get("sqlType", "query") == "query",
            "max_rows": p.get("maxRows", 1000),
            "limit": p.get("limit") or DEFAULT_LIMIT,
            "out": [lp.prop for lp in self.local_params(p) if lp.direct == "OUT"],
            "list_out": [lp.prop for lp in self.local_params(p) if lp.direct == "OUT" and lp.type == "LIST"],
        }
        if mail:
            title = ctx.render(p.get("title") or "") or f"{ctx.task_name} query result sets"
            job["email"] = {"title": title, "group": p["groupId"]}
        return Launch(
            argv=[sys.executable, "-m", "engine.tasks.sql_runner", "job.json"],
            files={"job.json": json.dumps(job)},
            env=runner_env(),
            stdin=stdin,
        )
