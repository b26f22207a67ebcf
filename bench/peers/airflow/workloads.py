"""The four workloads on Airflow, started through its public API (``POST /api/v2/dags/{id}/dagRuns``, what
a user's trigger does) and measured from its metadata database's own timestamps, as bench/engine.py does
for Porpoise."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence

import aiohttp
import asyncpg

from bench.peers.airflow import results
from bench.peers.airflow.cluster import AirflowCluster
from bench.peers.airflow.dags import Dag
from bench.peers.airflow.results import RunRow, TaskRow

FINAL = ("success", "failed")


class AirflowWorkloads:
    def __init__(self, cluster: AirflowCluster, conn: asyncpg.Connection, session: aiohttp.ClientSession) -> None:
        self.cluster = cluster
        self.conn = conn
        self.session = session

    async def trigger(self, dag: Dag) -> str:
        """Start one run of ``dag`` now; its run id."""
        run_id = f"bench-{uuid.uuid4().hex[:12]}"
        url = f"{self.cluster.url}/api/v2/dags/{dag.dag_id}/dagRuns"
        async with self.session.post(url, json={"dag_run_id": run_id, "logical_date": None}) as resp:
            body = await resp.json(content_type=None)
            if resp.status >= 300:
                raise RuntimeError(f"triggering {dag.dag_id} answered {resp.status}: {body}")
        return run_id

    async def wait(self, dag: Dag, run_ids: Sequence[str], timeout: float = 1800) -> list[RunRow]:
        deadline = time.monotonic() + timeout
        while True:
            rows = await self.conn.fetch(
                "SELECT run_id, state, end_date FROM dag_run"
                " WHERE dag_id = $1 AND run_id = ANY($2) AND state = ANY($3)",
                dag.dag_id,
                list(run_ids),
                list(FINAL),
            )
            if len(rows) == len(run_ids):
                return [RunRow(r["run_id"], r["state"], r["end_date"]) for r in rows]
            if time.monotonic() > deadline:
                raise TimeoutError(f"{dag.dag_id}: {len(rows)}/{len(run_ids)} runs final after {timeout:.0f} s")
            self.cluster.check_running()
            await asyncio.sleep(0.05)

    async def tasks(self, dag: Dag, runs: Sequence[RunRow]) -> list[TaskRow]:
        """The runs' task instances, checked (every run and task successful, each task once, first try)."""
        ids = [r.run_id for r in runs]
        rows = await self.conn.fetch(
            "SELECT run_id, task_id, state, try_number, start_date, end_date FROM task_instance"
            " WHERE dag_id = $1 AND run_id = ANY($2)",
            dag.dag_id,
            ids,
        )
        history = await self.conn.fetchval(
            "SELECT count(*) FROM task_instance_history WHERE dag_id = $1 AND run_id = ANY($2)", dag.dag_id, ids
        )
        tasks = [
            TaskRow(r["run_id"], r["task_id"], r["state"], int(r["try_number"]), r["start_date"], r["end_date"])
            for r in rows
        ]
        results.check(dag.name, runs, tasks, len(ids), dag.task_ids, int(history))
        return tasks

    async def once(self, dag: Dag) -> tuple[float, list[TaskRow]]:
        """One run of ``dag`` from the trigger call to its end: (the call's Unix time, its tasks)."""
        sent = time.time()
        run_id = await self.trigger(dag)
        runs = await self.wait(dag, [run_id])
        return sent, await self.tasks(dag, runs)

    async def fanout(self, dag: Dag) -> dict[str, float]:
        _, tasks = await self.once(dag)
        return results.fanout(tasks)

    async def chain(self, dag: Dag) -> dict[str, float]:
        _, tasks = await self.once(dag)
        return results.chain_gaps(tasks)

    async def trigger_latency(self, dag: Dag, count: int) -> dict[str, float]:
        latencies = []
        for _ in range(count):
            sent, tasks = await self.once(dag)
            latencies.append(results.first_start_ms(tasks, sent))
        return results.trigger(latencies)

    async def many_runs(self, dag: Dag, runs: int) -> dict[str, float]:
        sent = time.time()
        run_ids = await asyncio.gather(*(self.trigger(dag) for _ in range(runs)))
        done = await self.wait(dag, run_ids)
        await self.tasks(dag, done)
        return results.many_runs(done, sent)
