"""Engine benchmarks on a standalone-shaped stack (private etcd + PostgreSQL + 1 master + 1 worker on
this machine), measured from the database's own timestamps.

- chain latency: a chain of SHELL ``true`` tasks; gap between one task's end and the next one's start.
- throughput: W workflows of T independent SHELL ``true`` tasks started at once; tasks per second from
  the first task start to the last task end, and master + worker CPU seconds per task.
- trigger latency: a command inserted (what the API's start call does) -> its first task started; and
  the API's start call itself -> the first task started (what a user sees).
- many runs: N workflows of a 3-task SHELL ``true`` chain started at once through the API; runs per
  minute from the first start call to the last instance's end.
- the spawn limit (bench/spawn.py), measured in the same run: the figures above as shares of it are what
  ``make bench-quick`` (bench/quick.py) compares with the recorded reference.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import psutil

from bench.common import UNGUARDED, bench_config, cpu_seconds, main, percentile, rounded, save_released, workdir
from bench.spawn import spawn_limit
from engine.accounts.tokens import create_token, ensure_user
from engine.infra.stack import Stack
from engine.states import WORKFLOW_FINISHED, CommandType, code_list
from engine.workflows.model import TaskDef

SIZES = {
    "tiny": {"chain": 5, "workflows": 2, "tasks": 10, "triggers": 3, "runs": 4, "spawns": 50},
    #: make bench-quick (bench/quick.py): well under 3 minutes on the loaded 2-core machine
    "quick": {"chain": 30, "workflows": 10, "tasks": 100, "triggers": 15, "runs": 50, "spawns": 1000},
    "full": {"chain": 100, "workflows": 50, "tasks": 100, "triggers": 50, "runs": 50, "spawns": 3000},
}
#: the states of a finished workflow instance, and SUCCESS
FINAL = code_list(WORKFLOW_FINISHED)
SUCCESS = 7


async def _save(dsn: str, name: str, tasks: list[TaskDef]) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return await save_released(conn, name, tasks)
    finally:
        await conn.close()


async def _start(conn: asyncpg.Connection, code: int, count: int = 1) -> list[int]:
    rows = await conn.fetch(
        f"INSERT INTO command (command_type, workflow_definition_code) SELECT {int(CommandType.START_PROCESS)}, $1"
        " FROM generate_series(1, $2)"
        " RETURNING id",
        code,
        count,
    )
    return [r["id"] for r in rows]


async def _wait_done(conn: asyncpg.Connection, command_ids: list[int], timeout: float) -> list[asyncpg.Record]:
    deadline = time.monotonic() + timeout
    while True:
        rows = await conn.fetch(
            "SELECT id, state FROM workflow_instance WHERE command_id = ANY($1) AND state = ANY($2)",
            command_ids,
            list(FINAL),
        )
        if len(rows) == len(command_ids):
            return rows
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(rows)}/{len(command_ids)} instances finished after {timeout}s")
        await asyncio.sleep(0.05)


async def _chain(dsn: str, n: int) -> dict[str, float]:
    tasks = [TaskDef(f"t{i}", "SHELL", {"rawScript": "true"}, upstream=(f"t{i - 1}",) if i else ()) for i in range(n)]
    code = await _save(dsn, "chain", tasks)
    conn = await asyncpg.connect(dsn)
    try:
        (cid,) = await _start(conn, code)
        (wi,) = await _wait_done(conn, [cid], 600)
        rows = await conn.fetch(
            "SELECT name, start_time, end_time FROM task_instance WHERE workflow_instance_id = $1", wi["id"]
        )
    finally:
        await conn.close()
    by_name = {r["name"]: r for r in rows}
    gaps = [
        (by_name[f"t{i}"]["start_time"] - by_name[f"t{i - 1}"]["end_time"]).total_seconds() * 1000 for i in range(1, n)
    ]
    return {
        "chain_tasks": n,
        "chain_gap_p50_ms": percentile(gaps, 50),
        "chain_gap_p99_ms": percentile(gaps, 99),
        "chain_gap_max_ms": max(gaps),
    }


def _cpu(proc: psutil.Process) -> tuple[float, float]:
    """(own, reaped children's) CPU seconds of a process."""
    t = proc.cpu_times()
    return t.user + t.system, t.children_user + t.children_system


def _postgres_cpu() -> float:
    total = 0.0
    for p in psutil.process_iter(["name"]):
        if (p.info["name"] or "").startswith("postgres"):
            with contextlib.suppress(psutil.Error):
                total += cpu_seconds(p)
    return total


async def _task_span(conn: asyncpg.Connection, instances: list[asyncpg.Record]) -> asyncpg.Record:
    """First task start, last task end and task count of these workflow instances."""
    return await conn.fetchrow(
        "SELECT min(start_time) AS first, max(end_time) AS last, count(*) AS n, max(attempt) AS attempt"
        " FROM task_instance"
        " WHERE workflow_instance_id = ANY($1)",
        [r["id"] for r in instances],
    )


async def _throughput(dsn: str, workflows: int, tasks: int, procs: list[psutil.Process]) -> dict[str, float]:
    """``procs``: master, worker. CPU per task in all (master + worker, as the target table has it) and
    per part: master, worker, the task processes (the worker's reaped children), PostgreSQL; and how
    idle the machine was."""
    code = await _save(dsn, "wide", [TaskDef(f"t{i}", "SHELL", {"rawScript": "true"}) for i in range(tasks)])
    conn = await asyncpg.connect(dsn)
    try:
        before = [_cpu(p) for p in procs], _postgres_cpu(), psutil.cpu_times()
        cids = await _start(conn, code, workflows)
        done = await _wait_done(conn, cids, 900)
        after = [_cpu(p) for p in procs], _postgres_cpu(), psutil.cpu_times()
        span = await _task_span(conn, done)
    finally:
        await conn.close()
    seconds = (span["last"] - span["first"]).total_seconds()
    total = int(span["n"])
    own = [a[0] - b[0] for a, b in zip(after[0], before[0], strict=True)]
    children = after[0][-1][1] - before[0][-1][1]
    machine = [a - b for a, b in zip(after[2], before[2], strict=True)]
    idle = (after[2].idle - before[2].idle) + (getattr(after[2], "iowait", 0) - getattr(before[2], "iowait", 0))
    per_task = 1000 / total
    return {
        "throughput_tasks": total,
        "throughput_tasks_per_s": total / seconds,
        "throughput_cpu_ms_per_task": sum(own) * per_task,
        "throughput_master_cpu_ms_per_task": own[0] * per_task,
        "throughput_worker_cpu_ms_per_task": own[-1] * per_task,
        "throughput_task_processes_cpu_ms_per_task": children * per_task,
        "throughput_postgres_cpu_ms_per_task": (after[1] - before[1]) * per_task,
        "throughput_machine_idle_pct": 100 * idle / max(sum(machine), 1e-9),
        "throughput_all_success": float(all(r["state"] == SUCCESS for r in done)),
        "throughput_max_attempt": int(span["attempt"]),
    }


async def _trigger(dsn: str, count: int) -> dict[str, float]:
    code = await _save(dsn, "single", [TaskDef("t", "SHELL", {"rawScript": "true"})])
    conn = await asyncpg.connect(dsn)
    lat = []
    try:
        for _ in range(count):
            (cid,) = await conn.fetch(
                "INSERT INTO command (command_type, workflow_definition_code) VALUES (0, $1)"
                " RETURNING id, clock_timestamp() AS t",
                code,
            )
            (wi,) = await _wait_done(conn, [cid["id"]], 60)
            start = await conn.fetchval(
                "SELECT start_time FROM task_instance WHERE workflow_instance_id = $1", wi["id"]
            )
            lat.append((start - cid["t"]).total_seconds() * 1000)
    finally:
        await conn.close()
    return {"trigger_p50_ms": percentile(lat, 50), "trigger_p99_ms": percentile(lat, 99)}


async def _api_trigger(dsn: str, api_url: str, count: int) -> dict[str, float]:
    """The API's start call -> the first task's start (same machine, so one wall clock)."""
    code = await _save(dsn, "api_single", [TaskDef("t", "SHELL", {"rawScript": "true"})])
    conn = await asyncpg.connect(dsn)
    try:
        _, token = await create_token(conn, await ensure_user(conn), "bench")
        lat, call = [], []
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as session:
            for _ in range(count):
                sent = time.time()
                async with session.post(f"{api_url}/api/v1/workflows/{code}/start", json={}) as resp:
                    body = await resp.json()
                    call.append((time.time() - sent) * 1000)
                (wi,) = await _wait_done(conn, [body["command_id"]], 60)
                start = await conn.fetchval(
                    "SELECT start_time FROM task_instance WHERE workflow_instance_id = $1", wi["id"]
                )
                lat.append((start.timestamp() - sent) * 1000)
    finally:
        await conn.close()
    return {
        "api_trigger_p50_ms": percentile(lat, 50),
        "api_trigger_p99_ms": percentile(lat, 99),
        "api_start_call_p50_ms": percentile(call, 50),
    }


async def _many_runs(dsn: str, api_url: str, runs: int) -> dict[str, float]:
    """``runs`` instances of a 3-task chain started at once through the API (one start call each, all in
    flight together), timed from the first call to the last instance's end."""
    chain = [TaskDef(f"t{i}", "SHELL", {"rawScript": "true"}, upstream=(f"t{i - 1}",) if i else ()) for i in range(3)]
    code = await _save(dsn, "many_runs", chain)
    conn = await asyncpg.connect(dsn)
    try:
        _, token = await create_token(conn, await ensure_user(conn), "bench-many")

        async def start(session: aiohttp.ClientSession) -> int:
            async with session.post(f"{api_url}/api/v1/workflows/{code}/start", json={}) as resp:
                body = await resp.json()
                if resp.status >= 300:
                    raise RuntimeError(f"start call answered {resp.status}: {body}")
                return int(body["command_id"])

        headers = {"Authorization": f"Bearer {token}"}
        connector = aiohttp.TCPConnector(limit=runs)
        async with aiohttp.ClientSession(headers=headers, connector=connector) as session:
            sent = time.time()
            cids = await asyncio.gather(*(start(session) for _ in range(runs)))
        done = await _wait_done(conn, cids, 600)
        ids = [r["id"] for r in done]
        last = await conn.fetchval("SELECT max(end_time) FROM workflow_instance WHERE id = ANY($1)", ids)
        tasks = await conn.fetchrow(
            "SELECT count(*) AS n, count(*) FILTER (WHERE state = $2) AS ok, coalesce(max(attempt), 0) AS attempt"
            " FROM task_instance WHERE workflow_instance_id = ANY($1)",
            ids,
            SUCCESS,
        )
    finally:
        await conn.close()
    seconds = last.timestamp() - sent
    return {
        "many_runs": runs,
        "many_runs_per_min": runs / seconds * 60,
        "many_runs_seconds": seconds,
        "many_runs_all_success": float(all(r["state"] == SUCCESS for r in done) and tasks["ok"] == tasks["n"]),
        "many_runs_tasks": int(tasks["n"]),
        "many_runs_max_attempt": int(tasks["attempt"]),
    }


def run(size: str = "full") -> dict[str, Any]:
    params = SIZES[size]
    cfg = bench_config()
    with workdir() as base:
        stack = Stack(Path(base) / "stack", cfg)
        try:
            stack.start_infra()
            master = stack.start_node("master", "master", ["logging.level=warning", *UNGUARDED["master"]])
            worker = stack.start_node(
                "worker", "worker", ["worker.exec_slots=400", "logging.level=warning", *UNGUARDED["worker"]]
            )
            api = stack.start_node("api", "api", ["logging.level=warning"])
            assert api.record is not None
            api_url = f"http://127.0.0.1:{api.record.extra['port']}"
            assert stack.postgres is not None
            dsn = stack.postgres.dsn
            procs = [psutil.Process(p.record.pid) for p in (master, worker) if p.record]
            result: dict[str, Any] = {"benchmark": "engine", "size": size}
            # what the figures are shares of: half before and half after the engine rounds, so a machine
            # whose load from other work changes during the run is measured at both ends
            before = spawn_limit(params["spawns"] // 2)
            result |= asyncio.run(_chain(dsn, params["chain"]))
            result |= asyncio.run(_trigger(dsn, params["triggers"]))
            result |= asyncio.run(_api_trigger(dsn, api_url, params["triggers"]))
            result |= asyncio.run(_throughput(dsn, params["workflows"], params["tasks"], procs))
            result |= asyncio.run(_many_runs(dsn, api_url, params["runs"]))
            after = spawn_limit(params["spawns"] - params["spawns"] // 2)
            result |= {
                "spawn_limit_processes": params["spawns"],
                "spawn_limit_per_s": params["spawns"] / (before["spawn_limit_seconds"] + after["spawn_limit_seconds"]),
                "spawn_limit_first_per_s": before["spawn_limit_per_s"],
                "spawn_limit_last_per_s": after["spawn_limit_per_s"],
            }
        finally:
            stack.stop_all()
    return rounded(result)


if __name__ == "__main__":
    main(run)
