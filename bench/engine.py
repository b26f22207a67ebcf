"""Engine benchmarks on a standalone-shaped stack (private etcd + PostgreSQL + 1 master + 1 worker on
this machine), measured from the database's own timestamps.

- chain latency: a chain of SHELL ``true`` tasks; gap between one task's end and the next one's start,
  split at the next attempt's ``submit_time`` (when the master's write creating it began): the result's
  way to the master and its actor, then the write, the dispatch and the worker's admission.
- throughput: W workflows of T independent SHELL ``true`` tasks started at once; tasks per second from
  the first task start to the last task end, and master + worker CPU seconds per task.
- trigger latency: a command inserted (what the API's start call does) -> its first task started; and
  the API's start call itself -> the first task started (what a user sees), split at the command's insert,
  the claim's start (the instance's ``start_time``) and the first attempt's ``submit_time``.
- many runs: N workflows of a 3-task SHELL ``true`` chain started at once through the API; runs per
  minute from the first start call to the last instance's end.
- the spawn limit (bench/spawn.py), measured in the same run: the figures above as shares of it are what
  ``make bench-quick`` (bench/quick.py) compares with the recorded reference.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import psutil

from bench.common import UNGUARDED, bench_config, cpu_seconds, main, percentile, rounded, save_released, workdir
from bench.spawn import spawn_limit
from engine.accounts.tokens import create_token, ensure_user
from engine.infra.postgres import ROLE
from engine.infra.stack import Stack
from engine.states import WORKFLOW_FINISHED, CommandType, code_list
from engine.workflows.model import TaskDef

SIZES = {
    "tiny": {"chain": 5, "workflows": 2, "tasks": 10, "triggers": 3, "runs": 4, "spawns": 50},
    #: make bench-quick (bench/quick.py): well under 3 minutes on the loaded 2-core machine
    "quick": {"chain": 100, "workflows": 10, "tasks": 100, "triggers": 15, "runs": 50, "spawns": 1000},
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
            "SELECT name, submit_time, start_time, end_time FROM task_instance WHERE workflow_instance_id = $1",
            wi["id"],
        )
    finally:
        await conn.close()
    by_name = {r["name"]: r for r in rows}

    def ms(i: int, begin: str, end: str) -> float:
        return (by_name[f"t{i}"][end] - by_name[f"t{i - 1}"][begin]).total_seconds() * 1000

    gaps = [ms(i, "end_time", "start_time") for i in range(1, n)]
    # the gap split where the master's write creating the next attempt began (its transaction's now())
    to_write = [ms(i, "end_time", "submit_time") for i in range(1, n)]
    to_start = [
        (by_name[f"t{i}"]["start_time"] - by_name[f"t{i}"]["submit_time"]).total_seconds() * 1000 for i in range(1, n)
    ]
    return {
        "chain_tasks": n,
        "chain_gap_p50_ms": percentile(gaps, 50),
        "chain_gap_p99_ms": percentile(gaps, 99),
        "chain_gap_max_ms": max(gaps),
        "chain_gap_result_to_write_p50_ms": percentile(to_write, 50),
        "chain_gap_write_to_start_p50_ms": percentile(to_start, 50),
    }


def _cpu(proc: psutil.Process) -> tuple[float, float]:
    """(own, reaped children's) CPU seconds of a process."""
    t = proc.cpu_times()
    return t.user + t.system, t.children_user + t.children_system


def _side_cpu(proc: psutil.Process) -> tuple[float, float]:
    """(own, task processes') CPU seconds of a node: its own and its helpers' (its children alive now: a
    worker's tenant spawners, fork server and reaper), and those its helpers and it reaped (the tasks: the
    worker's children, or its tenant spawners')."""
    own, reaped = _cpu(proc)
    for child in proc.children():
        with contextlib.suppress(psutil.Error):
            helper = _cpu(child)
            own, reaped = own + helper[0], reaped + helper[1]
    return own, reaped


def _postgres_cpu(root: psutil.Process | None = None) -> float:
    """CPU seconds of the benchmark's PostgreSQL: its postmaster ``root``, the backends alive now and those it
    reaped (without ``root``: every process named postgres* on the machine, other users' servers included)."""
    if root is None:
        total = 0.0
        for p in psutil.process_iter(["name"]):
            if (p.info["name"] or "").startswith("postgres"):
                with contextlib.suppress(psutil.Error):
                    total += cpu_seconds(p)
        return total
    total = sum(_cpu(root))
    for p in root.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            total += sum(_cpu(p))
    return total


async def _task_span(conn: asyncpg.Connection, instances: list[asyncpg.Record]) -> asyncpg.Record:
    """First task start, last task end and task count of these workflow instances."""
    return await conn.fetchrow(
        "SELECT min(start_time) AS first, max(end_time) AS last, count(*) AS n, max(attempt) AS attempt"
        " FROM task_instance"
        " WHERE workflow_instance_id = ANY($1)",
        [r["id"] for r in instances],
    )


async def _statements(admin_dsn: str, reset: bool) -> list[asyncpg.Record]:
    """pg_stat_statements of the porpoise database (the bench's server preloads it): reset, or read."""
    conn = await asyncpg.connect(admin_dsn)
    try:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        if reset:
            await conn.execute("SELECT pg_stat_statements_reset()")
            return []
        return await conn.fetch(
            "SELECT query, calls, total_exec_time, shared_blks_dirtied, wal_records FROM pg_stat_statements s"
            " JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = current_database()"
            " AND query NOT LIKE '%pg_stat_statements%' ORDER BY calls DESC"
        )
    finally:
        await conn.close()


def _statement_figures(rows: list[asyncpg.Record], tasks: int) -> dict[str, float]:
    """Statements, their execution time and WAL records per task; the ten most called on stderr."""
    for r in rows[:10]:
        print(f"  {r['calls'] / tasks:6.2f}/task {r['total_exec_time'] / max(r['calls'], 1) * 1000:8.1f} us"
              f" {r['wal_records'] / max(r['calls'], 1):5.1f} wal  {r['query'][:150]}", file=sys.stderr)  # fmt: skip
    return {
        "throughput_pg_statements_per_task": sum(r["calls"] for r in rows) / tasks,
        "throughput_pg_exec_ms_per_task": sum(r["total_exec_time"] for r in rows) / tasks,
        "throughput_pg_wal_records_per_task": sum(r["wal_records"] for r in rows) / tasks,
    }


async def _throughput(
    dsn: str,
    workflows: int,
    tasks: int,
    procs: list[psutil.Process],
    admin_dsn: str = "",
    postgres: psutil.Process | None = None,
) -> dict[str, float]:
    """``procs``: master, worker. CPU per task in all (master + worker, as the target table has it) and
    per part: master, worker (with its helper processes), the task processes, PostgreSQL; and how
    idle the machine was. With ``admin_dsn`` (a superuser's), the statements per task (pg_stat_statements);
    ``postgres``: the benchmark's postmaster (else every PostgreSQL process on the machine is counted)."""
    code = await _save(dsn, "wide", [TaskDef(f"t{i}", "SHELL", {"rawScript": "true"}) for i in range(tasks)])
    conn = await asyncpg.connect(dsn)
    statements: list[asyncpg.Record] = []
    try:
        if admin_dsn:
            await _statements(admin_dsn, reset=True)
        before = [_side_cpu(p) for p in procs], _postgres_cpu(postgres), psutil.cpu_times()
        cids = await _start(conn, code, workflows)
        done = await _wait_done(conn, cids, 900)
        after = [_side_cpu(p) for p in procs], _postgres_cpu(postgres), psutil.cpu_times()
        if admin_dsn:
            statements = await _statements(admin_dsn, reset=False)
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
    } | (_statement_figures(statements, total) if statements else {})


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
        #: where the time went: the call -> the command's insert -> the claim's start -> the first attempt's
        #: write -> its start on the worker
        parts: dict[str, list[float]] = {"command": [], "claim": [], "write": [], "start": []}
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as session:
            for _ in range(count):
                sent = time.time()
                async with session.post(f"{api_url}/api/v1/workflows/{code}/start", json={}) as resp:
                    body = await resp.json()
                    call.append((time.time() - sent) * 1000)
                (wi,) = await _wait_done(conn, [body["command_id"]], 60)
                row = await conn.fetchrow(
                    "SELECT w.command_start_time AS command, w.start_time AS claim, t.submit_time AS write,"
                    " t.start_time AS start FROM task_instance t JOIN workflow_instance w"
                    " ON w.id = t.workflow_instance_id WHERE t.workflow_instance_id = $1",
                    wi["id"],
                )
                lat.append((row["start"].timestamp() - sent) * 1000)
                at = sent
                for name, values in parts.items():
                    values.append((row[name].timestamp() - at) * 1000)
                    at = row[name].timestamp()
    finally:
        await conn.close()
    return {
        "api_trigger_p50_ms": percentile(lat, 50),
        "api_trigger_p99_ms": percentile(lat, 99),
        "api_start_call_p50_ms": percentile(call, 50),
        "api_trigger_to_command_p50_ms": percentile(parts["command"], 50),
        "api_trigger_command_to_claim_p50_ms": percentile(parts["claim"], 50),
        "api_trigger_claim_to_write_p50_ms": percentile(parts["write"], 50),
        "api_trigger_write_to_start_p50_ms": percentile(parts["start"], 50),
    }


async def _many_runs(
    dsn: str,
    api_url: str,
    runs: int,
    procs: list[psutil.Process] | None = None,
    admin_dsn: str = "",
    postgres: psutil.Process | None = None,
) -> dict[str, float]:
    """``runs`` instances of a 3-task chain started at once through the API (one start call each, all in
    flight together), timed from the first call to the last instance's end. With ``procs`` (master,
    worker, API): the CPU per run of each, of the worker's task processes and of PostgreSQL (``postgres``,
    its postmaster); with ``admin_dsn``: PostgreSQL's statements per run (pg_stat_statements)."""
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
        if admin_dsn:
            await _statements(admin_dsn, reset=True)
        before = [_side_cpu(p) for p in procs or []], _postgres_cpu(postgres)
        async with aiohttp.ClientSession(headers=headers, connector=connector) as session:
            sent = time.time()
            cids = await asyncio.gather(*(start(session) for _ in range(runs)))
        done = await _wait_done(conn, cids, 600)
        after = [_side_cpu(p) for p in procs or []], _postgres_cpu(postgres)
        statements = await _statements(admin_dsn, reset=False) if admin_dsn else []
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
    cpu: dict[str, float] = {}
    if procs:
        own = [(a[0] - b[0]) * 1000 / runs for a, b in zip(after[0], before[0], strict=True)]
        names = ("master", "worker", "api")
        cpu = {f"many_runs_{name}_cpu_ms_per_run": ms for name, ms in zip(names, own, strict=False)}
        cpu["many_runs_task_processes_cpu_ms_per_run"] = (after[0][1][1] - before[0][1][1]) * 1000 / runs
        cpu["many_runs_postgres_cpu_ms_per_run"] = (after[1] - before[1]) * 1000 / runs
    if statements:
        cpu["many_runs_pg_statements_per_run"] = sum(r["calls"] for r in statements) / runs
        cpu["many_runs_pg_exec_ms_per_run"] = sum(r["total_exec_time"] for r in statements) / runs
        for r in sorted(statements, key=lambda r: -r["total_exec_time"])[:12]:  # where a run's time goes
            print(f"  {r['calls'] / runs:6.2f}/run {r['total_exec_time'] / runs * 1000:8.1f} us/run"
                  f" {r['wal_records'] / runs:5.1f} wal  {r['query'][:150]}", file=sys.stderr)  # fmt: skip
    return cpu | {
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
        # pg_stat_statements: the statements per task of the throughput round (its own cost is in the figures)
        stack = Stack(Path(base) / "stack", cfg, pg_settings={"shared_preload_libraries": "pg_stat_statements"})
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
            admin = stack.postgres.dsn_for(ROLE)
            record = stack.postgres.proc.record if stack.postgres.proc is not None else None
            postmaster = psutil.Process(record.pid) if record is not None else None
            result |= asyncio.run(_throughput(dsn, params["workflows"], params["tasks"], procs, admin, postmaster))
            procs.append(psutil.Process(api.record.pid))
            result |= asyncio.run(_many_runs(dsn, api_url, params["runs"], procs, admin, postmaster))
        finally:
            stack.stop_all()
    # the second half once the stack is down: its own housekeeping after 5,000 tasks (PostgreSQL's
    # autovacuum and checkpoint, the log archiver) is not the machine's load from other work, and measured
    # beside it the limit always came out lower at the end of a quiet run (1,307 -> 725, 971 -> 534/s)
    after = spawn_limit(params["spawns"] - params["spawns"] // 2)
    result |= {
        "spawn_limit_processes": params["spawns"],
        "spawn_limit_per_s": params["spawns"] / (before["spawn_limit_seconds"] + after["spawn_limit_seconds"]),
        "spawn_limit_first_per_s": before["spawn_limit_per_s"],
        "spawn_limit_last_per_s": after["spawn_limit_per_s"],
    }
    return rounded(result)


if __name__ == "__main__":
    main(run)
