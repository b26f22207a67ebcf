"""Shared benchmark helpers: private infrastructure in a temp dir, machine facts, percentiles."""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import psutil

from engine import config as config_mod
from engine.config import Config
from engine.infra.etcd import EtcdServer
from engine.infra.ports import free_port
from engine.infra.stack import Stack
from engine.states import WORKFLOW_FINISHED, CommandType, WorkflowState
from engine.workflows.definitions import save_workflow
from engine.workflows.model import TaskDef, WorkflowDef

#: the lease TTL (s) the benchmarks run their nodes with: short, to measure failover on one machine
#: (production defaults to a longer one, configs/registry.yaml; bench/failover.py measures both)
BENCH_TTL = 3.0


#: the overload guard off: on a machine shared with other work the 1-minute load average stays above
#: 2 x cores, and master and worker would refuse work because of the others' load, not the benchmark's
#: (chain gaps of 13-20 s, 15 runs per minute at load 9 on 2 cores; failover rounds never claimed)
UNGUARDED = {role: [f"{role}.max_cpu_load_avg=100000"] for role in ("master", "worker")}


def bench_config(ttl: float = BENCH_TTL) -> Config:
    """The defaults with the benchmarks' lease TTL (the launchers hand it to every node they start)."""
    return config_mod.load(environ={}).replace(registry={"lease_ttl": ttl})


@contextmanager
def workdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="porpoise-bench-"))
    os.chmod(path, 0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextmanager
def private_etcd(base: Path) -> Iterator[EtcdServer]:
    server = EtcdServer(base / "etcd", free_port(), free_port(), base / "logs" / "etcd.log")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def bench_stack(base: Path, cleanup: contextlib.ExitStack) -> Stack:
    """A private etcd and PostgreSQL under ``base`` with the benchmarks' lease TTL, stopped (with every node
    started on it) by ``cleanup``; start the nodes with :func:`start_nodes`."""
    stack = Stack(base / "stack", bench_config())
    cleanup.callback(stack.stop_all)
    stack.start_infra()
    return stack


def start_nodes(stack: Stack, *worker_options: str, worker: str = "worker") -> None:
    """One master and one worker on ``stack``, logging warnings only, the overload guard off (UNGUARDED)."""
    stack.start_node("master", "master", ["logging.level=warning", *UNGUARDED["master"]])
    stack.start_node("worker", worker, ["logging.level=warning", *UNGUARDED["worker"], *worker_options])


@dataclass(frozen=True)
class Run:
    """One start of a one-task workflow, seconds: ``total`` command inserted -> instance finished (wall
    clock, polled every 20 ms); ``dispatch`` its task's submit time (the master dispatched it) -> end (the
    result recorded); ``task`` the task's own start -> end."""

    total: float
    dispatch: float
    task: float
    state: int
    #: the task's log file on the worker (its tail says why a run failed)
    log_path: str

    @property
    def success(self) -> bool:
        return self.state == WorkflowState.SUCCESS

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(Path(self.log_path).read_text(errors="replace").splitlines()[-lines:])
        except OSError as exc:
            return f"(no log: {exc})"


async def run_workflow(dsn: str, code: int, timeout: float = 900.0) -> Run:
    """Start workflow ``code`` (a START_PROCESS command) and wait for its instance to finish."""
    conn = await asyncpg.connect(dsn)
    try:
        t0 = time.monotonic()
        cid = await conn.fetchval(
            "INSERT INTO command (command_type, workflow_definition_code) VALUES ($1, $2) RETURNING id",
            CommandType.START_PROCESS,
            code,
        )
        finished = [int(s) for s in WORKFLOW_FINISHED]
        while True:
            row = await conn.fetchrow(
                "SELECT id, state FROM workflow_instance WHERE command_id = $1 AND state = ANY($2)", cid, finished
            )
            if row is not None:
                break
            if time.monotonic() - t0 > timeout:
                raise TimeoutError(f"workflow {code} not finished after {timeout:.0f} s")
            await asyncio.sleep(0.02)
        total = time.monotonic() - t0
        task = await conn.fetchrow(
            "SELECT submit_time, start_time, end_time, log_path FROM task_instance WHERE workflow_instance_id = $1",
            row["id"],
        )
        return Run(
            total=total,
            dispatch=(task["end_time"] - task["submit_time"]).total_seconds(),
            task=(task["end_time"] - task["start_time"]).total_seconds(),
            state=int(row["state"]),
            log_path=task["log_path"] or "",
        )
    finally:
        await conn.close()


def exit_on_sigterm() -> None:
    """Turn SIGTERM into SystemExit so the benchmarks' finally blocks stop what they started."""
    import signal
    import sys

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


async def save_released(conn: Any, name: str, tasks: list[TaskDef]) -> int:
    """Save a workflow of ``tasks`` in the "bench" project, online; its code."""
    wf = WorkflowDef(name=name, project="bench", tasks=tuple(tasks))
    code, _ = await save_workflow(conn, wf, release=True)
    return code


def rounded(result: dict[str, Any]) -> dict[str, Any]:
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()}


def main(run: Callable[[str], dict[str, Any]]) -> None:
    """``python -m bench.<name> [tiny|full]``: run one benchmark and print its JSON object."""
    import json
    import sys

    from core import logs

    logs.configure("console", "warning")
    exit_on_sigterm()
    print(json.dumps(run(sys.argv[1] if len(sys.argv) > 1 else "full")))


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


def cpu_seconds(proc: psutil.Process) -> float:
    """CPU seconds a process has used itself (user + system)."""
    t = proc.cpu_times()
    return float(t.user + t.system)


def machine() -> dict[str, object]:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False)
    return {
        "cpus": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 1024**3, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "commit": commit.stdout.strip() or "unknown",
    }
