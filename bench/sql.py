"""SQL task timings per data-source type, side by side in one run: PostgreSQL (the stack's own server),
MariaDB (MYSQL), ClickHouse and, with ``hive``, Spark's Thrift server (HIVE), the last three private
servers started as the test suite starts them (tests/sql_servers.py).

On a standalone-shaped stack (private etcd + PostgreSQL, 1 master, 1 worker), a one-task workflow whose
SQL task runs ``SELECT 1 AS n`` (a query: one row to the log and an OUT parameter) on each type in turn,
``runs`` times, interleaved so a change of load meets every type:

- total: command inserted -> instance finished (wall clock, polled every 20 ms);
- dispatch: the task instance's submit time (the master dispatched it) -> its end (the result recorded);
- task: the task instance's own start -> end (the runner's process: connect, query, close).

``python -m bench.sql [tiny|full|hive]``: ``hive`` is ``full`` with HIVE as well (a Spark JVM; minutes to
start on a loaded machine).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

import asyncpg

from bench.common import bench_config, main, percentile, rounded, save_released, workdir
from engine.infra.stack import Stack
from engine.workflows.model import TaskDef
from tests import sql_servers

SIZES = {
    "tiny": {"runs": 2, "kinds": ("POSTGRESQL", "MYSQL")},
    "full": {"runs": 20, "kinds": ("POSTGRESQL", "MYSQL", "CLICKHOUSE")},
    "hive": {"runs": 20, "kinds": ("POSTGRESQL", "MYSQL", "CLICKHOUSE", "HIVE")},
}
FINAL = (3, 5, 6, 7)
SUCCESS = 7


async def _run_once(dsn: str, code: int) -> tuple[float, float, float, int]:
    """Start the workflow; (total, dispatch -> end, task seconds, final state)."""
    conn = await asyncpg.connect(dsn)
    try:
        t0 = time.monotonic()
        cid = await conn.fetchval(
            "INSERT INTO command (command_type, workflow_definition_code) VALUES (0, $1) RETURNING id", code
        )
        deadline = t0 + 600
        while True:
            row = await conn.fetchrow(
                "SELECT id, state FROM workflow_instance WHERE command_id = $1 AND state = ANY($2)", cid, list(FINAL)
            )
            if row is not None:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"workflow {code} not finished after 600 s")
            await asyncio.sleep(0.02)
        total = time.monotonic() - t0
        task = await conn.fetchrow(
            "SELECT submit_time, start_time, end_time FROM task_instance WHERE workflow_instance_id = $1", row["id"]
        )
        dispatch = (task["end_time"] - task["submit_time"]).total_seconds()
        return total, dispatch, (task["end_time"] - task["start_time"]).total_seconds(), int(row["state"])
    finally:
        await conn.close()


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
    out: dict[str, Any] = {}
    states: list[int] = []
    for kind, code in codes.items():  # each type's first task: its driver's import and first connection, apart
        total, _, _, state = await _run_once(dsn, code)
        out[f"{kind.lower()}_first_total_s"] = total
        states.append(state)
    figures: dict[str, dict[str, list[float]]] = {k: {"total": [], "dispatch": [], "task": []} for k in codes}
    for _ in range(runs):
        for kind, code in codes.items():  # interleaved
            total, dispatch, task, state = await _run_once(dsn, code)
            figures[kind]["total"].append(total)
            figures[kind]["dispatch"].append(dispatch)
            figures[kind]["task"].append(task)
            states.append(state)
    for kind, f in figures.items():
        k = kind.lower()
        out |= {
            f"{k}_dispatch_to_result_p50_s": percentile(f["dispatch"], 50),
            f"{k}_task_p50_s": percentile(f["task"], 50),
            f"{k}_total_p50_s": percentile(f["total"], 50),
            f"{k}_total_max_s": max(f["total"]),
        }
    out["all_success"] = float(all(s == SUCCESS for s in states))
    out["runs"] = len(states)
    return out


def run(size: str = "full") -> dict[str, Any]:
    params = SIZES[size]
    kinds = params["kinds"]
    result: dict[str, Any] = {"benchmark": "sql", "size": size}
    with workdir() as base, contextlib.ExitStack() as cleanup:  # each one stopped even when another's stop fails
        stack = Stack(base / "stack", bench_config())
        cleanup.callback(stack.stop_all)
        stack.start_infra()
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
        stack.start_node("master", "master", ["logging.level=warning", "master.max_cpu_load_avg=100000"])
        stack.start_node("worker", "worker", ["logging.level=warning", "worker.max_cpu_load_avg=100000"])
        plain = {kind: {k: v for k, v in s.items() if k != "type"} for kind, s in sources.items()}
        result |= asyncio.run(_measure(stack.postgres.dsn, plain, params["runs"]))
    return rounded(result)


if __name__ == "__main__":
    main(run)
