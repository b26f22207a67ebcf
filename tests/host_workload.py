"""A ledger workload for the multi-host scenarios (tests/test_hosts.py): workflows whose tasks record
their runs in the chaos ledger (tests/chaos.py) from inside their own processes, a sampler that sees
when each task process really started and died, and the chaos checks at the end. The ledger's times
are PostgreSQL's, which a cut-off host falsifies: a task killed by its worker's reaper there cannot
write its end, and an INSERT it sent just before the cut reaches the server only when the link comes
back (after the task died and its replacement started). So the process's own start time (the kernel's)
replaces the ledger's start, and the sampler's "gone by" time stands in for a missing end."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import psutil

from engine.infra.postgres import pg_bindir
from engine.states import TASK_ACTIVE, WORKFLOW_FINISHED, CommandType, TaskState, WorkflowState, code_list
from engine.workflows.definitions import save_workflow
from engine.workflows.model import TaskDef, WorkflowDef
from tests.chaos import LEDGER_DDL, TASK, Summary, _check, _check_no_process_left
from tests.helpers import eventually
from tests.hosts import HostCluster

FINAL = code_list(WORKFLOW_FINISHED)
ACTIVE = code_list(TASK_ACTIVE)


def fan_in(name: str, width: int, sleep: float) -> WorkflowDef:
    """``width`` parallel ledger tasks, then one that waits for them all."""
    script = TASK % {"sleep": f"{sleep:.2f}", "flaky": "no", "psql": pg_bindir() / "psql", "watch": ""}
    tasks = [TaskDef(f"p{i}", "SHELL", {"rawScript": script}, retries=3, retry_interval=0) for i in range(width)]
    tasks.append(
        TaskDef("join", "SHELL", {"rawScript": script}, upstream=tuple(t.name for t in tasks), retry_interval=0)
    )
    # a start may set only declared globals: the ledger's DSN comes with each start
    ledger = ({"prop": "ledger_dsn", "direct": "IN", "type": "VARCHAR", "value": ""},)
    return WorkflowDef(name=name, project="hosts", tasks=tuple(tasks), global_params=ledger)


def _boot_time_error() -> float:
    """What to add to psutil's ``create_time`` to get the wall-clock start of a process.

    psutil adds the process's start (clock ticks since boot) to the boot time the kernel gives in whole
    seconds (``btime`` in /proc/stat): its start times are early by the truncated fraction, up to a whole
    second, the same for every process of the machine. The boot time from the precise uptime does not
    have that error (one 10 ms tick is left)."""
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    return (time.time() - uptime) - psutil.boot_time()


class TaskSampler:
    """Every ``interval`` s, which task processes (cwd under ``base``) are alive; ``gone_by[pid]`` is
    the first sample that no longer saw a process seen before: an upper bound on its death."""

    def __init__(self, base: Path, interval: float = 0.1) -> None:
        self.base = str(base)
        self.interval = interval
        self.alive: set[int] = set()
        self.gone_by: dict[int, float] = {}
        #: pid -> the process's start time (epoch seconds, from the kernel)
        self.started: dict[int, float] = {}
        self._boot_error = _boot_time_error()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="task-sampler", daemon=True)

    def __enter__(self) -> TaskSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            now = set()
            for p in psutil.process_iter(["pid", "cwd", "create_time"]):
                with contextlib.suppress(psutil.Error, TypeError):
                    if p.info["cwd"] and p.info["cwd"].startswith(self.base) and "/exec" in p.info["cwd"]:
                        now.add(p.info["pid"])
                        self.started.setdefault(p.info["pid"], p.info["create_time"] + self._boot_error)
            stamp = time.time()
            for pid in self.alive - now:
                self.gone_by.setdefault(pid, stamp)
            self.alive = now


def _reaped(log_dir: Path) -> dict[int, float]:
    """task instance id -> when its process ended: when the worker's task reaper killed it, else when the
    worker saw it end (``task finished`` lines of the workers' logs, written on the worker's own host
    whatever its network does; a loaded worker's loop may see an exit late)."""
    ended: dict[int, float] = {}
    for path in log_dir.glob("worker-*.log"):
        for line in path.read_text(errors="replace").splitlines():
            if '"task finished"' not in line:
                continue
            with contextlib.suppress(ValueError, KeyError):
                event = json.loads(line)
                seen = datetime.fromisoformat(event["timestamp"]).timestamp()
                ended[int(event["task_instance_id"])] = float(event.get("reaped_at") or seen)
    return ended


@dataclass
class Workload:
    cluster: HostCluster
    command_ids: list[int] = field(default_factory=list)
    tasks: int = 0

    @property
    def dsn(self) -> str:
        assert self.cluster.pg is not None
        return self.cluster.pg.dsn

    async def submit(self, workflows: int = 4, width: int = 3, sleep: float = 2.0) -> None:
        assert self.cluster.pg is not None
        owner = await asyncpg.connect(self.cluster.pg.owner_dsn)  # the ledger table: DDL, as the schema owner
        try:
            await owner.execute(LEDGER_DDL)
        finally:
            await owner.close()
        conn = await asyncpg.connect(self.dsn)
        try:
            wf = fan_in(f"fan-{len(self.command_ids)}", width, sleep)
            code, _ = await save_workflow(conn, wf, release=True)
            rows = await conn.fetch(
                "INSERT INTO command (command_type, workflow_definition_code, command_param)"
                f" SELECT {int(CommandType.START_PROCESS)}, $1, $2::jsonb FROM generate_series(1, $3) RETURNING id",
                code,
                json.dumps({"StartParams": {"ledger_dsn": self.dsn}}),
                workflows,
            )
        finally:
            await conn.close()
        self.command_ids += [r["id"] for r in rows]
        self.tasks += workflows * len(wf.tasks)

    async def query(self, sql: str, *args: object) -> list[asyncpg.Record]:
        conn = await asyncpg.connect(self.dsn, timeout=5)
        try:
            return await conn.fetch(sql, *args)
        finally:
            await conn.close()

    async def busy_host(self, among: list[str], timeout: float = 60) -> str:
        """A host among ``among`` whose master owns an unfinished instance and whose worker runs an attempt."""
        masters = {self.cluster.masters[n].address: n for n in among}

        async def find() -> str | None:
            owning = {
                r["host"]
                for r in await self.query(
                    f"SELECT host FROM workflow_instance WHERE state = {int(WorkflowState.RUNNING_EXECUTION)}"
                )
            }
            running = {
                r["host"]
                for r in await self.query(
                    f"SELECT host FROM task_instance WHERE state = {int(TaskState.RUNNING_EXECUTION)}"
                )
            }
            for addr, name in masters.items():
                if addr in owning and self.cluster.workers[name].address in running:
                    return name
            return None

        return await eventually(find, timeout, "a host owning an instance and running a task", interval=0.1)  # type: ignore[no-any-return]

    async def held_by(self, master_address: str, worker_address: str) -> tuple[int, int]:
        """(unfinished instances owned by ``master_address``, active attempts on ``worker_address``)."""
        owned = await self.query(
            f"SELECT id FROM workflow_instance WHERE state = {int(WorkflowState.RUNNING_EXECUTION)} AND host = $1",
            master_address,
        )
        active = await self.query(
            "SELECT id FROM task_instance WHERE flag = 1 AND state = ANY($1::smallint[]) AND host = $2",
            list(ACTIVE),
            worker_address,
        )
        return len(owned), len(active)

    async def wait_all(self, timeout: float) -> None:
        async def done() -> bool:
            rows = await self.query(
                "SELECT count(*) AS n FROM workflow_instance"
                " WHERE command_id = ANY($1) AND state = ANY($2::smallint[])",
                self.command_ids,
                list(FINAL),
            )
            return rows[0]["n"] == len(self.command_ids)

        await eventually(done, timeout, f"all {len(self.command_ids)} workflows finished", interval=0.5)

    async def check(self, sampler: TaskSampler) -> Summary:
        """The chaos ledger's checks: one instance per command, all SUCCESS, every attempt ran once, no
        two attempts of a task overlapped (a killed task's end = when the sampler saw it gone)."""
        conn = await asyncpg.connect(self.dsn)
        try:
            for row in await conn.fetch("SELECT task_instance_id, pid FROM chaos_ledger"):
                began = sampler.started.get(row["pid"])
                if began is not None:
                    await conn.execute(
                        "UPDATE chaos_ledger SET start_time = $1 WHERE task_instance_id = $2 AND pid = $3",
                        datetime.fromtimestamp(began, UTC),
                        row["task_instance_id"],
                        row["pid"],
                    )
            reaped = _reaped(self.cluster.base / "logs")
            for row in await conn.fetch("SELECT task_instance_id, pid FROM chaos_ledger WHERE end_time IS NULL"):
                # the worker's own record of reaping it, else when the sampler saw it gone (its passes
                # can be slow on a loaded machine: a loose upper bound)
                gone = reaped.get(row["task_instance_id"], sampler.gone_by.get(row["pid"]))
                if gone is not None:
                    await conn.execute(
                        "UPDATE chaos_ledger SET end_time = $1 WHERE task_instance_id = $2 AND pid = $3",
                        datetime.fromtimestamp(gone, UTC),
                        row["task_instance_id"],
                        row["pid"],
                    )
        finally:
            await conn.close()
        summary = Summary(seed=0, workflows=len(self.command_ids), tasks=self.tasks)
        await _check(self.dsn, self.command_ids, [], None, summary)
        return summary

    def stop_and_check_nothing_left(self, summary: Summary) -> None:
        """Stop every node, etcd member, Spark daemon and PostgreSQL gracefully, then: no process of this run
        is left."""
        for node in self.cluster.all_nodes:
            node.stop(15)
        if self.cluster.spark is not None:
            self.cluster.spark.stop()
        for server in self.cluster.etcd.values():
            server.stop(10)
        if self.cluster.pg is not None:
            self.cluster.pg.stop(20)
        _check_no_process_left(self.cluster.base, summary)


async def measured(predicate: object, timeout: float, what: str) -> float:
    """Seconds until ``predicate`` held (``eventually``)."""
    started = time.monotonic()
    await eventually(predicate, timeout, what, interval=0.05)  # type: ignore[arg-type]
    return time.monotonic() - started
