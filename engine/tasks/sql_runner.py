"""Runs one SQL or PROCEDURE task (see engine.tasks.sql, engine.tasks.procedure), or tests a data source.

    python -m engine.tasks.sql_runner job.json     the task described by job.json
    python -m engine.tasks.sql_runner --probe [S]  connect (within S seconds), run SELECT 1, print the server's
                                                   version

The data source's connection params (type, host, port, database, user, password, other; secrets opened)
come on standard input (JSON, a pipe the worker fills and closes; the runner reads it once), never in the
environment (readable by every process of the tenant's user while it runs), a file or the log; so do, for a
query with ``sendEmail``, the params of the alert group's EMAIL senders (key ``email_senders``). Each
statement comes with the values bound to its placeholders (``{"sql", "args"}``, made by
engine/tasks/placing.py: a value is never SQL). One connection (session) serves the whole task. SIGTERM (the
worker's kill, or the task's timeout) cancels the running statement on the server from a second connection
before the runner exits (engine/tasks/sql_dialects)."""

from __future__ import annotations

import asyncio
import datetime as dt
import glob
import json
import os
import signal
import sys
from collections.abc import Mapping
from typing import Any

from engine.tasks.sql_dialects import Rows, Session, SqlError, session_for

#: the most standard input the runner reads (the data source's params)
MAX_SOURCE_BYTES = 64 * 1024
#: exit code of a runner ended by SIGTERM (128 + 15, what a shell reports)
KILLED = 143


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    return str(value)


def allowed_files(pattern: str, load_dirs: list[str]) -> list[str]:
    """The files ``pattern`` matches, each checked to lie, links resolved, under one of ``load_dirs``
    (worker.sql_load_dirs); PermissionError naming the first that does not."""
    roots = [os.path.realpath(d) for d in load_dirs]
    files = sorted(glob.glob(pattern))
    if not files:
        raise FileNotFoundError(f"loadFiles: no file matches {pattern}")
    for path in files:
        real = os.path.realpath(path)
        if not os.path.isabs(path) or not any(os.path.commonpath([real, root]) == root for root in roots):
            raise PermissionError(
                f"loadFiles: {path} is outside the directories this worker loads from (worker.sql_load_dirs)"
            )
    return files


async def _load(session: Session, load: dict, load_dirs: list[str]) -> None:
    conn = getattr(session, "conn", None)
    if conn is None or not hasattr(conn, "copy_to_table"):
        raise SqlError("loadFiles: only POSTGRESQL data sources load files")
    for path in allowed_files(load["file"], load_dirs):
        status = await conn.copy_to_table(
            load["table"], source=path, columns=load["columns"], format="csv", header=load["header"]
        )
        print(f"load: {path} -> {load['table']}: {status}", flush=True)


def set_value(name: str, value: str) -> None:
    print(f"${{setValue({name}={value})}}", flush=True)


def print_rows(result: Rows, display: int) -> None:
    print(f"query returned {len(result.rows)} row(s){' (limit reached)' if result.truncated else ''}", flush=True)
    if result.columns:
        print("\t".join(result.columns))
    for row in result.rows[:display]:
        print("\t".join(_cell(v) for v in row))
    if len(result.rows) > display:
        print(f"... {len(result.rows) - display} more row(s) not shown", flush=True)


def out_values(result: Rows, out: list[str], list_out: list[str]) -> dict[str, str]:
    """OUT params from a query: a LIST one takes its column's values (a JSON array), any other the first
    row's value ("" without rows); a name no column has is left unset."""
    values: dict[str, str] = {}
    for name in out:
        if name not in result.columns:
            continue
        i = result.columns.index(name)
        if name in list_out:
            values[name] = json.dumps([_cell(r[i]) for r in result.rows])
        else:
            values[name] = _cell(result.rows[0][i]) if result.rows else ""
    return values


def bound_args(session: Session, stmt: dict) -> list[Any]:
    """A statement's bound values, each as its declared type where the session's driver formats by type."""
    if not session.typed_binds or "types" not in stmt:
        return list(stmt["args"])
    return [session.bind(typed(v, t, n)) for v, t, n in zip(stmt["args"], stmt["types"], stmt["names"], strict=True)]


async def run_sql(session: Session, job: dict) -> Rows | None:
    """The task's statements; the query's rows (None for a non-query)."""
    for stmt in job["pre"]:
        print(f"pre: {stmt['sql']}", flush=True)
        await session.execute(stmt["sql"], bound_args(session, stmt))
    for load in job.get("load", []):
        await _load(session, load, job.get("load_dirs", []))
    main = job["sql"]
    if job["query"]:
        result = await session.query(main["sql"], int(job.get("limit") or 10000), bound_args(session, main))
        print_rows(result, job["max_rows"])
        for name, value in out_values(result, job["out"], job["list_out"]).items():
            set_value(name, value)
    else:
        result = None
        count = await session.execute(main["sql"], bound_args(session, main))
        print(f"ok: {count} row(s) affected" if count >= 0 else "ok", flush=True)
        if job["out"]:  # as in DolphinScheduler: the first OUT param takes the last statement's count
            set_value(job["out"][0], str(count))
    for stmt in job["post"]:
        print(f"post: {stmt['sql']}", flush=True)
        await session.execute(stmt["sql"], bound_args(session, stmt))
    return result


def typed(value: str, kind: str, name: str) -> Any:
    """An IN value as the Python value its declared type binds as."""
    try:
        match kind:
            case "INTEGER" | "LONG":
                return int(value)
            case "FLOAT" | "DOUBLE":
                return float(value)
            case "BOOLEAN":
                if value.lower() not in ("true", "false", "1", "0"):
                    raise ValueError("expected true or false")
                return value.lower() in ("true", "1")
            case "DATE":
                return dt.date.fromisoformat(value)
            case "TIME":
                return dt.time.fromisoformat(value)
            case "TIMESTAMP":
                return dt.datetime.fromisoformat(value)
            case _:
                return value
    except ValueError as exc:
        raise SqlError(f"IN parameter {name}: {value!r} is not a {kind}: {exc}") from None


async def run_procedure(session: Session, job: dict) -> None:
    ins = [session.bind(typed(p["value"], p["type"], p["prop"])) for p in job["ins"]]
    outs: list[str] = job["outs"]
    print(f"call: {job['display']}", flush=True)
    values = await session.call(job["method"], ins, outs)
    if len(values) < len(outs):
        missing = outs[len(values)]
        raise SqlError(
            f"OUT parameter {missing}: the procedure returned {len(values)} OUT value(s) for {len(outs)} OUT "
            "parameter(s) in method"
        )
    for name, value in zip(outs, values, strict=False):
        set_value(name, _cell(value))


async def _terminate(session: Session, opened: bool) -> None:
    """SIGTERM: cancel the running statement on the server, then end."""
    print("[porpoise] killed: cancelling the running statement on the server", flush=True)
    if opened:
        try:
            await asyncio.wait_for(session.cancel(), session.timeout)
            print("[porpoise] statement cancelled", flush=True)
        except (SqlError, OSError, TimeoutError, Exception) as exc:
            print(f"[porpoise] cancel failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(KILLED)  # the blocked statement (a driver's thread) must not hold the exit


async def run(job: dict, source: Mapping[str, Any], senders: list[dict[str, Any]] | None = None) -> int:
    senders = senders or []
    session = session_for(source)
    opened = False
    loop = asyncio.get_running_loop()
    ending: list[asyncio.Task] = []
    loop.add_signal_handler(
        signal.SIGTERM, lambda: ending or ending.append(loop.create_task(_terminate(session, opened)))
    )
    await session.open()
    opened = True
    result = None
    try:
        await session.begin()
        if job.get("kind") == "procedure":
            await run_procedure(session, job)
        else:
            result = await run_sql(session, job)
        await session.commit()
    finally:
        if ending:  # killed: the statement ends (or fails) because of the cancel; the kill's exit is the end
            await ending[0]
        await session.close()
    if result is not None and job.get("email"):  # after the commit: the mail reports what was done
        from engine.tasks.sql_email import send_result

        await send_result(job["email"], senders, result)
    return 0


async def probe(source: Mapping[str, Any], timeout: float) -> int:
    session = session_for(source, timeout)
    await session.open()
    try:
        await session.begin()  # as a task's statements run (PostgreSQL reads rows through a cursor: it needs one)
        rows = await session.query("SELECT 1", 1)
        if not rows.rows or str(rows.rows[0][0]) != "1":
            raise SqlError(f"SELECT 1 returned {rows.rows!r}")
        print(await session.version(), flush=True)
    finally:
        await session.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    source = json.loads(sys.stdin.read(MAX_SOURCE_BYTES) or "{}")  # the worker's pipe, then its end
    senders = source.pop("email_senders", [])  # sendEmail: the alert group's EMAIL senders (engine.tasks.sql_email)
    testing = bool(args) and args[0] == "--probe"
    what = "data source test" if testing else "SQL task"
    try:
        if testing:
            return asyncio.run(probe(source, float(args[1]) if len(args) > 1 else 15.0))
        with open(args[0]) as fh:
            job = json.load(fh)
        what = "PROCEDURE task" if job.get("kind") == "procedure" else what
        return asyncio.run(run(job, source, senders))
    except SqlError as exc:
        print(f"{what} failed: {exc}", file=sys.stderr, flush=True)
        return 1
    except Exception as exc:  # a driver's own error: one line naming it, no traceback
        print(f"{what} failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
