"""JVM jobs start to end, side by side in one run: a trivial MR job (the word count the tests compile with
``javac``, in Hadoop's local runner), a trivial SPARK task of ``programType`` JAVA (a jar that sums three
numbers) and a PySpark task doing the same sum, both spark-submit ``local[1]`` with the same resources.

On a standalone-shaped stack (private etcd + PostgreSQL, 1 master, 1 worker), one one-task workflow per kind,
``runs`` times each, interleaved so a change of load meets every kind (bench.common.Run): total = command
inserted -> instance finished, task = the task's own start -> end. At ``full`` size each kind's first run
(the JVM's classes read from disk the first time) is reported apart, not in the p50. The ratios divide the
MR and jar p50 totals by the PySpark one.

``python -m bench.jars [tiny|full]``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import Any

import asyncpg

from bench.common import bench_stack, main, percentile, rounded, run_workflow, save_released, start_nodes, workdir
from engine.workflows.model import TaskDef
from tests.java_jobs import SPARK_SUM, WORD_COUNT, build_jar

SIZES = {"tiny": {"runs": 1, "first_apart": False}, "full": {"runs": 3, "first_apart": True}}
KINDS = ("mr", "spark_jar", "pyspark")
#: what the jar's SparkSum computes for mainArgs "7": (1 + 2 + 3) * 7, the same sum in PySpark
PYSPARK_SUM = """
from pyspark.sql import SparkSession
spark = SparkSession.builder.appName("porpoise-sum").getOrCreate()
sc = spark.sparkContext
print("SUM=%d" % sc.parallelize([1, 2, 3], 2).map(lambda x: x * 7).reduce(lambda a, b: a + b))
spark.stop()
"""
#: the word count's input: 200 lines of six words
WORDS = "porpoise dolphin whale orca narwhal beluga\n" * 200


def _spark(**kw: Any) -> dict[str, Any]:
    return {"master": "local[1]", "driverMemory": "512m", "executorMemory": "512m",
            "conf": {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}, **kw}  # fmt: skip


def task_params(jars: Path, data: Path) -> dict[str, tuple[str, dict[str, Any]]]:
    """Each kind's task type and parameters; a word count writes to a directory of its task instance's own."""
    out = f"{data}/out-${{system.task.instance.id}}"
    return {
        "mr": ("MR", {"programType": "JAVA", "mainJar": str(jars / "WordCount.jar"), "mainClass": "WordCount",
                      "mainArgs": f"{data / 'words.txt'} {out}"}),
        "spark_jar": ("SPARK", _spark(programType="JAVA", mainJar=str(jars / "SparkSum.jar"), mainClass="SparkSum",
                                      mainArgs="7")),
        "pyspark": ("SPARK", _spark(rawScript=PYSPARK_SUM)),
    }  # fmt: skip


async def _measure(dsn: str, tasks: dict[str, tuple[str, dict[str, Any]]], params: dict[str, Any]) -> dict[str, Any]:
    conn = await asyncpg.connect(dsn)
    try:
        codes = {
            kind: await save_released(conn, f"jars_{kind}", [TaskDef(kind, t, p)]) for kind, (t, p) in tasks.items()
        }
    finally:
        await conn.close()
    out: dict[str, Any] = {"load_avg_1m_start": os.getloadavg()[0]}
    successes: list[bool] = []
    if params["first_apart"]:
        for kind, code in codes.items():
            first = await run_workflow(dsn, code, timeout=600)
            if not first.success:
                out[f"{kind}_failure"] = first.log_tail()
            out[f"{kind}_first_total_s"] = first.total
            successes.append(first.success)
    totals: dict[str, list[float]] = {kind: [] for kind in codes}
    task_s: dict[str, list[float]] = {kind: [] for kind in codes}
    for _ in range(params["runs"]):
        for kind, code in codes.items():  # interleaved
            r = await run_workflow(dsn, code, timeout=600)
            if not r.success and f"{kind}_failure" not in out:
                out[f"{kind}_failure"] = r.log_tail()
            totals[kind].append(r.total)
            task_s[kind].append(r.task)
            successes.append(r.success)
    for kind in codes:
        out |= {
            f"{kind}_total_p50_s": percentile(totals[kind], 50),
            f"{kind}_total_max_s": max(totals[kind]),
            f"{kind}_task_p50_s": percentile(task_s[kind], 50),
        }
    for kind in ("mr", "spark_jar"):
        out[f"{kind}_to_pyspark"] = out[f"{kind}_total_p50_s"] / out["pyspark_total_p50_s"]
    out["load_avg_1m_end"] = os.getloadavg()[0]
    out["all_success"] = float(all(successes))
    out["runs"] = len(successes)
    return out


def run(size: str = "full") -> dict[str, Any]:
    params = SIZES[size]
    result: dict[str, Any] = {"benchmark": "jars", "size": size}
    with workdir() as base, contextlib.ExitStack() as cleanup:
        jars, data = base / "jars", base / "data"
        build_jar(jars, "WordCount", WORD_COUNT)
        build_jar(jars, "SparkSum", SPARK_SUM)
        data.mkdir(mode=0o777)
        data.chmod(0o777)  # tasks run as their tenant: the word counts write their output here
        (data / "words.txt").write_text(WORDS)
        (data / "words.txt").chmod(0o644)
        stack = bench_stack(base, cleanup)
        start_nodes(stack)
        assert stack.postgres is not None
        result |= asyncio.run(_measure(stack.postgres.dsn, task_params(jars, data), params))
    return rounded(result)


if __name__ == "__main__":
    main(run)
