"""The chaos run's fault driver: a table of fault kinds with weights, and a seeded driver.

Every 2-4 s (until the workload is done) the driver restarts what exited, then injects one fault: etcd
and PostgreSQL are restarted once each (rounds 3 and 6, in a seeded order); every other round draws a
kind from ``FAULT_KINDS`` by weight, after a first pass that injects each enabled kind once (in a seeded
order) so that a short run sees them all.

A new fault kind is one ``async def inject(chaos: Chaos) -> bool`` (False: could not inject this time;
``_on(role, fault)`` makes one that hits a random running master or worker) and one ``FaultKind`` row.
The summary counts it under its name; it puts what it finds wrong in ``chaos.summary.violations``;
``chaos`` holds the cluster, the seeded rng, the run's database and the task watcher.
Weights are overridden with ``--fault name=weight`` (``make chaos FAULTS="poison=1"``), or with
``PORPOISE_CHAOS_FAULTS="poison=1 kill-master=0"`` for tests/test_chaos.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import signal
import subprocess
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import asyncpg
import psutil

from engine.states import WorkflowState
from engine.storage.failures import DB_FAILURES
from rpc.errors import RpcError
from rpc.messages import ControlReply, WorkflowControl
from tests.helpers import NodeProc, eventually, rpc_client
from tests.task_watch import TaskWatcher

if TYPE_CHECKING:
    from tests.chaos import Cluster, Summary

TTL = 2.0
#: a definition code no workflow has (poison commands for a definition that does not exist)
MISSING_CODE = 987_654_321_000
#: a start parameter whose placeholder cannot be resolved (the date is out of range)
BAD_START_PARAM = "$[yyyyMMdd+99999999]"
#: how long a node may take to stop after SIGTERM (a worker drains its short tasks first; the masters'
#: shutdown_grace is 5 s, the chaos workers' 10 s)
TERM_EXIT_TIMEOUT = 30.0
#: the nodes' rpc.timeout (configs/rpc.yaml): held replies last shorter or longer than it
RPC_TIMEOUT = 5.0


@dataclass
class Chaos:
    """What a fault may touch."""

    cluster: Cluster
    rng: random.Random
    summary: Summary
    dsn: str
    #: the good commands' StartParams (a poison command looks like them but for its poison)
    start_params: dict[str, str]
    #: definition codes of the run's workflows
    codes: list[int]
    #: the task processes' lives, watched from outside (tests/task_watch.py)
    watcher: TaskWatcher | None = None
    #: ids of the poison commands inserted: each must end in error_command
    poison: list[int] = field(default_factory=list)
    #: instances a stop storm stopped (or may have): each ends STOP or SUCCESS, no task starting after its end
    stopped: set[int] = field(default_factory=set)

    def fault(self, label: str) -> None:
        self.summary.faults[label] += 1

    def live_node(self, role: str) -> tuple[str, NodeProc] | None:
        """A random running node of ``role`` (master, worker, "": any; None if none runs)."""
        live = sorted(s for s, n in self.cluster.nodes.items()
                      if s.startswith(role) and n.proc.exited() is None and n.proc.record)  # fmt: skip
        if not live:
            return None
        slot = self.rng.choice(live)
        return slot, self.cluster.nodes[slot]


#: inject one fault; False when it could not (no running node of the role, database down)
Inject = Callable[[Chaos], Awaitable[bool]]


@dataclass(frozen=True)
class FaultKind:
    name: str
    inject: Inject
    #: relative weight in the draw; 0 turns the kind off
    weight: float
    about: str


def _running_tasks(chaos: Chaos, node: NodeProc) -> int:
    """How many watched task processes are children of ``node`` right now."""
    if chaos.watcher is None:
        return 0
    n = 0
    for life in chaos.watcher.alive():
        with contextlib.suppress(psutil.Error):
            n += psutil.Process(life.pid).ppid() == node.pid
    return n


async def _kill(chaos: Chaos, slot: str, node: NodeProc) -> None:
    if slot.startswith("worker"):
        # a worker dies while it runs tasks (up to 3 s of waiting for one): the attempts killed with it
        # write no end row, which is the overlap the watched deaths check
        with contextlib.suppress(AssertionError):
            await eventually(lambda: _running_tasks(chaos, node), 3.0, "a task running on the worker")
    assert node.proc.record is not None
    node.proc.record.signal(signal.SIGKILL)


async def _pause(chaos: Chaos, slot: str, node: NodeProc) -> None:
    record = node.proc.record
    assert record is not None
    record.signal(signal.SIGSTOP)
    try:
        await asyncio.sleep(chaos.rng.uniform(0.5, TTL + 1.5))  # the fault itself: shorter or longer than the lease
    finally:
        record.signal(signal.SIGCONT)


async def _term(chaos: Chaos, slot: str, node: NodeProc) -> None:
    """A graceful restart: SIGTERM, the node drains and exits, and comes back at once."""
    assert node.proc.record is not None and node.proc.popen is not None
    node.proc.record.signal(signal.SIGTERM)
    try:
        await asyncio.to_thread(node.proc.popen.wait, TERM_EXIT_TIMEOUT)
    except subprocess.TimeoutExpired:
        chaos.summary.violations.append(
            f"{slot} did not exit within {TERM_EXIT_TIMEOUT} s of SIGTERM (its threads' stacks: {node.proc.log_path})"
        )
        node.proc.record.signal(signal.SIGABRT)  # PYTHONFAULTHANDLER: every thread's stack goes to its log
        with contextlib.suppress(subprocess.TimeoutExpired):
            await asyncio.to_thread(node.proc.popen.wait, 10)
        node.proc.record.signal(signal.SIGKILL)
    await restart_exited(chaos)


async def _wedge(chaos: Chaos, slot: str, node: NodeProc) -> None:
    """The node's event loop blocks for good (debug.wedge_hook, SIGUSR2): its keep-alive thread stops
    renewing (registry.loop_stall_limit), its lease expires and its work is taken over while the process
    and its open sockets live on, answering nothing. Only SIGKILL ends it; it is restarted next round."""
    record = node.proc.record
    assert record is not None
    record.signal(signal.SIGUSR2)
    try:
        # the fault itself: wedged for a while past the stall limit + lease, longer or shorter
        await asyncio.sleep(chaos.rng.uniform(TTL, 3 * TTL + 2))
    finally:
        record.signal(signal.SIGKILL)


#: the largest step of a node's wall clock the clock-step fault makes: inside master.max_clock_skew (1 s), so
#: a master still starts; its dispatches' validity and a worker's checks of it are read across the step
CLOCK_STEP = 0.9


async def _clock_step(chaos: Chaos, slot: str, node: NodeProc) -> None:
    """The node's wall clock steps (``debug.clock_offset``: its ``time.time()`` moves by up to
    ``CLOCK_STEP`` s, ahead or behind): it is killed -9 and started again with the offset, which it keeps
    until its next restart."""
    assert node.proc.record is not None and node.proc.popen is not None
    node.proc.record.signal(signal.SIGKILL)
    await asyncio.to_thread(node.proc.popen.wait)
    offset = chaos.rng.choice((-1, 1)) * chaos.rng.uniform(0.3, CLOCK_STEP)
    with contextlib.suppress(AssertionError):  # could not start now (an outage): restarted next round, unstepped
        await asyncio.to_thread(chaos.cluster.start_node, slot, 0, {"PORPOISE_DEBUG_CLOCK_OFFSET": f"{offset:.3f}"})


async def _kill_before_report(chaos: Chaos, slot: str, node: NodeProc) -> None:
    """A worker dies after a task's process ended and before its result reached a master: the worker is
    restarted with worker.test_hold_results (results spooled, never sent), killed -9 once a result is in
    its spool, and restarted next round without the hook, which sends the spooled result before it
    registers. The task must not run again (unless the restart came after the lease expired: then the
    attempt was failed over, which the ledger allows as a re-run after a lost worker)."""
    assert node.proc.record is not None and node.proc.popen is not None
    node.proc.record.signal(signal.SIGKILL)
    await asyncio.to_thread(node.proc.popen.wait)
    spool = chaos.cluster.spool_dir(slot)
    before = {p.name for p in spool.rglob("*.json")}
    try:
        held = await asyncio.to_thread(chaos.cluster.start_node, slot, 0, {"PORPOISE_WORKER_TEST_HOLD_RESULTS": "true"})
    except AssertionError:
        return  # could not start now (an outage): restarted next round
    with contextlib.suppress(AssertionError):  # a result held in the spool, or 10 s without one
        await eventually(lambda: {p.name for p in spool.rglob("*.json")} - before, 10.0, "a result in the spool")
    assert held.proc.record is not None
    held.proc.record.signal(signal.SIGKILL)


async def _hold_replies(chaos: Chaos) -> bool:
    """A worker's replies to masters are held back (the request got there, the answer did not in time):
    shorter or longer than the masters' RPC timeout. Dispatches in doubt must stay on that worker."""
    slot = chaos.rng.choice(sorted(chaos.cluster.proxies))
    proxy = chaos.cluster.proxies[slot]
    proxy.hold()
    try:
        await asyncio.sleep(chaos.rng.uniform(0.5, RPC_TIMEOUT + 2))
    finally:
        proxy.release()
    return True


async def _drop_requests(chaos: Chaos) -> bool:
    """Requests from masters to a worker are lost on the way (the sender saw them written)."""
    slot = chaos.rng.choice(sorted(chaos.cluster.proxies))
    proxy = chaos.cluster.proxies[slot]
    proxy.dropping = True
    try:
        await asyncio.sleep(chaos.rng.uniform(0.5, RPC_TIMEOUT + 2))
    finally:
        proxy.dropping = False
    return True


async def _poison(chaos: Chaos) -> bool:
    """Commands no master can turn into an instance, inserted straight into the command table among the
    good ones: a start parameter that cannot be resolved, and a definition that does not exist."""
    bad_param = {"StartParams": {**chaos.start_params, "poison": BAD_START_PARAM}}
    rows = [
        (chaos.rng.choice(chaos.codes), json.dumps(bad_param)),
        (MISSING_CODE + len(chaos.poison), json.dumps({"StartParams": chaos.start_params})),
    ]
    ids = await insert_commands(chaos.dsn, rows)
    if ids is None:
        return False  # PostgreSQL is down for long: no poison this round
    chaos.poison += ids
    return True


async def _stop_storm(chaos: Chaos) -> bool:
    """Many stops at once while the load runs: 5-15 running instances (of workflows without run limits:
    their rules' checks expect every run to end SUCCESS) are stopped through their owners' workflow.control,
    all together. Each must end STOP (or SUCCESS: its last task ended first) and start no task after its end
    (``chaos.stopped``: checked in tests/chaos.py)."""
    try:
        conn = await asyncpg.connect(chaos.dsn, timeout=5)
        try:
            rows = await conn.fetch(
                "SELECT w.id, w.host FROM workflow_instance w JOIN workflow_definition d"
                " ON d.code = w.workflow_definition_code"
                f" WHERE w.state = {int(WorkflowState.RUNNING_EXECUTION)} AND w.host <> ''"
                " AND d.execution_type = 0 AND coalesce(d.max_active_runs, 0) = 0 ORDER BY w.id"
            )
        finally:
            await conn.close()
    except DB_FAILURES:
        return False  # PostgreSQL is down: no storm this round
    if len(rows) < 2:
        return False
    picked = chaos.rng.sample(rows, k=min(len(rows), chaos.rng.randint(5, 15)))
    client = rpc_client()
    try:
        replies = await asyncio.gather(
            *(client.call(r["host"], WorkflowControl(r["id"], "stop", "chaos stop storm")) for r in picked),
            return_exceptions=True,
        )
    finally:
        await client.close()
    for r, reply in zip(picked, replies, strict=True):
        # a stop that may have acted (accepted, or its answer lost) allows STOP; one refused, none
        acted = isinstance(reply, ControlReply) and reply.accepted
        if acted or (isinstance(reply, RpcError) and reply.maybe_delivered):
            chaos.stopped.add(r["id"])
    return True


def _on(role: str, fault: Callable[[Chaos, str, NodeProc], Awaitable[None]]) -> Inject:
    """``fault`` on a random running node of ``role`` (not injected when none runs)."""

    async def inject(chaos: Chaos) -> bool:
        picked = chaos.live_node(role)
        if picked is None:
            return False
        await fault(chaos, *picked)
        return True

    return inject


FAULT_KINDS: dict[str, FaultKind] = {
    k.name: k
    for k in (
        FaultKind("kill-master", _on("master", _kill), 3, "SIGKILL a random master (restarted next round)"),
        FaultKind("kill-worker", _on("worker", _kill), 3, "SIGKILL a random worker while it runs a task"),
        FaultKind("pause-master", _on("master", _pause), 2, "SIGSTOP a master for 0.5 s .. TTL + 1.5 s"),
        FaultKind("pause-worker", _on("worker", _pause), 2, "SIGSTOP a worker for 0.5 s .. TTL + 1.5 s"),
        FaultKind("term-master", _on("master", _term), 1, "graceful restart: SIGTERM, wait for the exit, start"),
        FaultKind("term-worker", _on("worker", _term), 1, "graceful restart: SIGTERM, drain, exit, start"),
        FaultKind("wedge-master", _on("master", _wedge), 1, "a master's event loop blocks for good (SIGUSR2)"),
        FaultKind(
            "kill-before-report",
            _on("worker", _kill_before_report),
            2,
            "a worker killed -9 between its task's end and the report (result spooled, sent on restart)",
        ),
        FaultKind("clock-step", _on("", _clock_step), 1, "a master's or worker's wall clock steps (up to 0.9 s)"),
        FaultKind("stop-storm", _stop_storm, 1, "5-15 running instances stopped at once through their masters"),
        FaultKind("hold-replies", _hold_replies, 2, "a worker's replies to masters held back past the RPC timeout"),
        FaultKind("drop-requests", _drop_requests, 2, "requests from masters to a worker lost on the way"),
        FaultKind("poison", _poison, 1, "a START_PROCESS with an unresolvable start param + one for no definition"),
    )
}


def weights(overrides: Mapping[str, float] | None = None) -> dict[str, float]:
    out = {name: kind.weight for name, kind in FAULT_KINDS.items()}
    for name, weight in (overrides or {}).items():
        if name not in out:
            raise ValueError(f"unknown fault kind {name!r} (known: {', '.join(out)})")
        if weight < 0:
            raise ValueError(f"fault {name}: weight must be >= 0, got {weight}")
        out[name] = weight
    return out


def parse_weights(specs: list[str]) -> dict[str, float]:
    """``["poison=1", "kill-master=0"]`` -> weights; ValueError naming the bad item."""
    out = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            raise ValueError(f"fault weight {spec!r}: expected NAME=NUMBER") from None
        if not sep:
            raise ValueError(f"fault weight {spec!r}: expected NAME=NUMBER")
    return weights(out)


class FaultPlan:
    """Fault kinds to inject: each enabled kind once first (in a seeded order), then drawn by weight. A
    kind that could not be injected before it ever was (no running node of its role) stays owed."""

    def __init__(self, rng: random.Random, table: Mapping[str, float]) -> None:
        self.rng = rng
        self.enabled = sorted(k for k, w in table.items() if w > 0)
        self.weights = [table[k] for k in self.enabled]
        self.owed = list(self.enabled)
        rng.shuffle(self.owed)
        self.injected: set[str] = set()

    def next(self) -> str | None:
        if self.owed:
            return self.owed.pop(0)
        return self.rng.choices(self.enabled, weights=self.weights)[0] if self.enabled else None

    def record(self, kind: str, injected: bool) -> None:
        if injected:
            self.injected.add(kind)
        elif kind not in self.injected and kind not in self.owed:
            self.owed.append(kind)


async def drive(
    chaos: Chaos, done: asyncio.Event, table: Mapping[str, float], covered: asyncio.Event | None = None
) -> None:
    """Inject a fault every 2-4 s until the workload is done; restart what died. ``covered`` is set once
    every enabled kind and both infrastructure restarts were injected (the workload goes on until then)."""
    rng = chaos.rng
    infra = ["etcd", "postgres"]
    rng.shuffle(infra)
    kinds = FaultPlan(rng, table)
    rounds = 0
    while not done.is_set():
        if covered is not None and not infra and set(kinds.enabled) <= kinds.injected:
            covered.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), rng.uniform(2.0, 4.0))
        if done.is_set():
            break
        rounds += 1
        await restart_exited(chaos)
        if rounds in (3, 6) and infra:
            await _restart_infra(chaos, infra.pop())
            continue
        kind = kinds.next()
        if kind is None:
            continue
        injected = await FAULT_KINDS[kind].inject(chaos)
        kinds.record(kind, injected)
        if injected:
            chaos.fault(kind)
    await restart_exited(chaos)


async def _restart_infra(chaos: Chaos, what: str) -> None:
    chaos.fault(f"restart {what}")
    server = chaos.cluster.etcd if what == "etcd" else chaos.cluster.pg
    await asyncio.to_thread(server.stop)
    await asyncio.sleep(chaos.rng.uniform(0.3, 1.0))  # the outage itself
    await asyncio.to_thread(server.start)


async def restart_exited(chaos: Chaos) -> None:
    cluster = chaos.cluster
    for slot, node in sorted(cluster.nodes.items()):
        if node.proc.exited() is None:
            continue
        if node.proc.popen is not None:
            await asyncio.to_thread(node.proc.popen.wait)
        # masters sometimes come back on the same address (the epoch-floor path), workers on a new one
        port = node.port if slot.startswith("master") and cluster.rng.random() < 0.5 else 0
        try:
            await asyncio.to_thread(cluster.start_node, slot, port)
        except AssertionError:  # the port was taken meanwhile, or the start raced an outage: next round
            continue
        chaos.summary.restarts += 1


async def insert_commands(dsn: str, rows: list[tuple[int, str]], attempts: int = 100) -> list[int] | None:
    """START_PROCESS commands (definition code, command_param JSON); retried while PostgreSQL restarts.
    Their ids, or None when the database did not answer."""
    for _ in range(attempts):
        try:
            conn = await asyncpg.connect(dsn, timeout=5)
            try:
                got = await conn.fetch(
                    "INSERT INTO command (command_type, workflow_definition_code, command_param)"
                    " SELECT 0, c, p::jsonb FROM unnest($1::bigint[], $2::text[]) AS u(c, p) RETURNING id",
                    [c for c, _ in rows],
                    [p for _, p in rows],
                )
            finally:
                await conn.close()
            return [r["id"] for r in got]
        except DB_FAILURES:
            await asyncio.sleep(0.3)  # PostgreSQL is being restarted by the driver: try again shortly
    return None
