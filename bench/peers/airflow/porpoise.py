"""The four workloads on Porpoise: bench/engine.py's own measurements, on a stack whose worker runs as many
tasks at once as Airflow's executor (PARALLELISM)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import asyncpg
import psutil

from bench import engine
from bench.common import UNGUARDED, bench_config
from bench.peers.airflow.cluster import PARALLELISM
from bench.peers.airflow.results import Incorrect
from engine.infra.stack import Stack


class PorpoiseStack:
    """A private etcd + PostgreSQL, one master, one worker, the API; stopped by :meth:`stop`."""

    def __init__(self, base: Path) -> None:
        self.stack = Stack(base / "stack", bench_config())
        self.procs: list[psutil.Process] = []
        self.dsn = ""
        self.api_url = ""
        #: task instances the workloads have run so far (what :meth:`check` expects to find)
        self.expected_tasks = 0

    def start(self) -> None:
        self.stack.start_infra()
        master = self.stack.start_node("master", "master", ["logging.level=warning", *UNGUARDED["master"]])
        worker = self.stack.start_node(
            "worker", "worker", [f"worker.exec_slots={PARALLELISM}", "logging.level=warning", *UNGUARDED["worker"]]
        )
        api = self.stack.start_node("api", "api", ["logging.level=warning"])
        assert api.record is not None and self.stack.postgres is not None
        self.api_url = f"http://127.0.0.1:{api.record.extra['port']}"
        self.dsn = self.stack.postgres.dsn
        self.procs = [psutil.Process(p.record.pid) for p in (master, worker) if p.record]

    def stop(self) -> None:
        self.stack.stop_all()

    async def fanout(self, tasks: int) -> dict[str, float]:
        r = await engine._throughput(self.dsn, 1, tasks, self.procs)
        self.expected_tasks += tasks
        if r["throughput_all_success"] != 1.0 or r["throughput_tasks"] != tasks or r["throughput_max_attempt"] != 1:
            raise Incorrect(f"Porpoise fan-out: {r}")
        return {"fanout_tasks_per_s": r["throughput_tasks_per_s"]}

    async def chain(self, tasks: int) -> dict[str, float]:
        r = await engine._chain(self.dsn, tasks)
        self.expected_tasks += tasks
        return {"chain_gap_p50_ms": r["chain_gap_p50_ms"], "chain_gap_max_ms": r["chain_gap_max_ms"]}

    async def trigger_latency(self, count: int) -> dict[str, float]:
        r = await engine._api_trigger(self.dsn, self.api_url, count)
        self.expected_tasks += count
        return {"trigger_p50_ms": r["api_trigger_p50_ms"], "trigger_max_ms": r["api_trigger_p99_ms"]}

    async def many_runs(self, runs: int) -> dict[str, float]:
        r = await engine._many_runs(self.dsn, self.api_url, runs)
        self.expected_tasks += 3 * runs
        if r["many_runs_all_success"] != 1.0 or r["many_runs_tasks"] != 3 * runs or r["many_runs_max_attempt"] != 1:
            raise Incorrect(f"Porpoise many runs: {r}")
        return {"many_runs_per_min": r["many_runs_per_min"], "many_runs_seconds": r["many_runs_seconds"]}

    async def check(self) -> None:
        """Every workflow instance and task instance so far ended SUCCESS, each task on its first attempt,
        none lost or run twice."""
        conn = await asyncpg.connect(self.dsn)
        try:
            row: Any = await conn.fetchrow(
                "SELECT (SELECT count(*) FROM workflow_instance WHERE state <> $1) AS bad_runs,"
                " (SELECT count(*) FROM task_instance) AS tasks,"
                " (SELECT count(*) FROM task_instance WHERE state <> $1) AS bad_tasks,"
                " (SELECT coalesce(max(attempt), 1) FROM task_instance) AS attempt",
                engine.SUCCESS,
            )
        finally:
            await conn.close()
        if row["bad_runs"] or row["bad_tasks"] or row["tasks"] != self.expected_tasks or row["attempt"] != 1:
            raise Incorrect(
                f"Porpoise: {row['bad_runs']} instances and {row['bad_tasks']} tasks not SUCCESS, {row['tasks']} task"
                f" instances (expected {self.expected_tasks}), highest attempt {row['attempt']}"
            )
