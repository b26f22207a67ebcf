"""The chaos run: a real cluster (3 masters, 2 workers, private etcd and PostgreSQL) runs random DAG
workflows while a seeded driver (tests/chaos_faults.py: a table of fault kinds with weights) kills
(SIGKILL), pauses (SIGSTOP/SIGCONT), gracefully restarts (SIGTERM) and steps the wall clock of (restarts
with ``debug.clock_offset``) masters and workers, restarts etcd
and PostgreSQL once each, and (when switched on) mixes poison commands into the stream. Afterwards it
checks, from the database, a ledger every task writes from inside its own process, and each task
process's life watched from outside (tests/task_watch.py; the checks are tests/chaos_ledger.py):

- every command became exactly one instance, and every instance ended SUCCESS; every poison command
  ended in error_command; no command is left in the queue;
- no two attempts of the same task of an instance ran at the same time, including an attempt killed
  with its worker (no end row: its process's death is watched);
- a task ran more than once only when an earlier attempt failed on purpose or lost its worker;
- no attempt ran twice; no task process is left behind;
- a schedule firing every 5 seconds in a zone of the run's own, whose clocks go forward and back during the
  round (tests/chaos_dst.py), fired each wall-clock fire time exactly once through the faults.

Some tasks fail their first attempt on purpose; half of those wait their ``retry_interval`` (a minute)
before the retry, a timer that must outlive failovers.

``make test`` runs a short round (tests/test_chaos.py); ``make chaos`` a long one:
``python -m tests.chaos --workflows 2000 --seed 7 [--fault poison=1]``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
import uuid
import zoneinfo
from dataclasses import dataclass, field
from pathlib import Path

import asyncpg
import psutil

from core import logs
from engine.infra.etcd import EtcdServer
from engine.infra.ports import free_port
from engine.infra.postgres import PostgresServer, pg_bindir
from engine.states import WORKFLOW_FINISHED, TaskState, code_list
from engine.storage.failures import DB_FAILURES
from engine.workflows.definitions import save_workflow
from engine.workflows.model import TaskDef, WorkflowDef
from tests import chaos_concurrency, chaos_dst, databases, tls
from tests.chaos_faults import Chaos, drive, insert_commands, parse_weights, weights
from tests.chaos_ledger import check_ledger
from tests.delay_proxy import DelayProxy
from tests.helpers import NodeProc, eventually, node_env
from tests.task_watch import WATCH_PREAMBLE, TaskWatcher

TTL = 2.0
SUCCESS = 7
STOP = 5
FINAL = code_list(WORKFLOW_FINISHED)

LEDGER_DDL = """
CREATE TABLE IF NOT EXISTS chaos_ledger (
    workflow_instance_id bigint NOT NULL, task_code bigint NOT NULL, task_instance_id bigint NOT NULL,
    pid integer NOT NULL, start_time timestamptz NOT NULL, end_time timestamptz)
"""

# The process names itself to the watcher first (tests/task_watch.py). Every statement retries while
# PostgreSQL restarts. The first attempt of a "flaky" task fails on purpose.
TASK = r"""
q() {
  for i in $(seq 100); do "%(psql)s" "${ledger_dsn}" -qAt -v ON_ERROR_STOP=1 -c "$1" && return 0; sleep 0.1; done
  return 1
}
wi=${system.workflow.instance.id}; code=${system.task.definition.code}; ti=${system.task.instance.id}
%(watch)sq "INSERT INTO chaos_ledger VALUES ($wi, $code, $ti, $$, clock_timestamp(), NULL)"
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
    #: fault kind -> weight of this run (0: off; tests/chaos_faults.py)
    fault_weights: dict[str, float] = field(default_factory=dict)
    poison_commands: int = 0
    #: instances a stop storm stopped (or may have)
    stopped: int = 0
    #: attempts killed before their end row whose successor was checked against their watched death
    killed_attempts_checked: int = 0
    #: lines of the nodes' logs that show a safety net caught something (counted, not violations)
    safety_nets: collections.Counter[str] = field(default_factory=collections.Counter)
    #: task group or limited workflow -> the most tasks (runs) it had at once (tests/chaos_concurrency.py)
    concurrency_peaks: dict[str, int] = field(default_factory=dict)
    #: task group -> its peak by the ledger's times alone (killed attempts counted until replaced)
    estimated_group_peaks: dict[str, int] = field(default_factory=dict)
    #: fire times of the schedule crossing DST changes (tests/chaos_dst.py)
    dst_fires: int = 0
    violations: list[str] = field(default_factory=list)
    #: phase -> seconds it took (where the round's wall time went)
    phases: dict[str, float] = field(default_factory=dict)
    _phase_start: float = field(default_factory=time.monotonic)

    def phase(self, name: str) -> None:
        """The phase ``name`` ended now (it began when the previous one ended, or at the start)."""
        now = time.monotonic()
        self.phases[name] = round(now - self._phase_start, 1)
        self._phase_start = now

    def text(self) -> str:
        return json.dumps(
            {
                "seed": self.seed, "workflows": self.workflows, "tasks": self.tasks, "faults": dict(self.faults),
                "node_restarts": self.restarts, "fault_tolerance_alerts": self.failovers_alerts,
                "reruns_after_worker_loss": self.reruns_after_worker_loss,
                "retries_after_failure": self.retries_after_failure, "seconds": round(self.seconds, 1),
                "fault_weights": self.fault_weights, "poison_commands": self.poison_commands, "stopped": self.stopped,
                "off": sorted(k for k, w in self.fault_weights.items() if not w),
                "killed_attempts_checked": self.killed_attempts_checked,
                "safety_nets": dict(self.safety_nets), "concurrency_peaks": self.concurrency_peaks,
                "estimated_group_peaks": self.estimated_group_peaks, "dst_fires": self.dst_fires,
                "phases": self.phases, "violations": self.violations[:20],
            }
        )  # fmt: skip


def random_dag(rng: random.Random, name: str, flaky_rate: float, sleep: float) -> WorkflowDef:
    n = rng.randint(5, 20)
    tasks = []
    for i in range(n):
        ups = sorted({f"t{j}" for j in rng.sample(range(i), k=min(i, rng.randint(0, 3)))}) if i else []
        flaky = rng.random() < flaky_rate
        script = TASK % {"sleep": f"{sleep * rng.uniform(0.5, 1.5):.2f}", "flaky": "yes" if flaky else "no",
                         "psql": pg_bindir() / "psql",
                         "watch": WATCH_PREAMBLE % {"port": "${watch_port}", "label": "$ti"}}  # fmt: skip
        # half the flaky tasks wait retry_interval (1 minute) before their retry: a timer a failover must re-arm
        interval = 1 if flaky and rng.random() < 0.5 else 0
        tasks.append(TaskDef(f"t{i}", "SHELL", {"rawScript": script}, upstream=tuple(ups), retries=3,
                             retry_interval=interval))  # fmt: skip
    # a start may set only declared globals: the ledger's DSN and the watcher's port come with each start, and
    # a poison command's unresolvable "poison" (tests/chaos_faults.py)
    names = ("ledger_dsn", "watch_port", "poison")
    params = tuple({"prop": p, "direct": "IN", "type": "VARCHAR", "value": ""} for p in names)
    return WorkflowDef(name=name, project="chaos", tasks=tuple(tasks), global_params=params)


class Cluster:
    """The processes of one chaos run; every node it ever started is stopped at the end."""

    def __init__(self, base: Path, rng: random.Random) -> None:
        self.base = base
        self.rng = rng
        self.etcd = EtcdServer(base / "etcd", free_port(), free_port(), base / "logs" / "etcd.log", **tls.etcd_kwargs())
        self.pg = PostgresServer(base / "pg", free_port(), base / "logs" / "postgres.log", durable=True)
        self.root = f"/chaos-{uuid.uuid4().hex[:6]}"
        #: the run's own time zone (tests/chaos_dst.py), found by every node
        self.tzdir = base / "zoneinfo"
        self.nodes: dict[str, NodeProc] = {}
        self.all: list[NodeProc] = []
        self.paused: set[str] = set()
        #: a loopback proxy in front of each worker slot: masters reach the worker through it, so the
        #: driver can hold back its replies or drop requests (tests/delay_proxy.py)
        self.proxies: dict[str, DelayProxy] = {}

    def start_infra(self) -> None:
        self.etcd.start()
        tls.secure_etcd(self.etcd)
        self.pg.start()

    def spool_dir(self, slot: str) -> Path:
        """Where a worker slot keeps its unacknowledged results (its restarts send what it left)."""
        return self.base / "spool" / slot

    def start_node(self, slot: str, port: int = 0, extra_env: dict[str, str] | None = None) -> NodeProc:
        role = slot.split("-", maxsplit=1)[0]
        env = node_env(self.etcd.endpoint, self.root, TTL, PORPOISE_DATABASE_DSN=self.pg.dsn,
                       PORPOISE_LOGGING_LEVEL="info", PORPOISE_MASTER_FAILOVER_SWEEP_INTERVAL="2",
                       PYTHONFAULTHANDLER="1", PORPOISE_DEBUG_WEDGE_HOOK="true",
                       PYTHONTZPATH=f"{self.tzdir}{os.pathsep}{os.pathsep.join(zoneinfo.TZPATH)}",
                       **(extra_env or {}))  # fmt: skip
        overrides = []
        if role == "worker":
            overrides = [f"worker.log_dir={self.base / 'task-logs'}", f"worker.exec_dir={self.base / 'exec'}",
                         "worker.exec_slots=16", "worker.drain_timeout=10",
                         f"worker.spool_dir={self.spool_dir(slot)}"]  # fmt: skip
            proxy = self.proxies.get(slot)
            if proxy is not None:
                port = port or free_port()
                proxy.upstream_port = port  # connections from now on reach the new incarnation
                overrides.append(f"worker.advertise_port={proxy.port}")
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


async def run(
    workflows: int, seed: int, base: Path, deadline: float = 600.0, sleep: float = 0.1,
    faults: dict[str, float] | None = None,
) -> Summary:  # fmt: skip
    """``faults``: fault kind -> weight overrides (tests/chaos_faults.py, e.g. ``{"poison": 1}``)."""
    rng = random.Random(seed)
    summary = Summary(seed, workflows, fault_weights=weights(faults))
    cluster = Cluster(base, rng)
    watcher = TaskWatcher().start()
    started = time.monotonic()
    try:
        await asyncio.to_thread(cluster.start_infra)
        dsn = await databases.migrate(cluster.pg, "porpoise")
        codes, dst_code = await _save_workflows(cluster, rng, workflows, sleep)
        for slot in ("worker-a", "worker-b"):
            cluster.proxies[slot] = await DelayProxy(0).start()
        for slot in ("master-a", "master-b", "master-c", "worker-a", "worker-b"):
            await asyncio.to_thread(cluster.start_node, slot)
        summary.phase("start")
        conn = await asyncpg.connect(cluster.pg.owner_dsn)  # the DST schedule's window opens as the faults begin
        try:
            dst = await chaos_dst.add_schedule(conn, dst_code, cluster.tzdir)
        finally:
            await conn.close()
        params = {"ledger_dsn": dsn, "watch_port": str(watcher.port)}
        chaos = Chaos(cluster, rng, summary, dsn, params, [c for c, _ in codes], watcher)
        done, covered = asyncio.Event(), asyncio.Event()
        driver = asyncio.create_task(drive(chaos, done, summary.fault_weights, covered))
        try:
            command_ids, summary.tasks = await _submit(dsn, codes, workflows, rng, params, covered)
            summary.workflows = len(command_ids)
            summary.phase("submit")
            await _wait_all(dsn, command_ids, chaos.poison, deadline)
            summary.phase("workload")
        finally:
            done.set()
            await driver
        summary.phase("last fault")
        summary.violations += await chaos_dst.settle(dsn, *dst, deadline=300)
        summary.dst_fires = len(chaos_dst.expected_fires(*dst[1:]))
        summary.phase("dst settle")
        summary.seconds = time.monotonic() - started
        summary.poison_commands = len(chaos.poison)
        summary.stopped = len(chaos.stopped)
        await _check(dsn, command_ids, chaos.poison, watcher, summary, chaos.stopped)
        summary.phase("check")
    finally:
        await asyncio.to_thread(cluster.stop)
        await asyncio.to_thread(watcher.close)
        for proxy in cluster.proxies.values():
            await proxy.close()
        summary.phase("stop")
    _check_no_process_left(base, summary)
    _count_safety_nets(base / "logs", summary)
    return summary


async def _save_workflows(
    cluster: Cluster, rng: random.Random, workflows: int, sleep: float
) -> tuple[list[tuple[int, int]], int]:
    """The ledger table, the task groups, the random workflows ((code, tasks) each) and the DST workflow's code."""
    conn = await asyncpg.connect(cluster.pg.owner_dsn)  # the ledger table: DDL
    try:
        await conn.execute(LEDGER_DDL)
        await chaos_concurrency.setup(conn)
        codes = []
        for i in range(min(20, workflows)):
            wf = chaos_concurrency.decorate(rng, random_dag(rng, f"dag{i}", 0.1, sleep), i)
            code, _ = await save_workflow(conn, wf, release=True)
            codes.append((code, len(wf.tasks)))
        dst_code, _ = await save_workflow(conn, chaos_dst.WORKFLOW, release=True)
    finally:
        await conn.close()
    return codes, dst_code


async def _submit(
    dsn: str, codes: list[tuple[int, int]], workflows: int, rng: random.Random, params: dict[str, str],
    covered: asyncio.Event | None = None, extra_seconds: float = 300.0,
) -> tuple[list[int], int]:  # fmt: skip
    """Commands arrive in batches over the first part of the run, while faults are injected. Until every
    enabled fault kind was injected (``covered``), a trickle of further workflows keeps tasks running for
    the faults to hit (at most ``extra_seconds`` more)."""
    ids: list[int] = []
    tasks = 0
    param = json.dumps({"StartParams": params})
    weights = [chaos_concurrency.weight(i) for i in range(len(codes))]  # serial workflows less often

    async def batch_of(n: int) -> None:
        nonlocal ids, tasks
        batch = rng.choices(codes, weights, k=n)
        got = await insert_commands(dsn, [(c, param) for c, _ in batch])
        if got is None:
            raise RuntimeError("could not submit commands")
        ids += got
        tasks += sum(n for _, n in batch)

    for start in range(0, workflows, 20):
        await batch_of(min(20, workflows - start))
        await asyncio.sleep(rng.uniform(0.2, 1.0))  # the workload's pace: batches spread over the faults
    until = time.monotonic() + extra_seconds
    while covered is not None and not covered.is_set() and time.monotonic() < until:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(covered.wait(), rng.uniform(1.0, 3.0))
        if not covered.is_set():
            await batch_of(3)
    return ids, tasks


async def _wait_all(dsn: str, command_ids: list[int], poison: list[int], deadline: float) -> None:
    """Until every good command's instance ended and every poison command left the queue."""
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
                queued = await conn.fetchval("SELECT count(*) FROM command WHERE id = ANY($1)", poison)
            finally:
                await conn.close()
            if finished == len(command_ids) and queued == 0:
                return
        except DB_FAILURES:
            pass
        await asyncio.sleep(0.5)  # polling interval of the wait (no notification to wait on)


async def _check(
    dsn: str, command_ids: list[int], poison: list[int], watcher: TaskWatcher | None, summary: Summary,
    stopped: set[int] = frozenset(),  # type: ignore[assignment]
) -> None:  # fmt: skip
    """The ledger's checks after a run (``watcher`` None: the processes were not watched, see check_ledger).
    ``stopped``: instances a stop storm stopped; each ends STOP or SUCCESS and starts no task after its end."""
    v = summary.violations
    # every instance ended, so every task process has exited or is about to (its last ledger write is done)
    if watcher is not None:
        with contextlib.suppress(AssertionError):
            await eventually(lambda: not watcher.alive(), 30, "every watched task process gone")
    conn = await asyncpg.connect(dsn)
    try:
        concurrency = await chaos_concurrency.load(conn)  # task group sizes, serial workflows' rules
        stopped_by_rule = concurrency.stopped_by_rule()
        instances = await conn.fetch("SELECT id, command_id, state FROM workflow_instance")
        by_command = collections.Counter(r["command_id"] for r in instances)
        missing = [c for c in command_ids if by_command[c] == 0]
        if missing:
            left = await conn.fetchval("SELECT count(*) FROM command")
            errors = await conn.fetch("SELECT id, message FROM error_command LIMIT 5")
            v.append(f"{len(missing)} command(s) without an instance ({left} still queued, errors {errors})")
        v += [f"command {c} became {n} instances" for c, n in by_command.items() if n > 1]
        v += [f"poison command {c} became an instance" for c in poison if by_command[c]]
        refused = {r["id"] for r in await conn.fetch("SELECT id FROM error_command WHERE id = ANY($1)", poison)}
        v += [f"poison command {c} did not end in error_command" for c in poison if c not in refused]
        wrongly = await conn.fetch("SELECT id, message FROM error_command WHERE id = ANY($1) LIMIT 5", command_ids)
        v += [f"good command {r['id']} refused: {r['message']}" for r in wrongly]
        stuck = await conn.fetch("SELECT id, workflow_definition_code FROM command LIMIT 10")
        if stuck:
            v.append(f"commands still queued after the run: {[tuple(r) for r in stuck]}")
        ended = {r["id"]: r["state"] for r in instances}
        v += [
            f"stopped instance {i} ended in state {ended.get(i)}"
            for i in sorted(stopped)
            if ended.get(i) not in (STOP, SUCCESS)
        ]
        late = await conn.fetch(
            "SELECT l.workflow_instance_id, l.task_instance_id, l.start_time, w.end_time FROM chaos_ledger l"
            " JOIN workflow_instance w ON w.id = l.workflow_instance_id"
            " WHERE l.workflow_instance_id = ANY($1) AND w.state = $2 AND l.start_time > w.end_time",
            sorted(stopped),
            STOP,
        )
        v += [f"stopped instance {r['workflow_instance_id']}: task instance {r['task_instance_id']} started "
              f"{r['start_time']} after its end {r['end_time']}" for r in late]  # fmt: skip
        not_ok = [
            (r["id"], r["state"])
            for r in instances
            if r["state"] != SUCCESS and r["id"] not in stopped_by_rule and r["id"] not in stopped
        ]
        if not_ok:
            bad = await conn.fetch(
                "SELECT workflow_instance_id, name, attempt, state, host FROM task_instance"
                f" WHERE workflow_instance_id = ANY($1) AND state <> {int(TaskState.SUCCESS)}"
                " ORDER BY workflow_instance_id, name, attempt",
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
        summary.failovers_alerts = int(await conn.fetchval("SELECT count(*) FROM alert WHERE alert_type = 4"))
    finally:
        await conn.close()
    lives = watcher.snapshot() if watcher is not None else None  # after the reads: every row's process seen
    found = check_ledger(attempts, ledger, lives)
    v += found.violations
    summary.retries_after_failure = found.retries_after_failure
    summary.reruns_after_worker_loss = found.reruns_after_worker_loss
    summary.killed_attempts_checked = found.unfinished_checked
    limits = chaos_concurrency.evaluate(concurrency, lives)
    v += limits.violations
    summary.concurrency_peaks = limits.peaks
    summary.estimated_group_peaks = limits.estimated_peaks


SAFETY_NETS = {
    "background loop failed": "loop_restarts",  # core.aio.BackgroundService restarted a loop
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
    kinds = ", ".join(f"{k}={w:g}" for k, w in weights().items())
    parser.add_argument("--fault", action="append", default=[], metavar="KIND=WEIGHT",
                        help=f"weight of a fault kind, 0 = off (default {kinds})")  # fmt: skip
    args = parser.parse_args()
    try:
        faults = parse_weights(args.fault)
    except ValueError as exc:
        parser.error(str(exc))
    logs.configure("console", "warning")
    base = Path(tempfile.mkdtemp(prefix="porpoise-chaos-"))
    os.chmod(base, 0o755)
    try:
        summary = asyncio.run(run(args.workflows, args.seed, base, args.deadline, faults=faults))
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    print(summary.text())
    return 1 if summary.violations else 0


if __name__ == "__main__":
    sys.exit(main())
