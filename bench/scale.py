"""Scale benchmarks on private etcd + PostgreSQL, real master / worker / api processes:

- footprint: idle RSS and CPU of each node process after start-up (and of etcd and PostgreSQL).
- claims: commands claimed per second by 1, 2 and 3 masters from a backlog inserted at once; each
  command becomes an instance that waits in a DEPENDENT task (no worker involved), so the figure is
  the claim path: command -> instance -> actor -> first (logic) attempt.
- concurrency: N instances live at once on ONE master, each waiting in a DEPENDENT task; the master's
  RSS and its event-loop lag p99 (its own probe) over the last 10 s of the hold, when all of them are
  waiting, and over the last 60 s (which takes in the end of the claim storm).
- held: the same for 100,000 instances, set up without the claim path: one instance is claimed and left
  waiting by a master that then stops; its rows are copied in the database (set-based inserts) into N
  instances of that gone master; a new master takes them all over at start-up (the failover's batched
  takeover) and drives them. Timed: its start -> every instance owned and its actor live; then its RSS
  and loop lag over a hold as above.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import psutil

from bench.common import UNGUARDED, bench_config, cpu_seconds, main, rounded, save_released, workdir
from engine.infra.postgres import OWNER_ROLE, RUNTIME_ROLE
from engine.infra.stack import Stack
from engine.states import CommandType, TaskState
from engine.storage.schema import upgrade
from engine.workflows.model import TaskDef

SIZES = {
    "tiny": {"idle": 2.0, "claims": 200, "masters": (1, 2), "concurrency": 200, "hold": 2.0, "held": 300,
             "held_hold": 2.0},
    # the held hold outlasts the 60 s lag window, so its 60 s figure is the hold's alone, not the takeover's end
    "full": {"idle": 10.0, "claims": 20_000, "masters": (1, 2, 3), "concurrency": 10_000, "hold": 30.0,
             "held": 100_000, "held_hold": 70.0},
}  # fmt: skip


def _tree(pid: int) -> list[psutil.Process]:
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def footprint(stack: Stack, idle: float) -> dict[str, float]:
    master = stack.start_node("master", "master", ["logging.level=warning"])
    worker = stack.start_node("worker", "worker", ["logging.level=warning"])
    api = stack.start_node("api", "api", ["logging.level=warning"])
    time.sleep(2.0)  # let start-up work (schema check, first heartbeats) settle before sampling idle state
    procs: dict[str, list[psutil.Process]] = {}
    for name, proc in (("master", master), ("worker", worker), ("api", api)):
        assert proc.record is not None
        procs[name] = _tree(proc.record.pid)
    for name, server in (("etcd", stack.etcd), ("postgres", stack.postgres)):
        if server is not None and server.proc.record is not None:
            procs[name] = _tree(server.proc.record.pid)
    before = {k: sum(cpu_seconds(p) for p in v) for k, v in procs.items()}
    t0 = time.monotonic()
    time.sleep(idle)
    elapsed = time.monotonic() - t0
    out: dict[str, float] = {}
    for name, group in procs.items():
        rss = sum(p.memory_info().rss for p in group if p.is_running())
        out[f"{name}_rss_mb"] = rss / 2**20
        out[f"{name}_cpu_pct"] = (sum(cpu_seconds(p) for p in group if p.is_running()) - before[name]) * 100 / elapsed
    for proc in (api, worker, master):
        proc.stop(15)
    return out


async def _waiting_workflow(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        shell = [TaskDef("t", "SHELL", {"rawScript": "true"})]
        never = await save_released(conn, f"never_{uuid.uuid4().hex[:6]}", shell)
        item = {"workflow_code": never, "cycle": "day", "date_value": "today"}
        params = {"items": [item], "check_interval": 3600}
        return await save_released(conn, f"waits_{uuid.uuid4().hex[:6]}", [TaskDef("wait", "DEPENDENT", params)])
    finally:
        await conn.close()


async def _fresh_db(stack: Stack) -> str:
    assert stack.postgres is not None
    name = f"bench_{uuid.uuid4().hex[:8]}"
    dsn = await stack.postgres.create_database(name)
    await upgrade(stack.postgres.dsn_for(OWNER_ROLE, name), RUNTIME_ROLE)
    return dsn


async def _claim_round(dsn: str, code: int, n: int, timeout: float) -> tuple[float, list[int]]:
    conn = await asyncpg.connect(dsn)
    try:
        t0 = time.monotonic()
        await conn.execute(
            f"INSERT INTO command (command_type, workflow_definition_code) SELECT {int(CommandType.START_PROCESS)}, $1"
            " FROM generate_series(1, $2)",
            code,
            n,
        )
        while await conn.fetchval("SELECT count(*) FROM command") > 0:
            if time.monotonic() - t0 > timeout:
                raise TimeoutError("backlog not claimed in time")
            await asyncio.sleep(0.05)
        seconds = time.monotonic() - t0
        # scoped to the round's workflow: the same on a database holding history (bench/history.py)
        per_host = await conn.fetch(
            "SELECT host, count(*) AS n FROM workflow_instance WHERE workflow_definition_code = $1"
            " GROUP BY host ORDER BY host",
            code,
        )
        created = sum(int(r["n"]) for r in per_host)
        if created != n:
            raise RuntimeError(f"{created} instances for {n} commands")
        return seconds, [int(r["n"]) for r in per_host]
    finally:
        await conn.close()


def claims(stack: Stack, n: int, counts: tuple[int, ...]) -> dict[str, float]:
    out: dict[str, float] = {}
    for masters in counts:
        dsn = asyncio.run(_fresh_db(stack))
        code = asyncio.run(_waiting_workflow(dsn))
        procs = [
            stack.start_node("master", f"claims-{masters}-{i}", ["logging.level=warning", f"database.dsn={dsn}"])
            for i in range(masters)
        ]
        try:
            _wait_slots(stack, procs, masters)
            seconds, spread = asyncio.run(_claim_round(dsn, code, n, 900))
        finally:
            for p in procs:
                p.stop(15)
        out[f"claims_{masters}_masters_per_s"] = n / seconds
        out[f"claims_{masters}_masters_max_share"] = max(spread) / n
    out["claims_backlog"] = n
    return out


def _wait_slots(stack: Stack, procs: list[Any], count: int) -> None:
    """Every master sees all ``count`` masters (its slot covers 1/count of the ids)."""
    import json

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        seen = []
        for p in procs:
            port = p.record.extra["port"]
            seen.append(json.loads(stack.probe(port, "/ready")).get("slot") or {})
        if all(s.get("count") == count for s in seen):
            return
        time.sleep(0.1)
    raise TimeoutError("masters did not settle their slots")


def _metric(stack: Stack, port: int, name: str) -> float:
    for line in stack.probe(port, "/metrics", timeout=10).decode().splitlines():
        if line.startswith(name):
            return float(line.rsplit(" ", 1)[1])
    raise KeyError(name)


def _await_waiting(dsn: str, n: int, timeout: float, poll: float, what: str) -> None:
    """Poll until ``n`` attempts are running (each instance waiting in its task), else TimeoutError(what)."""

    async def waiting() -> int:
        conn = await asyncpg.connect(dsn)
        try:
            return int(
                await conn.fetchval(
                    f"SELECT count(*) FROM task_instance WHERE state = {int(TaskState.RUNNING_EXECUTION)}"
                )
            )
        finally:
            await conn.close()

    deadline = time.monotonic() + timeout
    while asyncio.run(waiting()) < n:
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(poll)


def concurrency(stack: Stack, n: int, hold: float) -> dict[str, float]:
    dsn = asyncio.run(_fresh_db(stack))
    code = asyncio.run(_waiting_workflow(dsn))
    master = stack.start_node("master", "concurrency", ["logging.level=warning", f"database.dsn={dsn}"])
    assert master.record is not None
    port = master.record.extra["port"]
    proc = psutil.Process(master.record.pid)
    try:
        rss0 = proc.memory_info().rss
        claim_s, _ = asyncio.run(_claim_round(dsn, code, n, 1200))
        _await_waiting(dsn, n, 600, 0.5, "instances did not all reach their waiting task")
        time.sleep(hold)  # steady state: every instance waiting; the lag probe keeps the last 60 s
        actors = _metric(stack, port, "porpoise_master_actors")
        lag_p99 = _metric(stack, port, 'porpoise_master_event_loop_lag_10s_seconds{quantile="0.99"}')
        lag_p99_60 = _metric(stack, port, 'porpoise_master_event_loop_lag_seconds{quantile="0.99"}')
        gc_max_60 = _metric(stack, port, 'porpoise_master_gc_pause_max_60s_seconds{generation="2"}')
        rss = proc.memory_info().rss
    finally:
        master.stop(15)
    return {
        "concurrency_instances": n,
        "concurrency_live_actors": actors,
        "concurrency_master_rss_mb": rss / 2**20,
        "concurrency_rss_kb_per_instance": (rss - rss0) / 1024 / n,
        "concurrency_loop_lag_p99_ms": lag_p99 * 1000,
        "concurrency_loop_lag_p99_60s_ms": lag_p99_60 * 1000,
        "concurrency_gc_full_pause_max_60s_ms": gc_max_60 * 1000,
        "concurrency_claim_s": claim_s,
    }


async def _clone(dsn: str, source: int, n: int, chunk: int = 10_000) -> None:
    """``n - 1`` copies of instance ``source`` and of its task instances (ids from their sequences)."""
    conn = await asyncpg.connect(dsn)
    try:

        async def columns(table: str, skip: set[str]) -> list[str]:
            rows = await conn.fetch(
                "SELECT column_name FROM information_schema.columns WHERE table_name = $1 AND table_schema ="
                " current_schema() AND is_generated = 'NEVER' ORDER BY ordinal_position",
                table,
            )
            return [r[0] for r in rows if r[0] not in skip]

        wnames = await columns("workflow_instance", {"id"})
        wcols = ", ".join(wnames)
        # the seed's command id is unique to it: the copies come from no command
        wvalues = ", ".join("NULL" if c == "command_id" else c for c in wnames)
        tcols = ", ".join(await columns("task_instance", {"id", "workflow_instance_id"}))
        left = n - 1
        while left > 0:
            k = min(chunk, left)
            async with conn.transaction():
                ids = await conn.fetch(
                    f"INSERT INTO workflow_instance ({wcols}) SELECT {wvalues} FROM workflow_instance,"
                    " generate_series(1, $2) WHERE id = $1 RETURNING id",
                    source,
                    k,
                )
                await conn.execute(
                    f"INSERT INTO task_instance (workflow_instance_id, {tcols}) SELECT c.id, {tcols}"
                    " FROM task_instance t, unnest($2::bigint[]) AS c(id) WHERE t.workflow_instance_id = $1",
                    source,
                    [r[0] for r in ids],
                )
            left -= k
        await conn.execute("ANALYZE workflow_instance; ANALYZE task_instance")
    finally:
        await conn.close()


def held(stack: Stack, n: int, hold: float) -> dict[str, float]:
    """``n`` waiting instances of a gone master, taken over and held by one new master."""
    dsn = asyncio.run(_fresh_db(stack))
    code = asyncio.run(_waiting_workflow(dsn))
    seed = ["logging.level=warning", f"database.dsn={dsn}", *UNGUARDED["master"]]  # claims at any machine load
    first = stack.start_node("master", "held-seed", seed)
    try:
        asyncio.run(_claim_round(dsn, code, 1, 120))
        _await_waiting(dsn, 1, 120, 0.2, "the seed instance did not reach its waiting task")
    finally:
        first.stop(15)

    async def source() -> int:
        conn = await asyncpg.connect(dsn)
        try:
            return int(await conn.fetchval("SELECT id FROM workflow_instance"))
        finally:
            await conn.close()

    t0 = time.monotonic()
    asyncio.run(_clone(dsn, asyncio.run(source()), n))
    setup_s = time.monotonic() - t0
    t0 = time.monotonic()
    master = stack.start_node("master", "held", seed)
    assert master.record is not None
    port = master.record.extra["port"]
    proc = psutil.Process(master.record.pid)
    try:
        deadline = time.monotonic() + 1200
        while _metric(stack, port, "porpoise_master_actors") < n:
            if time.monotonic() > deadline:
                raise TimeoutError("the instances were not all taken over")
            time.sleep(0.2)
        live_s = time.monotonic() - t0
        time.sleep(hold)
        actors = _metric(stack, port, "porpoise_master_actors")
        lag_p99 = _metric(stack, port, 'porpoise_master_event_loop_lag_10s_seconds{quantile="0.99"}')
        lag_p99_60 = _metric(stack, port, 'porpoise_master_event_loop_lag_seconds{quantile="0.99"}')
        rss = proc.memory_info().rss
    finally:
        master.stop(15)
    return {
        "held_instances": n,
        "held_setup_s": setup_s,
        "held_taken_and_live_s": live_s,
        "held_live_actors": actors,
        "held_master_rss_mb": rss / 2**20,
        "held_rss_kb_per_instance": rss / 1024 / n,
        "held_loop_lag_p99_ms": lag_p99 * 1000,
        "held_loop_lag_p99_60s_ms": lag_p99_60 * 1000,
    }


def run(size: str = "full", parts: tuple[str, ...] = ("footprint", "claims", "concurrency", "held")) -> dict[str, Any]:
    params = SIZES[size]
    cfg = bench_config()
    result: dict[str, Any] = {"benchmark": "scale", "size": size}
    with workdir() as base:
        stack = Stack(Path(base) / "stack", cfg)
        try:
            stack.start_infra()
            if "footprint" in parts:
                result |= footprint(stack, params["idle"])
            if "claims" in parts:
                result |= claims(stack, params["claims"], params["masters"])
            if "concurrency" in parts:
                result |= concurrency(stack, params["concurrency"], params["hold"])
            if "held" in parts:
                result |= held(stack, params["held"], params["held_hold"])
        finally:
            stack.stop_all()
    return rounded(result)


if __name__ == "__main__":
    main(run)
