"""Failover benchmarks: 2 masters + 2 workers + etcd + PostgreSQL on this machine, run once per lease
TTL: the benchmarks' short one (BENCH_TTL) and the production default (configs/registry.yaml), since
failover takes about one TTL. Metrics are prefixed ``ttl_<n>s_``.

- master failover: N instances, each a gated task followed by a quick one, all owned by one master
  (the other starts afterwards); that master is killed with SIGKILL and the gate opens at the same
  moment. Measured: kill -> every instance owned by the live master, and kill -> every follow-up task
  started (the instances make progress). The gated tasks must not run twice.
  The gated tasks block reading a FIFO (no polling), so 2,000 of them (size ``batch``) fit this machine;
  ``owned_after_expiry_s`` times from the moment the survivor's membership view lost the dead master
  (its lease expired) to the moment it owned every instance.
- worker failover: M tasks running on one worker, which is killed with SIGKILL; kill -> every task has
  a new attempt running on the other worker.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg

from bench.common import BENCH_TTL, UNGUARDED, bench_config, main, rounded, save_released, workdir
from engine import config as config_mod
from engine.infra.process import ManagedProcess
from engine.infra.stack import Stack
from engine.states import CommandType, TaskState
from engine.workflows.model import TaskDef

SIZES = {
    "tiny": {"instances": 3, "tasks": 3},
    "full": {"instances": 100, "tasks": 50},
    # the batched takeover's target: 2,000 instances owned <= 0.5 s after the dead master's lease expires
    "batch": {"instances": 2000, "tasks": 50},
}


def _open_gate(gate: Path) -> None:
    """Release every task blocked reading the FIFO ``gate``: a writer end wakes the readers blocked in
    open(); a plain file then takes the FIFO's place (a reader arriving later reads its end at once);
    closing the writer ends the readers' read."""
    fd = os.open(gate, os.O_RDWR | os.O_NONBLOCK)  # a writer that never blocks (Linux)
    try:
        plain = gate.with_suffix(".open")
        plain.touch(mode=0o644)
        os.replace(plain, gate)
    finally:
        os.close(fd)


def _live_masters(stack: Stack, port: int) -> set[str]:
    return set(json.loads(stack.probe(port, "/ready")).get("masters") or [])


async def _until(check: Any, timeout: float, what: str) -> float:
    """Poll ``check`` (async -> bool) until true; returns the monotonic time it became true."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not reached after {timeout}s")
        await asyncio.sleep(0.02)
    return time.monotonic()


async def _master_failover(
    stack: Stack,
    dsn: str,
    n: int,
    gate: Path,
    ledger: Path,
    owner: ManagedProcess | None = None,
    survivor: tuple[str, list[str]] = ("master-2", UNGUARDED["master"]),
) -> dict[str, float]:
    """``owner``: the one master running (default: the stack's first node); ``survivor``: the name and extra
    settings of the master started to take over. Every query is scoped to this benchmark's workflow, so it
    measures the same on a database full of history (bench/history.py)."""
    conn = await asyncpg.connect(dsn)
    try:
        # blocked reading a FIFO until the gate opens: thousands of waiting tasks fork nothing
        os.mkfifo(gate)
        os.chmod(gate, 0o666)  # the tasks run as the stack's tenant
        script = f"echo $$ >> {ledger}; read -r _ < {gate} || true"
        code = await save_released(conn, "failover_master", [
            TaskDef("gated", "SHELL", {"rawScript": script}),
            TaskDef("next", "SHELL", {"rawScript": "true"}, upstream=("gated",)),
        ])  # fmt: skip
        await conn.execute(
            f"INSERT INTO command (command_type, workflow_definition_code) SELECT {int(CommandType.START_PROCESS)}, $1"
            " FROM generate_series(1, $2)",
            code,
            n,
        )

        mine = "workflow_instance_id IN (SELECT id FROM workflow_instance WHERE workflow_definition_code = $1)"

        async def all_running() -> bool:
            got = await conn.fetchval(
                "SELECT count(*) FROM task_instance WHERE name = 'gated'"
                f" AND state = {int(TaskState.RUNNING_EXECUTION)} AND {mine}",
                code,
            )
            return int(got) == n

        await _until(all_running, 120, "all gated tasks running")
        owner = owner or stack.nodes[0]
        name, extra = survivor
        live = await asyncio.to_thread(stack.start_node, "master", name, ["logging.level=warning", *extra])
        dead = await conn.fetchval("SELECT DISTINCT host FROM workflow_instance WHERE workflow_definition_code = $1",
                                   code)  # fmt: skip
        assert owner.record is not None and live.record is not None and live.record.extra
        port = live.record.extra["port"]

        async def dead_seen() -> bool:  # the survivor's membership view: the dead master's lease expired
            return dead not in await asyncio.to_thread(_live_masters, stack, port)

        killed = time.monotonic()
        owner.record.signal(9)
        await asyncio.to_thread(_open_gate, gate)

        async def owned() -> bool:
            return not await conn.fetchval(
                "SELECT 1 FROM workflow_instance WHERE host = $1 AND workflow_definition_code = $2 LIMIT 1", dead, code
            )

        async def progressed() -> bool:
            got = await conn.fetchval(
                f"SELECT count(*) FROM task_instance WHERE name = 'next' AND start_time IS NOT NULL AND {mine}", code
            )
            return int(got) == n

        t_expired = await _until(dead_seen, 60, "the dead master gone from the survivor's view")
        t_owned = await _until(owned, 60, "instances owned by the live master")
        try:
            t_progress = await _until(progressed, max(60, n / 10), "follow-up tasks started")
        except TimeoutError:
            rows = await conn.fetch(
                f"SELECT name, state, count(*) AS n FROM task_instance WHERE {mine} GROUP BY 1, 2 ORDER BY 1, 2",
                code,
            )
            states = ", ".join(f"{r['name']} {TaskState(r['state']).name} {r['n']}" for r in rows)
            print(f"failover: owned after {t_owned - killed:.3f} s ({t_owned - t_expired:.3f} s after the lease"
                  f" expired); the follow-up tasks did not all start: {states}", file=sys.stderr)  # fmt: skip
            raise
        reruns = len((await asyncio.to_thread(ledger.read_text)).split()) - n
        assert live.exited() is None
        return {
            "master_failover_instances": float(n),
            "master_failover_lease_expired_s": t_expired - killed,
            "master_failover_owned_s": t_owned - killed,
            "master_failover_owned_after_expiry_s": t_owned - t_expired,
            "master_failover_progress_s": t_progress - killed,
            "master_failover_gated_reruns": float(reruns),
        }
    finally:
        await conn.close()


async def _worker_failover(
    stack: Stack, dsn: str, m: int, victim: ManagedProcess, join: Any, gate: Path
) -> dict[str, float]:
    """The tasks block reading the FIFO ``gate``, which opens at the end: the surviving worker's stop then
    drains no task (a task still running would hold the stop until its timeout)."""
    conn = await asyncpg.connect(dsn)
    os.mkfifo(gate)
    os.chmod(gate, 0o666)  # the tasks run as the stack's tenant
    try:
        tasks = [TaskDef(f"t{i}", "SHELL", {"rawScript": f"read -r _ < {gate} || true"}) for i in range(m)]
        code = await save_released(conn, "failover_worker", tasks)
        port = victim.record.extra["port"] if victim.record and victim.record.extra else 0
        await conn.execute("INSERT INTO command (command_type, workflow_definition_code) VALUES (0, $1)", code)

        async def placed() -> bool:
            got = await conn.fetchval(
                "SELECT count(*) FROM task_instance t JOIN workflow_instance w ON w.id = t.workflow_instance_id"
                " WHERE w.workflow_definition_code = $1"
                f" AND t.state = {int(TaskState.RUNNING_EXECUTION)} AND t.flag = 1",
                code,
            )
            return int(got) == m

        await _until(placed, 120, "all tasks running")
        await asyncio.to_thread(join)  # the worker the tasks move to
        on_victim = await conn.fetchval(
            f"SELECT count(*) FROM task_instance WHERE host = $1 AND state = {int(TaskState.RUNNING_EXECUTION)}",
            f"127.0.0.1:{port}",
        )
        assert victim.record is not None
        killed = time.monotonic()
        victim.record.signal(9)

        async def elsewhere() -> bool:
            got = await conn.fetchval(
                "SELECT count(*) FROM task_instance t JOIN workflow_instance w ON w.id = t.workflow_instance_id"
                " WHERE w.workflow_definition_code = $1 AND t.flag = 1"
                f" AND t.state = {int(TaskState.RUNNING_EXECUTION)} AND t.host <> $2",
                code,
                f"127.0.0.1:{port}",
            )
            return int(got) == m

        t_moved = await _until(elsewhere, 60, "tasks running on the other worker")
        return {"worker_failover_tasks_moved": float(on_victim), "worker_failover_s": t_moved - killed}
    finally:
        await asyncio.to_thread(_open_gate, gate)
        await conn.close()


def run(size: str = "full", ttls: tuple[float, ...] | None = None) -> dict[str, Any]:
    """Both failovers once per lease TTL in ``ttls`` (default: BENCH_TTL and the configured default)."""
    if ttls is None:  # the batch size measures the takeover itself: the lease TTL only shifts it
        ttls = (BENCH_TTL,) if size == "batch" else (BENCH_TTL, config_mod.load(environ={}).registry.lease_ttl)
    result: dict[str, Any] = {"benchmark": "failover", "size": size}
    for ttl in ttls:
        prefix = f"ttl_{ttl:g}s_"
        result |= {prefix + key: value for key, value in _run_once(size, ttl).items()}
    return rounded(result)


def _run_once(size: str, ttl: float) -> dict[str, Any]:
    params = SIZES[size]
    cfg = bench_config(ttl)
    with workdir() as base:
        stack = Stack(Path(base) / "stack", cfg)
        try:
            stack.start_infra()
            assert stack.postgres is not None
            dsn = stack.postgres.dsn
            stack.start_node("master", "master-1", ["logging.level=warning", *UNGUARDED["master"]])
            slots = [f"worker.exec_slots={max(400, params['instances'] + 100)}", "logging.level=warning",
                     *UNGUARDED["worker"]]  # fmt: skip
            stack.start_node("worker", "worker-1", slots)
            result: dict[str, Any] = {"lease_ttl_s": cfg.registry.lease_ttl}
            here = stack.tenant_dir("bench")  # the gated tasks (run as the stack's tenant) write their ledger here
            result |= asyncio.run(_master_failover(stack, dsn, params["instances"], here / "gate", here / "ledger"))
            # worker failover: every task runs on worker-1; worker-2 joins; worker-1 is killed
            victim = stack.nodes[1]
            join = lambda: stack.start_node("worker", "worker-2", slots)  # noqa: E731
            result |= asyncio.run(_worker_failover(stack, dsn, params["tasks"], victim, join, here / "worker-gate"))
        finally:
            stack.stop_all()
    return result


if __name__ == "__main__":
    main(run)
