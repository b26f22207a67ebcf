"""Runs one SQL task (see engine.tasks.sql). usage: python -m engine.tasks.sql_runner job.json"""

from __future__ import annotations

import asyncio
import datetime as dt
import decimal
import glob
import json
import os
import sys
from typing import Any

import asyncpg


def _cell(value: object) -> str:
    return "" if value is None else str(value)


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


async def _load(conn: asyncpg.Connection, load: dict, load_dirs: list[str]) -> None:
    for path in allowed_files(load["file"], load_dirs):
        status = await conn.copy_to_table(
            load["table"], source=path, columns=load["columns"], format="csv", header=load["header"]
        )
        print(f"load: {path} -> {load['table']}: {status}", flush=True)


_INTS = {"int2", "int4", "int8", "oid"}
_FLOATS = {"float4", "float8"}


def _typed(value: str, type_name: str, position: int) -> Any:
    """A bound value as the Python object asyncpg sends for the type PostgreSQL inferred for its placeholder."""
    try:
        if type_name in _INTS:
            return int(value)
        if type_name in _FLOATS:
            return float(value)
        if type_name == "numeric":
            return decimal.Decimal(value)
        if type_name == "bool":
            return value.strip().lower() in ("t", "true", "1", "yes", "y", "on")
        if type_name == "date":
            return dt.date.fromisoformat(value)
        if type_name in ("timestamp", "timestamptz"):
            return dt.datetime.fromisoformat(value)
    except (ValueError, decimal.InvalidOperation):
        raise ValueError(f"parameter ${position}: {value!r} is not a valid {type_name}") from None
    return value


async def _args(conn: asyncpg.Connection, statement: dict) -> list[Any]:
    if not statement["args"]:
        return []
    prepared = await conn.prepare(statement["sql"])
    types = prepared.get_parameters()
    return [_typed(v, t.name, i + 1) for i, (v, t) in enumerate(zip(statement["args"], types, strict=False))]


async def _execute(conn: asyncpg.Connection, statement: dict) -> str:
    return await conn.execute(statement["sql"], *await _args(conn, statement))


async def run(job: dict, dsn: str) -> int:
    conn = await asyncpg.connect(dsn, timeout=30)
    try:
        async with conn.transaction():
            for stmt in job["pre"]:
                print(f"pre: {stmt['sql']}", flush=True)
                await _execute(conn, stmt)
            for load in job.get("load", []):
                await _load(conn, load, job.get("load_dirs", []))
            if job["query"]:
                rows = await conn.fetch(job["sql"]["sql"], *await _args(conn, job["sql"]))
                columns = list(rows[0].keys()) if rows else []
                print(f"query returned {len(rows)} row(s)", flush=True)
                if columns:
                    print("\t".join(columns))
                for row in rows[: job["max_rows"]]:
                    print("\t".join(_cell(v) for v in row.values()))
                if len(rows) > job["max_rows"]:
                    print(f"... {len(rows) - job['max_rows']} more row(s) not shown", flush=True)
                for name in job["out"]:
                    if name not in columns:
                        continue
                    if name in job["list_out"]:
                        value = json.dumps([_cell(r[name]) for r in rows])
                    else:
                        value = _cell(rows[0][name]) if rows else ""
                    print(f"${{setValue({name}={value})}}", flush=True)
            else:
                status = await _execute(conn, job["sql"])
                print(f"ok: {status}", flush=True)
            for stmt in job["post"]:
                print(f"post: {stmt['sql']}", flush=True)
                await _execute(conn, stmt)
    finally:
        await conn.close()
    return 0


def main() -> int:
    with open(sys.argv[1]) as fh:
        job = json.load(fh)
    dsn = sys.stdin.read().strip()  # the worker's pipe: the connection string, then its end
    try:
        return asyncio.run(run(job, dsn))
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, ValueError) as exc:
        print(f"SQL task failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
