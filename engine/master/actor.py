"""WorkflowActor: the async shell around one WorkflowRun.

One coroutine per running instance consumes the instance's event queue. Each turn it drains every
queued event, lets the pure WorkflowRun turn them into actions, writes all resulting changes in ONE
fenced transaction, acknowledges the reports that asked for it (only now are they persisted), and then
performs the side effects: dispatch new attempts, kill tasks, arm timers. It never blocks the loop; a
write refused by fencing stops the actor without touching anything else (invariant 2).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from core import logs, marks
from core.aio import cancel_until_done
from engine.clocks import now_ms
from engine.master.attempt_rows import NewAttempt, new_attempt
from engine.master.first_turn import FirstTurn, context_of
from engine.master.logic_runner import LogicRunner
from engine.master.state_tally import StateTally
from engine.master.store import FencedOut, MasterStore, RunContext, TaskUpdate, WriteBatch
from engine.master.wheel import StateWheel
from engine.master.workflow import WorkflowRun, dispatch_timeout
from engine.master.workflow_messages import (
    Action,
    ArmTimer,
    Attempt,
    CancelDispatch,
    CancelHeld,
    CancelTimer,
    ControlChild,
    CreateAttempts,
    DelayDue,
    GroupSlotGranted,
    KillTask,
    PersistTask,
    RaiseAlert,
    RunLogic,
    SendAttempt,
    SetWorkflowState,
    TaskResultEvent,
)
from engine.scheduling.backfill import BACKFILL_ID, LEGACY_DATES, next_param, position
from engine.states import CommandType, TaskState, WorkflowState
from engine.workflows.definitions import WorkflowSpec
from rpc.messages import TaskDispatch

log = logs.get(__name__)

#: seconds a run's context (project parameters, environments) is used before it is read again at a dispatch
#: (master.run_context_ttl)
CONTEXT_TTL = 30.0
#: seconds a deferred task write (an accepted dispatch's DISPATCH and host) waits for the instance's next write
#: before it is written on its own: a task that starts sooner has it written with its RUNNING or its result,
#: one statement instead of two
DEFER_SECONDS = 0.5

WARN_SUCCESS, WARN_FAILURE, WARN_ALL = 1, 2, 3
ALERT_FAILURE, ALERT_SUCCESS = 0, 1


@dataclass
class InstanceInfo:
    """What the actor needs from the workflow_instance row."""

    id: int
    epoch: int
    name: str
    priority: int
    schedule_time: dt.datetime | None
    global_params: list[dict[str, Any]]
    tenant: str
    dry_run: int
    worker_group: str
    failure_strategy: int
    command_type: int = 0
    #: alerts on the end of the run: 0 NONE, 1 SUCCESS, 2 FAILURE, 3 ALL
    warning_type: int = 0
    command_param: dict[str, Any] = field(default_factory=dict)
    task_depend_type: int = 2
    #: > 1 or recovered: the instance has attempts from earlier runs (numbering continues after them)
    run_times: int = 1
    recovery: int = 0
    #: the parent's (workflow instance, task instance) when this is a sub-workflow
    parent: tuple[int, int] | None = None
    start_time: dt.datetime | None = None

    @classmethod
    def from_row(cls, row: asyncpg.Record) -> InstanceInfo:
        param = dict(row["command_param"] or {})
        parent = None
        if param.get("parentWorkflowInstanceId"):
            parent = (int(param["parentWorkflowInstanceId"]), int(param.get("parentTaskInstanceId", 0)))
        return cls(
            id=int(row["id"]),
            epoch=int(row["epoch"]),
            name=row["name"],
            priority=int(row["workflow_instance_priority"]),
            schedule_time=row["schedule_time"],
            global_params=list(row["global_params"]),
            tenant=row["tenant_code"],
            dry_run=int(row["dry_run"]),
            worker_group=row["worker_group"],
            failure_strategy=int(row["failure_strategy"]),
            command_type=int(row["command_type"]),
            warning_type=int(row["warning_type"]),
            command_param=param,
            task_depend_type=int(row["task_depend_type"]),
            run_times=int(row["run_times"]),
            recovery=int(row["recovery"]),
            parent=parent,
            start_time=row["start_time"],
        )


@dataclass(eq=False)
class DispatchRequest:
    """A task attempt waiting for a worker, ordered as DolphinScheduler's dispatch queue:
    workflow priority, workflow instance id, task priority, task instance id."""

    sort_key: tuple[int, int, int, int]
    message: TaskDispatch
    worker_group: str
    actor: WorkflowActor = field(repr=False)
    #: when it became ready to dispatch (monotonic): the dispatch-wait histogram
    ready_at: float = field(default_factory=time.monotonic, repr=False)

    def __lt__(self, other: DispatchRequest) -> bool:
        # the dispatch heap's order, compared straight (order=True built two tuples per comparison: 6 % of a
        # busy master's time went to heap pushes and pops)
        return self.sort_key < other.sort_key


#: events that let a held attempt go (its task group's slot, the end of its delay): handled after the rest
#: of their batch, so a stop in the same batch drops the attempt instead of sending it
_RELEASES = (GroupSlotGranted, DelayDue)


@dataclass
class _Posted:
    event: Any
    done: asyncio.Future[bool] | None


class WorkflowActor:
    def __init__(
        self,
        info: InstanceInfo,
        spec: WorkflowSpec,
        run: WorkflowRun,
        store: MasterStore,
        wheel: StateWheel,
        me: str,
        dispatch: Callable[[DispatchRequest], None],
        kill: Callable[[Attempt, int], Any],
        on_finished: Callable[[WorkflowActor, WorkflowState | None], None],
        logic_interval: float = 5.0,
        max_sub_workflow_depth: int = 10,
        control: Callable[[int, str], Awaitable[None]] | None = None,
        group_waiting: frozenset[int] = frozenset(),
        cancel_dispatch: Callable[[WorkflowActor], None] | None = None,
        context_ttl: float = CONTEXT_TTL,
        validate: bool = False,
        tally: StateTally | None = None,
        first: FirstTurn | None = None,
    ) -> None:
        self.info = info
        self.spec = spec
        self.run = run
        self.store = store
        self.wheel = wheel
        self.me = me
        self._dispatch = dispatch
        #: drops this actor's queued attempts its run no longer wants sent (Dispatcher.cancel)
        self._cancel_dispatch = cancel_dispatch
        self._kill = kill
        self._on_finished = on_finished
        self.queue: asyncio.Queue[_Posted] = asyncio.Queue()
        self.task: asyncio.Task[None] | None = None
        self.fenced = False
        #: ended by an unexpected error (not fenced, not stopped): to be recovered
        self.crashed = False
        self._kills: set[asyncio.Task[Any]] = set()
        self.logic = LogicRunner(self, logic_interval, control, max_sub_workflow_depth)
        #: taken over still waiting in their group's queue: held from the start (they keep their place)
        self._restored_waiting = group_waiting
        #: the project's parameters and the tasks' environments, read once when the actor starts
        self.context = RunContext()
        self._context_read: asyncio.Future[RunContext] | None = None
        #: when the context was read (monotonic): one older than CONTEXT_TTL is read again before a dispatch
        self._context_at = 0.0
        #: the first context is the one read for the page the run was claimed in (begun before the claim)
        self._context_shared = False
        self._context_ttl = context_ttl
        #: the master's count of its runs by state, and the state this run is counted in there
        self._tally = tally
        self._counted: WorkflowState | None = None
        self._uncounted = False
        #: whether any task of the definition takes task group slots (else a write releases none)
        self.grouped = any(t.task_group_id for t in spec.tasks.values())
        #: check the core's invariants after every batch (debug.validate_core: tests, never production)
        self._validate = validate
        #: deferred task writes (PersistTask.deferred) waiting for the next write, and when the first came
        self._deferred: list[TaskUpdate] = []
        self._deferred_at = 0.0
        #: a new run's first turn, taken when it was claimed (engine.master.first_turn): performed at the start
        self._first = first

    @property
    def id(self) -> int:
        return self.info.id

    @property
    def group_waiting(self) -> dict[int, Attempt]:
        """The attempts waiting in their task group's queue (not dispatched), by task instance id."""
        return {a.id: a for a in self.run.held()}

    # -- inbox ------------------------------------------------------------------------------------

    def post(self, event: Any, wait: bool = False) -> asyncio.Future[bool] | None:
        """Queue an event. With ``wait``, the future resolves True once the event's effects are
        persisted (False if this actor was fenced out or has finished)."""
        fut: asyncio.Future[bool] | None = asyncio.get_running_loop().create_future() if wait else None
        if self.task is None or self.task.done():
            if fut is not None:
                fut.set_result(False)
            return fut
        self.queue.put_nowait(_Posted(event, fut))
        return fut

    def start(self) -> None:
        self._count_state()
        self.task = asyncio.create_task(self._main(), name=f"workflow-{self.info.id}")

    def _count_state(self, gone: bool = False) -> None:
        """Tell the master's tally the run's state (``gone``: that it is no longer here, for good); once per
        change."""
        if self._tally is None or self._uncounted:
            return
        self._uncounted = gone
        now = None if gone else self.run.state
        if now is not self._counted:
            self._tally.move(self._counted, now)
            self._counted = now

    async def stop(self) -> None:
        # no longer counted from now on: not when its task ends (one stuck in a call may be abandoned, and a
        # replacement for the same instance may start first), and not if cancelled before its first step
        self._count_state(gone=True)
        task, self.task = self.task, None
        if task is not None:
            await cancel_until_done(task)  # a write retrying on a library's error must not outlive it
        self._cancel_timers()
        for t in list(self._kills):
            t.cancel()
        self.logic.close()

    # -- main loop --------------------------------------------------------------------------------

    async def _main(self) -> None:
        final: WorkflowState | None = None
        with logs.bound(workflow_instance_id=self.info.id):
            try:
                await self._begin()
                if self._validate:
                    self.run.validate()
                while not self.run.finished:
                    first = await self._next_event()
                    if first is None:  # deferred writes waited long enough: written on their own
                        await self._perform([], [], flush=True)
                        continue
                    batch = [first]
                    while not self.queue.empty():
                        batch.append(self.queue.get_nowait())
                    await self._perform(self._handle(batch), batch)
                final = self.run.state
                log.info("workflow finished", state=final.name)
            except FencedOut as exc:
                self.fenced = True
                log.warning("fenced out: another master owns this instance now", error=str(exc))
                self._fail_waiters()
            except asyncio.CancelledError:
                self._fail_waiters()
                raise
            except Exception:
                # typically the database went away mid-write: the master takes the instance back from
                # the database state (what committed is the truth; unacknowledged reports are resent)
                log.exception("workflow actor failed; the instance will be recovered from the database")
                self.crashed = True
                self._fail_waiters()
            finally:
                read, self._context_read = self._context_read, None
                if read is not None and not read.cancel() and not read.cancelled():
                    read.exception()  # ended before its first dispatch, the read done: its error is not news
                self._cancel_timers()
                self.task = None
                self._count_state(gone=True)
                self._on_finished(self, final)

    async def _begin(self) -> None:
        """The run's first turn: taken now, or when it was claimed (its first attempts then perhaps written)."""
        if self.info.run_times > 1 or self.info.recovery:
            # attempts of earlier runs keep their numbers: new ones continue after them
            for code, top in (await self.store.attempt_floors(self.info.id)).items():
                self.run.raise_floor(code, top)
        # read once per run, not per dispatch (a change reaches the runs started after it), while the first
        # write goes to the database: the first dispatch waits for it (_send_all)
        first, self._first = self._first, None
        if first is not None and first.context is not None:  # read while the run was claimed
            self._context_read = asyncio.shield(first.context)  # shared: this actor's end cancels its own
            self._context_at, self._context_shared = first.context_at, True
        else:
            self._context_read = asyncio.ensure_future(self._read_context())
            self._context_at = time.monotonic()
        await self._restore_group_waiting()
        if first is None:
            await self._perform(self.run.start(time.time()), [])
        else:  # its first attempts may be written already, by the claim
            await self._perform(first.actions, [], written=first.ids)

    async def _next_event(self) -> _Posted | None:
        """The next posted event; None when deferred writes are due first (none came in DEFER_SECONDS)."""
        if not self._deferred:
            return await self.queue.get()
        try:
            async with asyncio.timeout(max(0.0, self._deferred_at + DEFER_SECONDS - time.monotonic())):
                return await self.queue.get()
        except TimeoutError:
            return None

    def _handle(self, batch: list[_Posted]) -> list[Action]:
        """The core's actions for a batch of events, all at one time of the clock; the task group admissions
        and the ends of delays go last (a stop in the same batch drops an attempt still held rather than
        sending it)."""
        actions: list[Action] = []
        now = time.time()
        try:
            for posted in batch:
                if not isinstance(posted.event, _RELEASES):
                    actions += self.run.handle(posted.event, now)
            for posted in batch:
                if isinstance(posted.event, _RELEASES):
                    actions += self.run.handle(posted.event, now)
            if self._validate:
                self.run.validate()
        except Exception:  # an illegal transition: nothing of the batch is persisted or acknowledged
            self._refuse(batch)
            raise
        return actions

    async def _restore_group_waiting(self) -> None:
        """Hold the taken-over attempts still queued in their task group; send those admitted meanwhile
        (the listener delivers later admissions)."""
        self.run.hold(self._restored_waiting)
        held = sorted(a.id for a in self.run.held())
        if held:
            log.info("waiting for task group slots (taken over)", task_instance_ids=held)
            now, actions = time.time(), []
            for _, tid in await self.store.group_holding(held):
                actions += self.run.handle(GroupSlotGranted(tid, "admitted meanwhile"), now)
            await self._perform(actions, [])

    @staticmethod
    def _refuse(batch: list[_Posted]) -> None:
        """The batch's events are not persisted: their waiters are answered False (the reports are resent)."""
        for posted in batch:
            if posted.done is not None and not posted.done.done():
                posted.done.set_result(False)

    def _fail_waiters(self) -> None:
        while not self.queue.empty():
            posted = self.queue.get_nowait()
            if posted.done is not None and not posted.done.done():
                posted.done.set_result(False)

    def _collect(self, actions: list[Action], flush: bool = False) -> tuple[WriteBatch, list[Attempt], list[Action]]:
        """The actions' database changes as one batch, the attempts it creates, and the side effects. Deferred
        task writes join the batch when it writes anything else (or ``flush``), first (later states win)."""
        write = WriteBatch(grouped=self.grouped)
        created: list[Attempt] = []
        after: list[Action] = []
        for action in actions:
            if isinstance(action, CreateAttempts):
                for a in action.attempts:
                    created.append(a)
                    write.new_attempts.append(self._new_attempt(a))
                    t = self.spec.tasks[a.code]
                    if t.task_group_id and a.code not in self.run.logic:
                        index = len(write.new_attempts) - 1
                        write.group_requests.append((index, t.task_group_id, t.task_group_priority, t.task_group_slots))
            elif isinstance(action, PersistTask):
                update = TaskUpdate(action.attempt.id, int(action.state), dict(action.fields))
                if not action.deferred:
                    write.updates.append(update)
                    continue
                if not self._deferred:
                    self._deferred_at = time.monotonic()
                self._deferred.append(update)
            elif isinstance(action, SetWorkflowState):
                write.workflow_state = int(action.state)
                write.workflow_finished = write.workflow_finished or action.finished
                if action.cause:
                    now = dt.datetime.now(dt.UTC).isoformat()
                    write.workflow_history.append({"time": now, "state": action.state.name, "desc": action.cause})
            elif isinstance(action, RaiseAlert):
                write.alerts.append(action)
            else:
                after.append(action)
        if self._deferred and (flush or not write.empty()):
            write.updates[:0], self._deferred = self._deferred, []
        return write, created, after

    async def _perform(
        self, actions: list[Action], batch: list[_Posted], flush: bool = False, written: list[int] | None = None
    ) -> None:
        """``written``: the ids of the attempts these actions create, written by the claim (a new run's first
        turn, whose only write they are)."""
        write, created, after = self._collect(actions, flush)
        if write.workflow_finished:
            write.next_backfill = self._next_backfill(write.workflow_state)
            write.alerts += self._end_alerts(write.workflow_state)
        if written is not None:
            self._bind_written(write, created, written)
        elif not write.empty():
            marks.mark("master write")
            try:
                ids = await self.store.write_retrying(self.info.id, self.info.epoch, write)
            except BaseException:  # fenced out, failed, or cancelled (the master stops): not acknowledged
                self._refuse(batch)
                raise
            marks.mark("master written")
            grouped = {write.new_attempts[i].task_code for i, *_ in write.group_requests}
            for a, ti in zip(created, ids, strict=True):
                held = a.code in grouped and ti not in write.admitted  # its group is full: GroupSlotGranted sends it
                self.run.bind(a, ti, held)
                if held:
                    log.info("waiting for a task group slot", task_instance_id=ti,
                             task_group=self.spec.tasks[a.code].task_group)  # fmt: skip
        for posted in batch:
            if posted.done is not None and not posted.done.done():
                posted.done.set_result(True)
        for a in created:
            if due := self.run.delay_due(a.code):
                log.info("waiting for its delay", task_instance_id=a.id, due_ms=int(due * 1000))
        self._count_state()
        await self._send_all([a for a in created if not self.run.holds(a)])
        for action in after:
            if isinstance(action, ArmTimer):
                self.wheel.arm((self.info.id, *action.key), action.delay, self, action.event)
            elif isinstance(action, CancelTimer):
                self.wheel.cancel((self.info.id, *action.key))
            elif isinstance(action, CancelDispatch):
                if self._cancel_dispatch is not None:
                    self._cancel_dispatch(self)
            elif isinstance(action, SendAttempt):
                await self._send(action.attempt)
            elif isinstance(action, CancelHeld) or (
                isinstance(action, KillTask) and self.run.release_held(action.attempt)
            ):
                a = action.attempt  # never dispatched: nothing to kill
                message = action.message if isinstance(action, CancelHeld) else CancelHeld(a).message
                self.post(TaskResultEvent(a.id, a.attempt, TaskState.KILL, -1, 0, now_ms(), message=message))
            elif isinstance(action, KillTask) and action.attempt.code in self.run.logic:
                self.logic.spawn(self.logic.stop(action.attempt, "stop"))
            elif isinstance(action, KillTask):
                task = asyncio.create_task(self._kill(action.attempt, self.info.epoch))
                self._kills.add(task)
                task.add_done_callback(self._kills.discard)
            elif isinstance(action, RunLogic):
                self.logic.spawn(self.logic.run(action.attempt))
            elif isinstance(action, ControlChild):
                self.logic.spawn(self.logic.stop(action.attempt, action.action))

    def _bind_written(self, write: WriteBatch, created: list[Attempt], written: list[int]) -> None:
        """The turn's attempts were written by the claim (first_turn.first_attempts: they are all it writes)."""
        if len(written) != len(created) or write.updates or write.group_requests or write.workflow_state is not None:
            raise RuntimeError(f"the claim wrote {len(written)} attempts of a first turn that writes more")
        for a, ti in zip(created, written, strict=True):
            self.run.bind(a, ti)

    def _end_alerts(self, final: int | None) -> list[RaiseAlert]:
        """The instance's end as an alert when its warning type asks for it (DolphinScheduler's rule)."""
        wanted = self.info.warning_type
        if final == int(WorkflowState.SUCCESS) and wanted in (WARN_SUCCESS, WARN_ALL):
            kind, word = ALERT_SUCCESS, "succeeded"
        elif final == int(WorkflowState.FAILURE) and wanted in (WARN_FAILURE, WARN_ALL):
            kind, word = ALERT_FAILURE, "failed"
        else:
            return []
        failed = sorted(
            ((self.spec.tasks[a.code].name, a) for a in self.run.attempts() if a.state is TaskState.FAILURE),
            key=lambda item: item[0],
        )
        detail = f"; failed tasks: {', '.join(name for name, _ in failed)}" if failed else ""
        content = f"workflow instance {self.info.id} ({self.info.name}) of {self.spec.name} {word}{detail}"
        for name, a in failed:
            if a.log_tail:  # each failed task's last log lines, as its worker reported them
                where = f"attempt {a.attempt}, worker {a.host or '-'}"
                content += f"\n\ntask {name} ({where}), last log lines:\n{a.log_tail}"
        return [RaiseAlert(kind, f"workflow {self.spec.name} {word}", content)]

    def _next_backfill(self, final: int | None) -> tuple[dict[str, Any], list[dt.datetime]] | None:
        """A serial backfill runs its dates one after another: on SUCCESS (or any end with
        complementOnFailure = CONTINUE) the chain's next date becomes a new COMPLEMENT_DATA command.
        Returns its command_param and, for an instance of the older format, the dates to keep in a new
        backfill row."""
        param = self.info.command_param
        if self.info.command_type == CommandType.REPEAT_RUNNING or not (BACKFILL_ID in param or LEGACY_DATES in param):
            return None
        try:
            at = position(param)
        except ValueError as exc:  # the claim checked it; nothing to go on with
            log.warning("backfill chain cannot go on", error=str(exc))
            return None
        if not at.remaining:
            return None
        if final != int(WorkflowState.SUCCESS) and param.get("complementOnFailure") != "CONTINUE":
            log.info("backfill stops at a failed date", remaining=at.remaining)
            return None
        return next_param(param, at), [dt.datetime.fromisoformat(d) for d in at.legacy_dates[1:]]

    def _cancel_timers(self) -> None:
        """Cancel every timer the run armed (the core keeps their keys)."""
        for key in self.run.timers:
            self.wheel.cancel((self.info.id, *key))

    # -- attempts ---------------------------------------------------------------------------------

    def _new_attempt(self, a: Attempt) -> NewAttempt:
        return new_attempt(self.spec, a, self.info.dry_run)

    async def _read_context(self) -> RunContext:
        """The project's parameters and the environments this run's tasks name, read now."""
        return await self.store.run_context(*context_of(self.spec))

    async def _send(self, a: Attempt) -> None:
        await self._send_all([a])

    async def _send_all(self, attempts: list[Attempt]) -> None:
        """Dispatch the attempts of one turn: every message is built first (its reads of the database are
        awaits), then all are queued at once, so the dispatcher sees them together and sends those for the
        same worker in one batch."""
        if self._context_read is not None:
            self.context = await self._context_read
            self._context_read = None
            if self._context_shared and time.monotonic() - self._context_at > self._context_ttl:  # a slow claim
                self._context_at = time.monotonic()
                self.context = await self._read_context()
        elif time.monotonic() - self._context_at >= self._context_ttl:
            # a long run sees a changed parameter or environment, and a re-sealed secret, within the TTL:
            # `porpoise secrets prune-keys` must not leave it holding a value sealed with a dropped key
            self._context_at = time.monotonic()
            self.context = await self._read_context()
        requests = [r for a in attempts if (r := await self._request(a)) is not None]
        for request in requests:
            self._dispatch(request)

    async def _request(self, a: Attempt) -> DispatchRequest | None:
        if a.code in self.run.logic:
            self.logic.spawn(self.logic.run(a))  # run by this master, not a worker
            return None
        t = self.spec.tasks[a.code]
        timeout = dispatch_timeout(t)
        datasources: dict[str, dict[str, Any]] = {}
        if t.task_type in ("SQL", "PROCEDURE") and t.params.get("datasource"):
            datasources = await self.store.datasources([t.params["datasource"]])
        senders: list[dict[str, Any]] = []
        if t.task_type == "SQL" and t.params.get("sendEmail") and isinstance(t.params.get("groupId"), int):
            senders = await self.store.email_senders(t.params["groupId"])  # the result e-mail's (sql_email.py)
        message = TaskDispatch(
            task_instance_id=a.id,
            attempt=a.attempt,
            workflow_instance_id=self.info.id,
            workflow_definition_code=self.spec.code,
            task_code=t.code,
            task_name=t.name,
            task_type=t.task_type,
            task_params=dict(t.params),
            master=self.me,
            global_params=self.info.global_params,
            var_pool=a.var_in,
            schedule_time=self.info.schedule_time.isoformat() if self.info.schedule_time else None,
            environment_config=self.context.environment_config(t.environment_code),
            project_params=self.context.project_params,
            tenant="" if self.info.tenant in ("", "default") else self.info.tenant,
            timeout_seconds=timeout,
            dry_run=bool(self.info.dry_run),
            datasources=datasources,
            email_senders=senders,
            resources=await self.store.resources(self.spec.project_code, t.task_type, t.params),
            epoch=self.info.epoch,
        )
        return DispatchRequest((self.info.priority, self.info.id, t.priority, a.id), message, t.worker_group, self)
