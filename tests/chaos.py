"""The chaos run: a real cluster (3 masters, 2 workers, private etcd and PostgreSQL) runs random DAG
workflows while a seeded driver kills (SIGKILL), pauses (SIGSTOP/SIGCONT) and restarts masters and
workers, and restarts etcd and PostgreSQL once each. Afterwards it checks, from the database and a
ledger every task writes from inside its own process:

- every command became exactly one instance, and every instance ended SUCCESS;
- no two attempts of the same task of an instance ran at the same time;
- a task ran more than once only when an earlier attempt failed on purpose or lost its worker;
- no attempt ran twice; no task process is left behind.

``make test`` runs a short round (tests/test_chaos.py); ``make chaos`` a long one:
``python -m tests.chaos --workflows 2000 --seed 7``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import itertools
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import psutil

from engine import logs
from engine.infra.etcd import EtcdServer
from engine.infra.ports import free_port
from engine.infra.postgres import PostgresServer, pg_bindir
from engine.storage.definitions import save_workflow
from engine.storage.failures import DB_FAILURES
from engine.storage.schema import apply_schema
from engine.workflows.model import TaskDef, WorkflowDef
from tests import chaos_concurrency
from tests.helpers import NodeProc, node_env

TTL = 2.0
SUCCESS, FAILURE, NEED_FAULT_TOLERANCE = 7, 6, 8
FINAL = (3, 5, 6, 7)

LEDGER_DDL = """
CREATE TABLE IF NOT EXISTS chaos_ledger (
    workflow_instance_id bigint NOT NULL, task_code bigint NOT NULL, task_instance_id bigint NOT NULL,
    pid integer NOT NULL, start_time timestamptz NOT NULL, end_time timestamptz)
"""

# Every statement retries while PostgreSQL restarts. The first attempt of a "flaky" task fails on purpose.
TASK = r"""
q() {
  for i in $(seq 100); do "%(psql)s" "${ledger_dsn}" -qAt -v ON_ERROR_STOP=1 -c "$1" && return 0; sleep 0.1; done
  return 1
}
wi=${system.workflow.instance.id}; code=${system.task.definition.code}; ti=${system.task.instance.id}
q "INSERT INTO chaos_ledger VALUES ($wi, $code, $ti, $$, clock_timestamp(), NULL)"
sleep %(sleep)s
q "UPDATE chaos_ledger SET end_time = clock_timestamp() WHERE task_instance_id = $ti AND pid = $$"
if [ "%(flaky)s" = yes ]; then
  n=$(q "SELECT count(*) FROM chaos_ledger WHERE workflow_instance_id = $wi AND task_code = $code")
  [ "$n" -gt 1 ] || { echo "failing the first attempt on purpose"; exit 1; }
fi
"""


@dataclass
class Summary:
    seed: int
    workflows: int
    tasks: int = 0
    faults: collections.Counter[str] = field(default_factory=collections.Counter)
    restarts: int = 0
    failovers_alerts: int = 0
    reruns_after_worker_loss: int = 0
    retries_after_failure: int = 0
    seconds: float = 0.0
    #: lines of the nodes' logs that show a safety net caught something (counted, not violations)
    safety_nets: collections.Counter[str] = field(default_factory=collections.Counter)
    violations: list[str] = field(default_factory=list)

    def text(self) -> str:
        return json.dumps(
            {
                "seed": self.seed, "workflows": self.workflows, "tasks": self.tasks, "faults": dict(self.faults),
                "node_restarts": self.restarts, "fault_tolerance_alerts": self.failovers_alerts,
                "reruns_after_worker_loss": self.reruns_after_worker_loss,
                "retries_after_failure": self.retries_after_failure, "seconds": round(self.seconds, 1),
                "safety_nets": dict(self.safety_nets),
                "violations": self.violations[:20],
            }
        )  # fmt: skip


def random_dag(rng: random.Random, name: str, flaky_rate: float, sleep: float) -> WorkflowDef:
    n = rng.randint(5, 20)
    tasks = []
    for i in range(n):
        ups = sorted({f"t{j}" for j in rng.sample(range(i), k=min(i, rng.randint(0, 3)))}) if i else []
        flaky = rng.random() < flaky_rate
        script = TASK % {"sleep": f"{sleep * rng.uniform(0.5, 1.5):.2f}", "flaky": "yes" if flaky else "no",
                         "psql": pg_bindir() / "psql"}  # fmt: skip
        tasks.append(TaskDef(f"t{i}", "SHELL", {"rawScript": script}, upstream=tuple(ups), retries=3, retry_interval=0))
    return WorkflowDef(name=name, project="chaos", tasks=tuple(tasks), global_params=())


class Cluster:
    """The processes of one chaos run; every node it ever started is stopped at the end."""

    def __init__(self, base: Path, rng: random.Random) -> None:
        self.base = base
        self.rng = rng
        self.etcd = EtcdServer(base / "etcd", free_port(), free_port(), base / "logs" / "etcd.log")
        self.pg = PostgresServer(base / "pg", free_port(), base / "logs" / "postgres.log", durable=True)
        self.root = f"/chaos-{uuid.uuid4().hex[:6]}"
        self.nodes: dict[str, NodeProc] = {}
        self.all: list[NodeProc] = []
        self.paused: set[str] = set()

    def start_infra(self) -> None:
        self.etcd.start()
        self.pg.start()

    def start_node(self, slot: str, port: int = 0) -> NodeProc:
        role = slot.split("-", maxsplit=1)[0]
        env = node_env(self.etcd.endpoint, self.root, TTL, PORPOISE_DATABASE_DSN=self.pg.dsn,
                       PORPOISE_LOGGING_LEVEL="info", PORPOISE_MASTER_FAILOVER_SWEEP_INTERVAL="2")  # fmt: skip
        overrides = []
        if role == "worker":
            overrides = [f"worker.log_dir={self.base / 'task-logs'}", f"worker.exec_dir={self.base / 'exec'}",
                         "worker.exec_slots=16"]  # fmt: skip
        node = NodeProc(role, env, self.base / "logs", f"{slot}-{len(self.all)}", overrides, port)
        self.all.append(node)
        node.start(timeout=60)
        self.nodes[slot] = node
        return node

    def stop(self) -> None:
        for node in self.all:
            rec = node.proc.record
            if rec is not None and rec.alive():
                rec.signal(signal.SIGCONT)
            node.stop(10)
        with contextlib.suppress(Exception):
            self.pg.stop()
        with contextlib.suppress(Exception):
            self.etcd.stop()


async def _driver(cluster: Cluster, rng: random.Random, done: asyncio.Event, summary: Summary) -> None:
    """Inject a fault every 2-4 s until the workload is done; restart what died."""
    infra = ["etcd", "postgres"]
    rng.shuffle(infra)
    rounds = 0
    while not done.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), rng.uniform(2.0, 4.0))
        if done.is_set():
            break
        rounds += 1
        await _restart_exited(cluster, summary)
        if rounds in (3, 6) and infra:
            what = infra.pop()
            summary.faults[f"restart {what}"] += 1
            server = cluster.etcd if what == "etcd" else cluster.pg
            await asyncio.to_thread(server.stop)
            await asyncio.sleep(rng.uniform(0.3, 1.0))
            await asyncio.to_thread(server.start)
            continue
        slot = rng.choice(sorted(cluster.nodes))
        node = cluster.nodes[slot]
        if node.proc.exited() is not None or node.proc.record is None:
            continue
        if rng.random() < 0.6:
            summary.faults[f"kill -9 {slot.split('-')[0]}"] += 1
            node.proc.record.signal(signal.SIGKILL)
        else:
            summary.faults[f"pause {slot.split('-')[0]}"] += 1
            node.proc.record.signal(signal.SIGSTOP)
            await asyncio.sleep(rng.uniform(0.5, TTL + 1.5))  # shorter or longer than the lease
            node.proc.record.signal(signal.SIGCONT)
    await _restart_exited(cluster, summary)


async def _restart_exited(cluster: Cluster, summary: Summary) -> None:
    for slot, node in sorted(cluster.nodes.items()):
        if node.proc.exited() is None:
            continue
        if node.proc.popen is not None:
            node.proc.popen.wait()
        # masters sometimes come back on the same address (the epoch-floor path), workers on a new one
        port = node.port if slot.startswith("master") and cluster.rng.random() < 0.5 else 0
        try:
            await asyncio.to_thread(cluster.start_node, slot, port)
        except AssertionError:  # the port was taken meanwhile, or the start raced an outage: next round
            continue
        summary.restarts += 1


async def run(workflows: int, seed: int, base: Path, deadline: float = 600.0, sleep: float = 0.1) -> Summary:
    rng = random.Random(seed)
    summary = Summary(seed, workflows)
    cluster = Cluster(base, rng)
    started = time.monotonic()
    try:
        await asyncio.to_thread(cluster.start_infra)
        dsn = cluster.pg.dsn
        await apply_schema(dsn)
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute(LEDGER_DDL)
            await chaos_concurrency.setup(conn)
            codes = []
            for i in range(min(20, workflows)):
                wf = chaos_concurrency.decorate(rng, random_dag(rng, f"dag{i}", 0.1, sleep), i)
                code, _ = await save_workflow(conn, wf, release=True)
                codes.append((code, len(wf.tasks)))
        finally:
            await conn.close()
        for slot in ("master-a", "master-b", "master-c", "worker-a", "worker-b"):
            await asyncio.to_thread(cluster.start_node, slot)
        done = asyncio.Event()
        driver = asyncio.create_task(_driver(cluster, rng, done, summary))
        try:
            command_ids, summary.tasks = await _submit(dsn, codes, workflows, rng)
            await _wait_all(dsn, command_ids, deadline)
        finally:
            done.set()
            await driver
        summary.seconds = time.monotonic() - started
        await _check(dsn, command_ids, cluster, summary)
    finally:
        await asyncio.to_thread(cluster.stop)
    _check_no_process_left(base, summary)
    _count_safety_nets(base / "logs", summary)
    return summary


async def _submit(dsn: str, codes: list[tuple[int, int]], workflows: int, rng: random.Random) -> tuple[list[int], int]:
    """Commands arrive in batches over the first part of the run, while faults are injected."""
    ids: list[int] = []
    tasks = 0
    for start in range(0, workflows, 20):
        batch = [codes[rng.randrange(len(codes))] for _ in range(min(20, workflows - start))]
        for _ in range(100):
            try:
                conn = await asyncpg.connect(dsn, timeout=5)
                try:
                    rows = await conn.fetch(
                        "INSERT INTO command (command_type, workflow_definition_code, command_param)"
                        " SELECT 0, c, $2::jsonb FROM unnest($1::bigint[]) AS c RETURNING id",
                        [c for c, _ in batch],
                        json.dumps({"StartParams": {"ledger_dsn": dsn}}),
                    )
                finally:
                    await conn.close()
                break
            except DB_FAILURES:
                await asyncio.sleep(0.3)  # PostgreSQL is being restarted by the driver
        else:
            raise RuntimeError("could not submit commands")
        ids += [r["id"] for r in rows]
        tasks += sum(n for _, n in batch)
        await asyncio.sleep(rng.uniform(0.2, 1.0))
    return ids, tasks


async def _wait_all(dsn: str, command_ids: list[int], deadline: float) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        try:
            conn = await asyncpg.connect(dsn, timeout=5)
            try:
                finished = await conn.fetchval(
                    "SELECT count(*) FROM workflow_instance WHERE command_id = ANY($1) AND state = ANY($2::smallint[])",
                    command_ids,
                    list(FINAL),
                )
            finally:
                await conn.close()
            if finished == len(command_ids):
                return
        except DB_FAILURES:
            pass
        await asyncio.sleep(0.5)


async def _check(dsn: str, command_ids: list[int], cluster: Cluster, summary: Summary) -> None:
    v = summary.violations
    conn = await asyncpg.connect(dsn)
    try:
        instances = await conn.fetch("SELECT id, command_id, state FROM workflow_instance")
        by_command = collections.Counter(r["command_id"] for r in instances)
        missing = [c for c in command_ids if by_command[c] == 0]
        if missing:
            left = await conn.fetchval("SELECT count(*) FROM command")
            errors = await conn.fetch("SELECT id, message FROM error_command LIMIT 5")
            v.append(f"{len(missing)} command(s) without an instance ({left} still queued, errors {errors})")
        v += [f"command {c} became {n} instances" for c, n in by_command.items() if n > 1]
        not_ok = [(r["id"], r["state"]) for r in instances if r["state"] != SUCCESS]
        if not_ok:
            bad = await conn.fetch(
                "SELECT workflow_instance_id, name, attempt, state, host FROM task_instance"
                " WHERE workflow_instance_id = ANY($1) AND state <> 7 ORDER BY workflow_instance_id, name, attempt",
                [i for i, _ in not_ok[:5]],
            )
            v.append(f"{len(not_ok)} instance(s) not SUCCESS: {not_ok[:10]}; their unsuccessful attempts: "
                     f"{[tuple(r) for r in bad]}")  # fmt: skip
        attempts = {
            r["id"]: r
            for r in await conn.fetch(
                "SELECT id, workflow_instance_id, task_code, attempt, state, host FROM task_instance"
            )
        }
        ledger = await conn.fetch("SELECT * FROM chaos_ledger ORDER BY start_time")
        await chaos_concurrency.check(conn, v)  # task group sizes, serial workflows, slots released
        summary.failovers_alerts = int(await conn.fetchval("SELECT count(*) FROM alert WHERE alert_type = 4"))
    finally:
        await conn.close()
    runs_of_attempt = collections.Counter(r["task_instance_id"] for r in ledger)
    v += [f"attempt {t} ran {n} times" for t, n in runs_of_attempt.items() if n > 1]
    by_task: dict[tuple[int, int], list[asyncpg.Record]] = collections.defaultdict(list)
    for r in ledger:
        by_task[(r["workflow_instance_id"], r["task_code"])].append(r)
    for key, rows in by_task.items():
        for prev, nxt in itertools.pairwise(rows):
            before = attempts.get(prev["task_instance_id"])
            if before is None:
                v.append(f"ledger row of unknown attempt {prev['task_instance_id']}")
                continue
            if before["state"] == FAILURE:
                summary.retries_after_failure += 1
            elif before["state"] == NEED_FAULT_TOLERANCE:
                summary.reruns_after_worker_loss += 1
            else:
                history = [(a["id"], a["attempt"], a["state"], a["host"]) for a in attempts.values()
                           if (a["workflow_instance_id"], a["task_code"]) == key]  # fmt: skip
                runs = [(r["task_instance_id"], r["pid"], str(r["start_time"]), str(r["end_time"])) for r in rows]
                v.append(f"task {key} ran again although attempt {before['attempt']} ended in state {before['state']}:"
                         f" attempts {sorted(history)}; ledger {runs}")  # fmt: skip
            if prev["end_time"] is not None and nxt["start_time"] < prev["end_time"]:
                after = attempts.get(nxt["task_instance_id"])
                v.append(
                    f"task {key}: attempts overlapped: {dict(before)} ran {prev['start_time']}..{prev['end_time']}"
                    f" pid {prev['pid']}; {dict(after) if after else '?'} started {nxt['start_time']} pid {nxt['pid']}"
                )
            if prev["end_time"] is None and before["state"] != NEED_FAULT_TOLERANCE:
                v.append(f"task {key}: attempt {prev['task_instance_id']} never finished but was not failed over")


SAFETY_NETS = {
    "background loop failed": "loop_restarts",  # engine.aio.BackgroundService restarted a loop
    "workflow actor failed": "actor_recoveries",  # an actor ended on an error; recovered from the database
}


def _count_safety_nets(log_dir: Path, summary: Summary) -> None:
    for path in log_dir.glob("*.log"):
        with path.open(errors="replace") as f:
            for line in f:
                for needle, name in SAFETY_NETS.items():
                    if needle in line:
                        summary.safety_nets[name] += 1


def _check_no_process_left(base: Path, summary: Summary) -> None:
    marker = str(base)
    left = []
    for p in psutil.process_iter(["pid", "cmdline", "cwd"]):
        with contextlib.suppress(psutil.Error):
            text = " ".join(p.info["cmdline"] or []) + " " + (p.info["cwd"] or "")
            if marker in text and p.status() != psutil.STATUS_ZOMBIE:
                left.append(f"{p.pid}: {text[:120]}")
    summary.violations += [f"process left behind: {x}" for x in left]


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__.splitlines()[0])
    parser.add_argument("--workflows", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    parser.add_argument("--deadline", type=float, default=3600)
    parser.add_argument("--keep", action="store_true", help="keep the run directory (logs) afterwards")
    args = parser.parse_args()
    logs.configure("console", "warning")
    base = Path(tempfile.mkdtemp(prefix="porpoise-chaos-"))
    os.chmod(base, 0o755)
    try:
        summary = asyncio.run(run(args.workflows, args.seed, base, args.deadline))
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    print(summary.text())
    return 1 if summary.violations else 0


if __name__ == "__main__":
    sys.exit(main())
