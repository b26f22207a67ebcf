"""SQL task timings per data-source type, side by side in one run: PostgreSQL (the stack's own server),
MariaDB (MYSQL), ClickHouse and Spark's Thrift server (HIVE), the last three private servers started as the
test suite starts them (tests/sql_servers.py).

On a standalone-shaped stack (private etcd + PostgreSQL, 1 master, 1 worker), a one-task workflow whose
SQL task runs ``SELECT 1 AS n`` (a query: one row to the log and an OUT parameter) on each type in turn,
``runs`` times, interleaved so a change of load meets every type (bench.common.Run):

- total: command inserted -> instance finished (wall clock, polled every 20 ms);
- dispatch: the task instance's submit time (the master dispatched it) -> its end (the result recorded);
- task: the task instance's own start -> end (the runner's process: connect, query, close).

Each type's dispatch-to-result p50 is also given as a ratio to PostgreSQL's (``<type>_to_postgresql``).

``python -m bench.sql [tiny|full]``: ``tiny`` (the test suite's smoke round) is PostgreSQL and MariaDB only;
``full`` adds ClickHouse and HIVE (a Spark JVM: minutes to start on a loaded machine).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from typing import Any

import asyncpg

from bench.common import bench_stack, main, percentile, rounded, run_workflow, save_released, start_nodes, workdir
from engine.workflows.model import TaskDef
from tests import sql_servers

SIZES = {
    "tiny": {"runs": 2, "kinds": ("POSTGRESQL", "MYSQL")},
    "full": {"runs": 20, "kinds": ("POSTGRESQL", "MYSQL", "CLICKHOUSE", "HIVE")},
}


async def _measure(dsn: str, sources: dict[str, dict[str, Any]], runs: int) -> dict[str, Any]:
    conn = await asyncpg.connect(dsn)
    codes: dict[str, int] = {}
    try:
        for kind, params in sources.items():
            name = f"bench_{kind.lower()}"
            await conn.execute(
                "INSERT INTO datasource (name, type, connection_params) VALUES ($1, $2, $3::jsonb)",
                name, kind, json.dumps(params),
            )  # fmt: skip
            out_n = [{"prop": "n", "direct": "OUT", "type": "INTEGER"}]
            task = TaskDef("q", "SQL", {"datasource": name, "sql": "SELECT 1 AS n", "localParams": out_n})
            codes[kind] = await save_released(conn, f"sql_{kind.lower()}", [task])
    finally:
        await conn.close()
    out: dict[str, Any] = {"load_avg_1m_start": os.getloadavg()[0]}
    successes: list[bool] = []
    for kind, code in codes.items():  # each type's first task: its driver's import and first connection, apart
        first = await run_workflow(dsn, code, timeout=600)
        out[f"{kind.lower()}_first_total_s"] = first.total
        successes.append(first.success)
    figures: dict[str, dict[str, list[float]]] = {k: {"total": [], "dispatch": [], "task": []} for k in codes}
    for _ in range(runs):
        for kind, code in codes.items():  # interleaved
            r = await run_workflow(dsn, code, timeout=600)
            figures[kind]["total"].append(r.total)
            figures[kind]["dispatch"].append(r.dispatch)
            figures[kind]["task"].append(r.task)
            successes.append(r.success)
    for kind, f in figures.items():
        k = kind.lower()
        out |= {
            f"{k}_dispatch_to_result_p50_s": percentile(f["dispatch"], 50),
            f"{k}_task_p50_s": percentile(f["task"], 50),
            f"{k}_total_p50_s": percentile(f["total"], 50),
            f"{k}_total_max_s": max(f["total"]),
        }
    reference = out["postgresql_dispatch_to_result_p50_s"]
    for kind in figures:
        if kind != "POSTGRESQL":
            out[f"{kind.lower()}_to_postgresql"] = out[f"{kind.lower()}_dispatch_to_result_p50_s"] / reference
    out["load_avg_1m_end"] = os.getloadavg()[0]
    out["all_success"] = float(all(successes))
    out["runs"] = len(successes)
    return out


def run(size: str = "full") -> dict[str, Any]:
    params = SIZES[size]
    kinds = params["kinds"]
    result: dict[str, Any] = {"benchmark": "sql", "size": size}
    with workdir() as base, contextlib.ExitStack() as cleanup:  # each one stopped even when another's stop fails
        stack = bench_stack(base, cleanup)
        assert stack.postgres is not None
        sources: dict[str, dict[str, Any]] = {"POSTGRESQL": {"dsn": stack.postgres.dsn}}
        if "MYSQL" in kinds:
            maria = sql_servers.start_mariadb(base / "mariadb")
            cleanup.callback(sql_servers.stop_mariadb, maria)
            sources["MYSQL"] = maria.source()
        if "CLICKHOUSE" in kinds:
            click = sql_servers.start_clickhouse(base / "clickhouse")
            cleanup.callback(sql_servers.stop_clickhouse, click)
            sources["CLICKHOUSE"] = click.source()
        if "HIVE" in kinds:
            hive = sql_servers.start_hive(base / "hive")
            cleanup.callback(sql_servers.stop_hive, hive)
            sources["HIVE"] = hive.source()
        start_nodes(stack)
        plain = {kind: {k: v for k, v in s.items() if k != "type"} for kind, s in sources.items()}
        result |= asyncio.run(_measure(stack.postgres.dsn, plain, params["runs"]))
    return rounded(result)


if __name__ == "__main__":
    main(run)
