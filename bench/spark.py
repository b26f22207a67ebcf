"""SPARK task timings, side by side in one run: spark-submit ``local[1]``, spark-submit on a Spark
standalone cluster (a Spark master and two Spark workers, one core and 512 MB each), and a Spark Connect
server (``local[2]``, long-lived: no JVM per task).

On a standalone-shaped stack (private etcd + PostgreSQL, 1 master, 1 worker):

- trivial: a one-task workflow whose PySpark task counts ``range(10)`` and sets an OUT parameter; total =
  command inserted -> instance finished (wall clock, polled every 20 ms), task = the task instance's own
  start -> end. p50 and max over the runs of each mode.
- example: the example pipeline's Spark step (examples/taxi/clean_aggregate.py on one generated day) as
  a one-task workflow; the task's duration.

The Connect server's first query pays its JIT warm-up once per server, not per task: reported apart
(``connect_first_total_s``), not in the p50.

``python -m bench.spark connect``: the trivial task through Spark Connect only, forked by the worker's fork
server (worker.spark_connect_prefork, worker group ``default``) and started as a new Python process (a
second worker with it off, group ``spawn``), CONNECT_RUNS runs of each, interleaved; no cluster, no
spark-submit.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import asyncpg

from bench.common import (
    UNGUARDED,
    bench_stack,
    main,
    percentile,
    rounded,
    run_workflow,
    save_released,
    start_nodes,
    workdir,
)
from engine.infra.spark import SparkCluster, SparkConnectServer
from engine.workflows.model import TaskDef

SIZES = {"tiny": {"trivial": 1, "example": 1, "rows": 5000}, "full": {"trivial": 5, "example": 1, "rows": 100000}}
#: runs of each mode in ``connect``
CONNECT_RUNS = 10
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "taxi"
DATE = "20260115"
TRIVIAL = """
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
print("${setValue(n=%d)}" % spark.range(10).count())
"""


def _params(master: str, **kw: Any) -> dict[str, Any]:
    return {"master": master, "driverMemory": "512m", "executorMemory": "512m",
            "conf": {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}, **kw}  # fmt: skip


async def _save(dsn: str, name: str, params: dict[str, Any], group: str = "default") -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return await save_released(conn, name, [TaskDef("spark", "SPARK", params, worker_group=group)])
    finally:
        await conn.close()


async def _measure(dsn: str, modes: dict[str, str], params: dict[str, Any], day: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    successes: list[bool] = []
    codes = {
        mode: await _save(dsn, f"trivial_{mode}", _params(master, rawScript=TRIVIAL)) for mode, master in modes.items()
    }
    example_args = f"--day-dir {day} --date {DATE}"
    examples = {
        mode: await _save(
            dsn, f"example_{mode}", _params(master, mainFile=str(EXAMPLE / "clean_aggregate.py"), mainArgs=example_args)
        )
        for mode, master in modes.items()
    }
    first = await run_workflow(dsn, codes["connect"])  # the server's JIT warm-up, once per server
    out["connect_first_total_s"] = first.total
    successes.append(first.success)
    for mode in modes:
        totals, tasks = [], []
        for _ in range(params["trivial"]):
            r = await run_workflow(dsn, codes[mode])
            totals.append(r.total)
            tasks.append(r.task)
            successes.append(r.success)
        out |= {
            f"trivial_{mode}_total_p50_s": percentile(totals, 50),
            f"trivial_{mode}_total_max_s": max(totals),
            f"trivial_{mode}_task_p50_s": percentile(tasks, 50),
        }
    for mode in modes:
        tasks = []
        for _ in range(params["example"]):
            r = await run_workflow(dsn, examples[mode])
            tasks.append(r.task)
            successes.append(r.success)
        out[f"example_{mode}_task_p50_s"] = percentile(tasks, 50)
    out["all_success"] = float(all(successes))
    out["runs"] = len(successes)
    return out


async def _measure_connect(dsn: str, runs: int) -> dict[str, Any]:
    groups = {"prefork": "default", "spawn": "spawn"}
    codes = {mode: await _save(dsn, f"trivial_{mode}", _params("connect", rawScript=TRIVIAL), group)
             for mode, group in groups.items()}  # fmt: skip
    out: dict[str, Any] = {"load_avg_1m_start": os.getloadavg()[0]}
    successes: list[bool] = []
    for mode in groups:  # each worker's first task: the server's JIT warm-up, the fork server's start
        first = await run_workflow(dsn, codes[mode])
        out[f"connect_{mode}_first_total_s"] = first.total
        successes.append(first.success)
    totals: dict[str, list[float]] = {mode: [] for mode in groups}
    tasks: dict[str, list[float]] = {mode: [] for mode in groups}
    for _ in range(runs):
        for mode in groups:  # interleaved: a change of load meets both modes
            r = await run_workflow(dsn, codes[mode])
            totals[mode].append(r.total)
            tasks[mode].append(r.task)
            successes.append(r.success)
    for mode in groups:
        out |= {
            f"trivial_connect_{mode}_total_p50_s": percentile(totals[mode], 50),
            f"trivial_connect_{mode}_total_max_s": max(totals[mode]),
            f"trivial_connect_{mode}_task_p50_s": percentile(tasks[mode], 50),
            f"trivial_connect_{mode}_task_max_s": max(tasks[mode]),
        }
    out["load_avg_1m_end"] = os.getloadavg()[0]
    out["all_success"] = float(all(successes))
    out["runs"] = len(successes)
    return out


def run_connect() -> dict[str, Any]:
    result: dict[str, Any] = {"benchmark": "spark", "size": "connect"}
    with workdir() as base, contextlib.ExitStack() as cleanup:
        connect = SparkConnectServer(base / "spark", master="local[2]")
        cleanup.callback(connect.stop)
        stack = bench_stack(base, cleanup)
        connect.start()
        start_nodes(stack, f"worker.spark_connect_url={connect.url}", worker="worker-prefork")
        stack.start_node("worker", "worker-spawn", [
            "logging.level=warning", *UNGUARDED["worker"], f"worker.spark_connect_url={connect.url}",
            "worker.group=spawn", "worker.spark_connect_prefork=false",
            f"worker.exec_dir={base / 'exec-spawn'}", f"worker.log_dir={base / 'logs-spawn'}",
        ])  # fmt: skip
        assert stack.postgres is not None
        result |= asyncio.run(_measure_connect(stack.postgres.dsn, CONNECT_RUNS))
    return rounded(result)


def run(size: str = "full") -> dict[str, Any]:
    if size == "connect":
        return run_connect()
    params = SIZES[size]
    result: dict[str, Any] = {"benchmark": "spark", "size": size}
    with workdir() as base:
        day = base / "data" / DATE
        subprocess.run(
            [sys.executable, str(EXAMPLE / "generate.py"), "--date", DATE, "--rows", str(params["rows"]),
             "--out", str(day)],
            check=True, capture_output=True, timeout=300,
        )  # fmt: skip
        cluster = SparkCluster(base / "spark", workers=2, worker_cores=1, worker_memory="512m")
        connect = SparkConnectServer(base / "spark", master="local[2]")
        with contextlib.ExitStack() as cleanup:  # each one stopped even when another's stop fails
            cleanup.callback(cluster.stop)
            cleanup.callback(connect.stop)
            stack = bench_stack(base, cleanup)
            cluster.start()
            connect.start()
            start_nodes(stack, f"worker.spark_connect_url={connect.url}")
            assert stack.postgres is not None
            modes = {"local": "local[1]", "cluster": cluster.master_url, "connect": "connect"}
            result |= asyncio.run(_measure(stack.postgres.dsn, modes, params, day))
    return rounded(result)


if __name__ == "__main__":
    main(run)
