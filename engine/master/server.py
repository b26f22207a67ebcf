"""The master process: one uvloop loop holding the command poller, one actor per running workflow
instance, the state wheel, the dispatcher, the RPC endpoints workers and the API call, and /metrics.

Report handling (invariant 4): a worker's task.running / task.result goes to the owning actor, which
persists it (fenced) before this handler answers ``ack``. A report for an instance this master does
not own is not acknowledged; the reply names the owner when the database knows it, so the worker
re-targets. Stale or duplicate reports are acknowledged and dropped. A report is matched to its attempt
by task instance id and attempt number, not by the worker's address: a worker restarted at another
address sends the results its spool kept, and they count when that attempt is still the current one
(one failed over meanwhile was superseded: its late result is acknowledged and ignored).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime as dt
import time
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
from aiohttp import web

from core import logs, marks
from core.aio import bounded, cancel_and_wait
from core.text import storable, storable_json
from engine.clocks import check_skew
from engine.concurrency.serial_sql import SerialRepair
from engine.concurrency.task_groups_sql import GroupListener
from engine.master import waiting
from engine.master.actor import DispatchRequest, InstanceInfo, WorkflowActor
from engine.master.arrivals import Arrivals
from engine.master.commands import Claimed, CommandPoller, DefinitionCache
from engine.master.dispatcher import Dispatcher
from engine.master.failover import FailoverService
from engine.master.first_turn import FirstTurn, new_run
from engine.master.gcpolicy import GcPolicy
from engine.master.retention import LOCK_NAME, RetentionService
from engine.master.state_tally import StateTally
from engine.master.store import MasterStore
from engine.master.wheel import StateWheel
from engine.master.worker_groups import WorkerGroupMap
from engine.master.workflow_messages import (
    RERUN_ON_RESUME,
    Attempt,
    GroupSlotGranted,
    LogicCheck,
    PauseRequested,
    StopRequested,
    TaskResultEvent,
    TaskRunningEvent,
)
from engine.node import SHUTDOWN_BOUND, SHUTDOWN_STEP, Node
from engine.resources import catalog
from engine.scheduling.scheduler import Scheduler
from engine.states import CommandType, TaskState, WorkflowState
from engine.storage.blobs import BlobError, BlobNotFound, BlobStore, blob_store
from engine.storage.failures import DB_FAILURES
from engine.storage.pool import connect_pool, database_reachable
from engine.workflows.definitions import WorkflowSpec
from registry import MASTER, ChangeKind, HeartbeatSource, LoadLimits, NodeChange, NodeId, SessionState, SlotTracker
from rpc.errors import BadRequest, RpcError
from rpc.messages import (
    LOG_TAIL_BYTES,
    CacheExpire,
    ControlReply,
    Done,
    ReportReply,
    ResourceFetch,
    SubWorkflowDone,
    TaskKill,
    TaskReports,
    TaskReportsReply,
    TaskResult,
    TaskRunning,
    WaitingReasons,
    WaitingReply,
    WorkflowControl,
)

log = logs.get(__name__)

#: seconds of a lease a dispatch does not count on (flight time, clock skew between master and worker)
LEASE_MARGIN = 0.5

_RESULT_STATES = {
    "SUCCESS": TaskState.SUCCESS,
    "FAILURE": TaskState.FAILURE,
    "KILL": TaskState.KILL,
    # killed by its worker on losing its lease: run it again elsewhere, as a worker failover would
    "LOST": TaskState.NEED_FAULT_TOLERANCE,
}

#: where a workflow control takes a running instance: it acted when it moved the instance there
_CONTROL_TO = {
    "stop": {WorkflowState.READY_STOP, WorkflowState.STOP},
    "pause": {WorkflowState.READY_PAUSE, WorkflowState.PAUSE},
}

#: taken-back attempts that run again, per command type: a resume re-runs the killed / paused tasks,
#: a recovery (START_FAILURE_TASK_PROCESS) also the failed and lost ones
RERUN_BY_COMMAND = {
    CommandType.RECOVER_SUSPENDED_PROCESS: RERUN_ON_RESUME,
    CommandType.START_FAILURE_TASK_PROCESS: RERUN_ON_RESUME | {TaskState.FAILURE, TaskState.NEED_FAULT_TOLERANCE},
}


class Master(Node):
    role = "master"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        m = self.cfg.master
        self.limits = LoadLimits(m.max_cpu_load_avg, m.reserved_memory_gb)
        self.source = HeartbeatSource(self.limits, busy=lambda: self.cpu.busy)
        self.slots: SlotTracker | None = None
        self.gc = GcPolicy()
        self.wheel = StateWheel()
        self.actors: dict[int, WorkflowActor] = {}
        #: the actors whose definition has a task in a task group (the only ones that can hold an attempt in a
        #: group's queue): the group check's periodic look goes through these, not through every actor
        self.grouped: dict[int, WorkflowActor] = {}
        self.states = StateTally()
        self.pool: asyncpg.Pool | None = None
        #: where resource files live (storage.type), made on a worker's first fetch
        self._blobs: BlobStore | None = None
        self.store: MasterStore | None = None
        self.cache: DefinitionCache | None = None
        self.failover: FailoverService | None = None
        #: instances a takeover of ours is taking, actors not started yet: their reports wait for them
        self.arrivals = Arrivals()
        self.poller: CommandPoller | None = None
        self.scheduler: Scheduler | None = None
        self.serial_repair: SerialRepair | None = None
        self.groups: GroupListener | None = None
        self.retention: RetentionService | None = None
        self.worker_groups: WorkerGroupMap | None = None
        self.dispatcher = Dispatcher(
            self.rpc, self._workers, m.host_selector, metrics=self.metrics, valid_until=self._valid_until_ms
        )
        self.finished_states: collections.Counter[str] = collections.Counter()
        #: short-lived RPCs the master starts on its own (a child's end reported to its parent's master)
        self._background: set[asyncio.Task[Any]] = set()
        for msg_cls, handler in (
            (TaskRunning, self.on_task_running),
            (TaskResult, self.on_task_result),
            (TaskReports, self.on_task_reports),
            (WorkflowControl, self.on_workflow_control),
            (CacheExpire, self.on_cache_expire),
            (SubWorkflowDone, self.on_sub_workflow_done),
            (ResourceFetch, self.on_resource_fetch),
            (WaitingReasons, self.on_waiting_reasons),
        ):
            self.rpc_server.register(msg_cls, handler)
        self.metrics.gauge("actors", lambda: len(self.actors))
        self.metrics.gauge("dispatch_queue", lambda: len(self.dispatcher))
        self.metrics.gauge("timers", lambda: len(self.wheel))
        # not gc.get_freeze_count(): it walks the permanent generation (0.1 s with 100,000 actors frozen)
        self.metrics.gauge("gc_heap_frozen", lambda: float(self.gc.frozen))  # replaces gc_frozen_objects
        self.metrics.gauge("instances_finished", lambda: dict(self.finished_states))
        self.metrics.gauge("instances_running", self.states.by_name)

    # -- node hooks -------------------------------------------------------------------------------

    def listen(self) -> tuple[str, int, str]:
        m = self.cfg.master
        return m.listen_host, m.listen_port, m.advertise_host

    def node_id(self) -> NodeId:
        return NodeId(MASTER, self.address)

    def heartbeat_source(self) -> HeartbeatSource:
        return self.source

    async def on_started(self) -> None:
        self.gc.install()
        dsn = self.cfg.database.url()
        # the master sets no session state on pooled connections (its LISTENs have their own)
        self.pool = await connect_pool(self.cfg.database, self._stop, self.metrics.pool_wait, reset_sessions=False)
        # before we register: a master whose clock is far off the database's takes no work
        await check_skew(self.pool, self.cfg.master.max_clock_skew, self.role)
        self.store = MasterStore(self.pool, self.address)
        self.cache = DefinitionCache(self.pool)
        self.poller = CommandPoller(
            self.store,
            dsn,
            self.cache,
            self._slot,
            self._may_claim,
            self._on_claimed,
            page=self.cfg.master.fetch_command_num,
            interval=self.cfg.master.command_poll_interval,
            metrics=self.metrics,
            on_preempt=self._preempt,
        )
        self.serial_repair = SerialRepair(self.pool, self.cfg.master.failover_sweep_interval, self._preempt)
        self.groups = GroupListener(
            self.pool, dsn, self.cfg.master.logic_check_interval, self._group_waiting, self._group_admitted
        )
        # every instance this incarnation will own gets an epoch above this floor; peers see it in our
        # heartbeat and fail over the instances of an earlier incarnation at this address
        self.source.epoch_floor = await self.store.epoch_floor()
        self.failover = FailoverService(
            self.address,
            self.store,
            self.cache,
            self.rpc,
            lambda: self.registry,
            self.actors,
            self.start_actor,
            self.cfg.master.failover_sweep_interval,
            self.metrics,
            starting=self.poller.starting,
            arrivals=self.arrivals,
            gc=self.gc,
        )
        self.scheduler = Scheduler(
            self.pool,
            self._slot,
            self.cfg.master.schedule_poll_interval,
            self.cfg.master.misfire_threshold,
            self.cfg.master.misfire_max_fires,
            self.metrics,
        )
        if self._blobs is None:  # retention deletes the archived task logs of the runs it removes
            self._blobs = blob_store(self.cfg, self.pool)
        self.retention = RetentionService(
            self.pool,
            self.cfg.history,
            lambda: self.registry.job_lock(LOCK_NAME) if self.registry is not None else None,
            self.metrics,
            blobs=self._blobs,
        )
        self.worker_groups = WorkerGroupMap(
            self.pool, self.cfg.master.worker_group_refresh_interval, self.dispatcher.membership_changed
        )
        self.wheel.start(self._deliver_timer)
        self.dispatcher.start()

    async def on_registered(self) -> None:
        assert self.registry is not None
        if self.slots is not None:
            self.slots.close()
        self.slots = SlotTracker(self.registry.membership, self.address)
        self.registry.membership.subscribe(self._on_membership)
        if self.failover is not None:
            self.registry.membership.subscribe(self.failover.on_membership)
            self.failover.start()
        self.dispatcher.paused = False
        self.dispatcher.membership_changed()
        assert self.poller is not None
        self.poller.start()
        self.poller.wake.set()
        if self.scheduler is not None:
            self.scheduler.start()
        if self.serial_repair is not None:
            self.serial_repair.start()
        if self.groups is not None:
            self.groups.start()
        if self.retention is not None:
            self.retention.start()
        if self.worker_groups is not None:
            self.worker_groups.start()

    async def on_fenced(self) -> None:
        # Lease lost: stop claiming, dispatching and driving instances at once (invariant 6). The
        # instances are failed over by a live master; our fenced writes could not land anyway.
        # Every wait is bounded by one TTL: a database call cut off mid-flight (the host's network
        # went away) can leave asyncpg waiting for its cancellation for good, and a master stuck here
        # would never re-register (tests/test_hosts.py, the network cut).
        self.dispatcher.paused = True
        bound = self.cfg.registry.lease_ttl
        services = [s for s in (self.poller, self.scheduler, self.failover, self.serial_repair, self.groups,
                                self.retention, self.worker_groups) if s is not None]  # fmt: skip
        await asyncio.gather(*(s.close(timeout=bound) for s in services))
        await self._stop_actors(timeout=bound)
        # a re-registration is a new incarnation: what we owned until now is failed over (by a peer or us)
        if self.store is not None:
            with contextlib.suppress(*DB_FAILURES):
                self.source.epoch_floor = await asyncio.wait_for(self.store.epoch_floor(), bound)
        if self.slots is not None:
            self.slots.close()
            self.slots = None

    def shutdown_bound(self) -> float:
        # the actors' grace, then SHUTDOWN_STEP (2 s) at most for each other step (each ends in ms unless
        # something hangs: a database that answers nothing holds the actors and the pool, not every step)
        return self.cfg.master.shutdown_grace + SHUTDOWN_BOUND

    async def on_shutdown(self) -> None:
        """Every step bounded: what overruns is cancelled, and abandoned if it ignores that (a write
        waiting on a database that answers nothing). The pool is terminated when its graceful close
        overruns (it waits for every connection to come back), so nothing abandoned writes after our
        lease is revoked; the instances left are failed over."""
        await bounded("background tasks", cancel_and_wait(*self._background), SHUTDOWN_STEP)
        services = (self.poller, self.scheduler, self.failover, self.serial_repair, self.groups, self.retention)
        for service in services:
            if service is not None:
                await bounded(type(service).__name__, service.close(), SHUTDOWN_STEP)
        grace = self.cfg.master.shutdown_grace
        await bounded("workflow actors", self._stop_actors(grace), grace + SHUTDOWN_STEP)
        await bounded("dispatcher", self.dispatcher.close(), SHUTDOWN_STEP)
        await bounded("timer wheel", self.wheel.close(), SHUTDOWN_STEP)
        self.gc.uninstall()
        self.gc.release()
        if self._blobs is not None:
            await bounded("blob store", self._blobs.close(), SHUTDOWN_STEP)
        if self.pool is not None and not await bounded("database pool", self.pool.close(), SHUTDOWN_STEP):
            self.pool.terminate()  # connections still out (abandoned work): closed under it

    async def readiness(self) -> dict[str, bool]:
        return {"database": await database_reachable(self.pool)}

    def health(self) -> dict[str, Any]:
        slot = self.slots.slot if self.slots else None
        masters = self.registry.membership.masters() if self.registry else []
        workers = self.registry.membership.workers() if self.registry else []
        return {
            "slot": None if slot is None else {"index": slot.index, "count": slot.count},
            "masters": [m.address for m in masters],
            "workers": [f"{w.node.group}/{w.address}" for w in workers],
            "actors": len(self.actors),
        }

    # -- claiming ---------------------------------------------------------------------------------

    def _slot(self) -> tuple[int, int]:
        slot = self.slots.slot if self.slots else None
        return (slot.index, slot.count) if slot else (0, 0)

    def _may_claim(self) -> str:
        if self.registry is None or self.registry.session.state is not SessionState.CONNECTED:
            return "registry session not connected"
        return self.source.overload_reason()

    def _on_claimed(self, created: list[Claimed]) -> None:
        for row, spec, attempts, first in created:
            rerun = RERUN_BY_COMMAND.get(int(row["command_type"]), frozenset())
            self.start_actor(
                InstanceInfo.from_row(row), spec, WorkflowState(row["state"]), attempts, rerun, elapsed=0.0, first=first
            )
        if created:
            self.gc.claimed(len(self.actors))

    def start_actor(
        self,
        info: InstanceInfo,
        spec: WorkflowSpec,
        state: WorkflowState,
        attempts: list[Attempt],
        rerun: frozenset[TaskState] = frozenset(),
        elapsed: float | None = None,
        group_waiting: frozenset[int] = frozenset(),
        first: FirstTurn | None = None,
    ) -> WorkflowActor:
        """Drive an instance. ``rerun``: states of taken-back attempts that run again (only when a
        command asks for it; a failover adopts attempts as they are). ``elapsed``: seconds of the
        workflow's time limit already spent (a claim starts the clock; a takeover continues it from the
        instance's start, or from now for an instance a command restarted, whose restart time a
        takeover overwrites). ``group_waiting``: taken-over attempts still queued in their task group (held
        until admitted, in their place). ``first``: a new run's first turn, taken when it was claimed (the actor
        starts from it)."""
        assert self.store is not None
        if first is not None:
            run = first.run
        else:
            run = new_run(spec, info.failure_strategy, info.command_param, info.task_depend_type, state,
                          attempts=attempts, rerun=rerun)  # fmt: skip
            if elapsed is None:
                started = info.start_time if info.run_times == 1 else None
                elapsed = (dt.datetime.now(dt.UTC) - started).total_seconds() if started is not None else 0.0
            run.elapsed = max(0.0, elapsed)
        run.instance_id = info.id
        actor = WorkflowActor(
            info,
            spec,
            run,
            self.store,
            self.wheel,
            self.address,
            self._dispatch,
            self._kill,
            self._actor_done,
            logic_interval=self.cfg.master.logic_check_interval,
            max_sub_workflow_depth=self.cfg.master.max_sub_workflow_depth,
            control=self._control_instance,
            group_waiting=group_waiting,
            cancel_dispatch=self._cancel_dispatch,
            context_ttl=self.cfg.master.run_context_ttl,
            validate=self.cfg.debug.validate_core,
            tally=self.states,
            first=first,
        )
        self.actors[info.id] = actor
        if actor.grouped:
            self.grouped[info.id] = actor
        actor.start()
        return actor

    def _dispatch(self, request: DispatchRequest) -> None:
        self.dispatcher.submit(request)

    def _cancel_dispatch(self, actor: WorkflowActor) -> None:
        self.dispatcher.cancel(actor)

    def _actor_done(self, actor: WorkflowActor, final: WorkflowState | None) -> None:
        if self.actors.get(actor.id) is actor:
            del self.actors[actor.id]
        if self.grouped.get(actor.id) is actor:
            del self.grouped[actor.id]
        self.gc.ended()
        if final is not None:
            self.finished_states[final.name] += 1
        if actor.crashed and self.failover is not None:
            self.failover.retake(actor.id, actor.info.epoch)
        if final is not None and actor.info.parent is not None:
            self._spawn(self._notify_parent(*actor.info.parent))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _notify_parent(self, parent_id: int, task_instance_id: int) -> None:
        """A sub-workflow ended: wake its parent's SUB_PROCESS task now (its wheel check is the fallback)."""
        msg = SubWorkflowDone(parent_id, task_instance_id)
        if parent_id in self.actors:
            await self.on_sub_workflow_done(msg)
            return
        assert self.store is not None
        try:
            row = await self.store.owner(parent_id)
            if row is not None and row["host"] and row["host"] != self.address:
                await self.rpc.call(row["host"], msg, timeout=5.0)
        except (RpcError, *DB_FAILURES) as exc:
            log.info("parent not told of its sub-workflow's end; its check will see it", error=str(exc))

    def _group_waiting(self) -> list[int]:
        return [tid for actor in self.grouped.values() for tid in actor.group_waiting]

    def _group_admitted(self, workflow_instance_id: int, task_instance_id: int) -> None:
        actor = self.actors.get(workflow_instance_id)
        if actor is not None and task_instance_id in actor.group_waiting:
            actor.post(GroupSlotGranted(task_instance_id))

    def _preempt(self, instance_ids: list[int]) -> None:
        """Runs a SERIAL_PRIORITY run is waiting for: stop them wherever they run."""
        for instance_id in instance_ids:
            log.info("stopping a run for a newer one (SERIAL_PRIORITY)", workflow_instance_id=instance_id)
            self._spawn(self._stop_preempted(instance_id))

    async def _stop_preempted(self, instance_id: int) -> None:
        try:
            await self._control_instance(instance_id, "stop", "a newer run has priority (SERIAL_PRIORITY)")
        except DB_FAILURES as exc:  # the serial repair sends it again
            log.warning("could not stop a run for a newer one", workflow_instance_id=instance_id, error=str(exc))

    async def _control_instance(self, instance_id: int, action: str, reason: str = "") -> None:
        """Stop or pause an instance wherever it runs (a parent's stop / pause reaching its child)."""
        why = reason or ("parent stopped" if action == "stop" else "parent paused")
        actor = self.actors.get(instance_id)
        if actor is not None:
            actor.post(StopRequested(why) if action == "stop" else PauseRequested(why))
            return
        assert self.store is not None
        row = await self.store.owner(instance_id)
        if row is None or not row["host"]:
            return
        try:
            await self.rpc.call(row["host"], WorkflowControl(instance_id, action, why), timeout=5.0)
        except RpcError as exc:
            log.warning("could not pass the request to the sub-workflow", action=action, child=instance_id,
                        error=str(exc))  # fmt: skip

    async def _stop_actors(self, timeout: float | None = None) -> None:
        actors = list(self.actors.values())
        self.actors.clear()
        self.grouped.clear()
        stops = [asyncio.ensure_future(a.stop()) for a in actors]
        if not stops:
            return
        _, pending = await asyncio.wait(stops, timeout=timeout)
        for stop in stops:
            if stop.done() and not stop.cancelled() and stop.exception() is not None:
                log.warning("workflow actor stop failed", error=str(stop.exception()))
        if pending:
            log.error("workflow actors did not stop when cancelled; abandoned", count=len(pending))

    # -- collaborators ----------------------------------------------------------------------------

    def _valid_until_ms(self) -> int:
        """Epoch ms until which our lease is certainly valid, less a margin for a message's flight and clock
        skew; 0 when it may already be gone (then we send no dispatch or kill: the next owner decides)."""
        if self.registry is None or not self.registry.session.alive:
            return 0
        left = self.registry.session.remaining() - LEASE_MARGIN
        return int((time.time() + left) * 1000) if left > 0 else 0

    def _workers(self, group: str) -> list[Any]:
        if not self.registry:
            return []
        if self.worker_groups is None:
            return self.registry.membership.workers(group)
        return self.worker_groups.workers(self.registry.membership.workers(), group)

    def _on_membership(self, change: NodeChange) -> None:
        if change.info.node.role == "worker" and change.kind is not ChangeKind.UPDATED:
            self.dispatcher.membership_changed()

    def _deliver_timer(self, owner: Any, event: Any) -> None:
        if isinstance(owner, WorkflowActor):
            owner.post(event)

    async def _kill(self, a: Attempt, epoch: int) -> None:
        if not a.host or not a.id:
            return
        valid_until = self._valid_until_ms()
        if not valid_until:
            return  # our lease may be gone: the instance is (being) failed over; its new owner decides
        msg = TaskKill(a.id, a.attempt, epoch=epoch, valid_until_ms=valid_until)
        try:
            await self.rpc.call(a.host, msg)
        except RpcError as exc:
            log.warning("kill request failed", worker=a.host, task_instance_id=a.id, error=str(exc))

    # -- RPC handlers -----------------------------------------------------------------------------

    async def _deliver_report(self, workflow_instance_id: int, event: Any) -> ReportReply:
        actor = self.actors.get(workflow_instance_id)
        if actor is None and self.arrivals.expecting(workflow_instance_id):
            await self.arrivals.wait([workflow_instance_id])  # being taken over: its actor comes
            actor = self.actors.get(workflow_instance_id)
        fut = actor.post(event, wait=True) if actor is not None else None
        if fut is not None and await fut:
            return ReportReply(ack=True)
        return await self._not_delivered(workflow_instance_id, actor)

    async def _not_delivered(self, workflow_instance_id: int, actor: WorkflowActor | None) -> ReportReply:
        """The answer to a report no actor of this master persisted: acknowledged when nothing will ever
        consume it, else refused (naming the instance's owner when another master owns it)."""
        assert self.store is not None
        return self._answer(workflow_instance_id, actor, await self.store.owner(workflow_instance_id))

    def _answer(self, workflow_instance_id: int, actor: WorkflowActor | None, row: Any) -> ReportReply:
        """:meth:`_not_delivered` given the instance's owner row (None: no such instance)."""
        if row is None:
            log.warning("report for an unknown workflow instance dropped", workflow_instance_id=workflow_instance_id)
            return ReportReply(ack=True)
        if WorkflowState(row["state"]).finished:
            return ReportReply(ack=True)  # the instance is over: nothing will consume this report
        owner = row["host"] or ""
        if owner == self.address and actor is None:
            log.error("report for an owned instance without an actor", workflow_instance_id=workflow_instance_id)
        if owner == self.address:
            return ReportReply(ack=False)
        return ReportReply(ack=False, owner=owner, epoch=int(row["epoch"] or 0))

    def _running_event(self, msg: TaskRunning) -> TaskRunningEvent:
        return TaskRunningEvent(
            msg.task_instance_id,
            msg.attempt,
            msg.host,
            msg.pid,
            storable(msg.log_path),
            storable(msg.execute_path),
            msg.start_time,
            app_id=storable(msg.app_id),
            app_link=storable(msg.app_link),
        )

    def _result_event(self, msg: TaskResult) -> TaskResultEvent:
        state = _RESULT_STATES.get(msg.state)
        if state is None:
            raise BadRequest(f"TaskResult.state: must be SUCCESS, FAILURE, KILL or LOST, got {msg.state!r}", 400)
        event = TaskResultEvent(
            msg.task_instance_id,
            msg.attempt,
            state,
            msg.exit_code,
            msg.start_time,
            msg.end_time,
            msg.host,
            storable(msg.log_path),
            tuple(storable_json(msg.var_pool)),
            storable(msg.message),
            pid=msg.pid,
            execute_path=storable(msg.execute_path),
            app_id=storable(msg.app_id),
            app_link=storable(msg.app_link),
            # the worker caps it; a report that did not is cut here
            log_tail=storable(msg.log_tail[-LOG_TAIL_BYTES:]),
        )
        self.metrics.inc("task_results")
        self.dispatcher.freed(msg.host)  # the attempt's slot on that worker is free again
        return event

    async def on_task_running(self, msg: TaskRunning) -> ReportReply:
        return await self._deliver_report(msg.workflow_instance_id, self._running_event(msg))

    async def on_task_result(self, msg: TaskResult) -> ReportReply:
        marks.mark("master report")
        return await self._deliver_report(msg.workflow_instance_id, self._result_event(msg))

    async def on_task_reports(self, msg: TaskReports) -> TaskReportsReply:
        """A batch of reports: each is handled (and acknowledged or not) on its own. All are posted to
        their actors at once, in order; only those no actor persisted take the slower path (together)."""
        if msg.results:
            marks.mark("master report")
        self.metrics.inc("report_batches")
        reports = [*msg.running, *msg.results]
        ids = {r.workflow_instance_id for r in reports}
        coming = {i for i in ids if i not in self.actors and self.arrivals.expecting(i)}
        if coming:  # instances being taken over: their actors come (the batch waits, keeping its order)
            await self.arrivals.wait(coming, len(reports))
        posted: list[tuple[int, WorkflowActor | None, asyncio.Future[bool] | None] | None] = []
        for report in reports:
            try:
                event = self._running_event(report) if isinstance(report, TaskRunning) else self._result_event(report)
            except BadRequest as exc:
                log.error("report refused", error=str(exc))
                posted.append(None)
                continue
            actor = self.actors.get(report.workflow_instance_id)
            posted.append((report.workflow_instance_id, actor, actor.post(event, wait=True) if actor else None))
        replies = [ReportReply(ack=False)] * len(posted)
        slow: list[tuple[int, int, WorkflowActor | None]] = []
        for i, item in enumerate(posted):
            if item is None:
                continue
            workflow_instance_id, actor, fut = item
            if fut is not None and await fut:
                replies[i] = ReportReply(ack=True)
            else:
                slow.append((i, workflow_instance_id, actor))
        if slow:  # one read for all of them: before a takeover, every result of a dead master's comes here
            assert self.store is not None
            rows = await self.store.owners({wid for _, wid, _ in slow})
            for i, wid, actor in slow:
                replies[i] = self._answer(wid, actor, rows.get(wid))
        return TaskReportsReply(replies)

    async def on_workflow_control(self, msg: WorkflowControl) -> ControlReply:
        if msg.action not in ("stop", "pause"):
            raise BadRequest(f"WorkflowControl.action: must be stop or pause, got {msg.action!r}", 400)
        actor = self.actors.get(msg.workflow_instance_id)
        if actor is None:
            return ControlReply(False, "this master is not driving that instance")
        reason = msg.reason[:200]
        event = StopRequested(reason or "api stop") if msg.action == "stop" else PauseRequested(reason or "api pause")
        before = actor.run.state
        fut = actor.post(event, wait=True)
        assert fut is not None
        if not await fut:
            return ControlReply(False, "this master stopped driving that instance")
        # accepted only when the request acted: the instance moved (from its state when the request came)
        # to stopping or pausing, or a second stop of a stopping one sent its kills again; one it found
        # finished, or already so otherwise, changed nothing here
        after = actor.run.state
        again = msg.action == "stop" and before is WorkflowState.READY_STOP and after is WorkflowState.READY_STOP
        if (before in _CONTROL_TO[msg.action] and not again) or after not in _CONTROL_TO[msg.action]:
            return ControlReply(False, f"the instance is {after.name}")
        return ControlReply(True)

    async def on_waiting_reasons(self, msg: WaitingReasons) -> WaitingReply:
        """Why the instance's tasks that are not running yet wait (the web UI's "why isn't it running?")."""
        actor = self.actors.get(msg.workflow_instance_id)
        if actor is None or actor.task is None:
            return WaitingReply(False)
        tasks = await waiting.reasons(actor, self.dispatcher, self.wheel, self.pool)
        return WaitingReply(True, actor.run.state.name, tasks)

    async def on_sub_workflow_done(self, msg: SubWorkflowDone) -> Done:
        actor = self.actors.get(msg.workflow_instance_id)
        a = actor.run.by_id.get(msg.task_instance_id) if actor is not None else None
        if actor is None or a is None:
            return Done(False)
        actor.post(LogicCheck(a.id, a.attempt, "sub-workflow ended"))
        return Done(True)

    async def on_resource_fetch(self, msg: ResourceFetch) -> web.StreamResponse:
        """A resource version's content, streamed to the worker that runs a task using it (workers have no
        database): only what a resource version names, checked by key and checksum."""
        if self.pool is None:
            raise BadRequest("the master is not connected to its database yet", 503)
        if not await catalog.is_resource_blob(self.pool, msg.blob_key, msg.sha256):
            raise BadRequest(f"no resource version is stored under {msg.blob_key!r} with that checksum", 404)
        if self._blobs is None:
            self._blobs = blob_store(self.cfg, self.pool)
        chunks = self._blobs.open(msg.blob_key)
        try:
            first = await anext(chunks, b"")
        except BlobNotFound as exc:
            raise BadRequest(str(exc), 404) from None
        except BlobError as exc:
            raise BadRequest(f"the file store failed: {exc}", 503) from None

        async def body() -> AsyncIterator[bytes]:
            yield first
            async for chunk in chunks:
                yield chunk

        return web.Response(body=body(), content_type="application/octet-stream")

    async def on_cache_expire(self, msg: CacheExpire) -> Done:
        if self.cache is not None:
            self.cache.expire(msg.workflow_definition_code)
        return Done(True)
