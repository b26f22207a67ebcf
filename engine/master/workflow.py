"""The pure core of a running workflow instance: events in, actions out.

``WorkflowRun`` owns the DAG state of one instance — the current attempt of every task, pending
retries, failed and blocked nodes — and maps each event (a worker report, a timer, a stop request)
to a list of actions (create attempts, persist a task change, kill, arm a timer, set the workflow
state). It does no I/O and awaits nothing; the actor (actor.py) performs the actions and feeds
async outcomes back as events. State changes go through the transition tables in states.py and are
recorded in a bounded story for debugging.

Semantics follow DolphinScheduler 3.1: a task runs when all its upstream tasks succeeded; a failed
task is retried ``retries`` times after ``retry_interval`` minutes as a new attempt; when retries are
exhausted, END kills the running tasks and submits nothing more, CONTINUE lets independent branches
finish while the failed task's descendants never run; the instance ends FAILURE if any task failed,
STOP after a stop, PAUSE after a pause with work left, else SUCCESS. A disabled task (DolphinScheduler's
flag = NO, "forbidden") gets no attempt: a task downstream of it waits for the disabled task's own
upstream tasks instead (WorkflowExecuteRunnable.setIndirectDepList), and it counts as done.
"""

from __future__ import annotations

import collections
import time
from typing import Any

from core import logs
from engine.master.workflow_messages import (
    ALERT_FAULT_TOLERANCE,
    ALERT_TASK_TIMEOUT,
    ALERT_WORKFLOW_TIMEOUT,
    RERUN_ON_RESUME,
    TASK_ALERTS,
    Action,
    ArmTimer,
    Attempt,
    CancelDispatch,
    CancelTimer,
    ControlChild,
    CreateAttempts,
    DispatchLost,
    Event,
    KillResend,
    KillTask,
    LogicCheck,
    PauseRequested,
    PersistTask,
    RaiseAlert,
    RetryDue,
    RunLogic,
    SetWorkflowState,
    StopRequested,
    TaskDispatched,
    TaskResultEvent,
    TaskRunningEvent,
    TaskTimedOut,
    WorkerLost,
    WorkflowTimedOut,
)
from engine.states import (
    TASK_ACTIVE,
    InvalidTransition,
    TaskState,
    WorkflowState,
    check_task,
    check_workflow,
)
from engine.tasks.registry import LOGIC_TYPES
from engine.workflows.definitions import TaskSpec, WorkflowSpec

log = logs.get(__name__)

END, CONTINUE = 0, 1
WARN, FAILED, WARNFAILED = 0, 1, 2
#: the workflow timeout's FAILED strategy (WorkflowSpec.timeout_strategy)
TIMEOUT_FAILED = 1
#: seconds between the kills a stopping run sends again to the attempts whose results have not arrived
KILL_RESEND = 5.0


class WorkflowRun:
    def __init__(
        self,
        instance_id: int,
        spec: WorkflowSpec,
        failure_strategy: int = CONTINUE,
        state: WorkflowState = WorkflowState.RUNNING_EXECUTION,
        attempts: list[Attempt] | None = None,
        story_size: int = 500,
        rerun: frozenset[TaskState] = frozenset(),
        scope: frozenset[int] | None = None,
        floors: dict[int, int] | None = None,
    ) -> None:
        self.instance_id = instance_id
        self.spec = spec
        self.failure_strategy = failure_strategy
        self.state = state
        #: task code -> its current (latest) attempt
        self.current: dict[int, Attempt] = {}
        #: task instance id -> attempt, for every attempt this run knows
        self.by_id: dict[int, Attempt] = {}
        #: tasks waiting for their retry timer
        self.retry_pending: set[int] = set()
        #: taken-back tasks whose current attempt failed with retries left: their retry is armed by start()
        self.retry_adopted: set[int] = set()
        #: tasks that failed for good (no retry left, or killed)
        self.failed: set[int] = set()
        #: order in which tasks succeeded (var pool precedence: earliest finisher wins)
        self.succeeded_order: list[int] = []
        #: bounded story of (time, what, id, old, new, cause)
        self.story: collections.deque[tuple[Any, ...]] = collections.deque(maxlen=story_size)
        self.finished = False
        #: seconds of the run's time limit already spent before this actor started (a takeover)
        self.elapsed = 0.0
        #: stopped by its timeout with the FAILED strategy: ends FAILURE, not STOP
        self.timed_out = False
        #: the tasks this run drives (START_CURRENT_TASK_PROCESS runs a part of the DAG); others are ignored
        self.scope = frozenset(spec.dag.nodes) if scope is None else scope
        #: highest attempt number each task already used in this instance (a rerun numbers on from it)
        self.floors = dict(floors or {})
        #: taken-back tasks whose attempt runs again (a resume's KILL tasks, a recovery's failed ones)
        self.to_rerun: set[int] = set()
        #: tasks on a branch a CONDITIONS or SWITCH task did not take (and what only they lead to)
        self.skipped: set[int] = set()
        #: tasks that failed for good into a CONDITIONS task: it decides, the workflow does not fail for them
        self.handled: set[int] = set()
        types = {code: t.task_type for code, t in spec.tasks.items()}
        self.logic = frozenset(code for code, kind in types.items() if kind in LOGIC_TYPES)
        self.conditions = frozenset(code for code, kind in types.items() if kind == "CONDITIONS")
        #: switched-off tasks: never attempted, looked through by what depends on them
        self.disabled = frozenset(code for code, t in spec.tasks.items() if t.disabled)
        #: task -> what it waits for, disabled tasks looked through (the graph never changes: computed once)
        self.waits_for: dict[int, tuple[int, ...]] = {}
        #: task -> the tasks waiting for it (the reverse of waits_for, in topological order), built at first use
        self._waiters: dict[int, tuple[int, ...]] | None = None
        for a in attempts or []:
            self._adopt(a, a.state in rerun)

    # -- queries ----------------------------------------------------------------------------------

    def active(self) -> list[Attempt]:
        return [a for a in self.current.values() if a.state in TASK_ACTIVE]

    def _upstream(self, code: int) -> tuple[int, ...]:
        """The tasks ``code`` waits for: its upstream tasks, a disabled one replaced by its own upstream."""
        found = self.waits_for.get(code)
        if found is None:
            out: list[int] = []
            for up in self.spec.dag.upstream[code]:
                for u in self._upstream(up) if up in self.disabled else (up,):
                    if u not in out:
                        out.append(u)
            found = self.waits_for[code] = tuple(out)
        return found

    def _dependents(self, code: int) -> tuple[int, ...]:
        """The tasks whose readiness waits for ``code`` (those whose _upstream names it), in topological order."""
        if self._waiters is None:
            waiters: dict[int, list[int]] = {}
            for c in self.spec.dag.topological():
                for up in self._upstream(c):
                    waiters.setdefault(up, []).append(c)
            self._waiters = {up: tuple(cs) for up, cs in waiters.items()}
        return self._waiters.get(code, ())

    def awaits_dispatch(self, task_instance_id: int, attempt: int) -> bool:
        """Whether this attempt is current and no worker has reported on it yet (SUBMITTED / DISPATCH)."""
        a = self._current_attempt(task_instance_id, attempt)
        return a is not None and a.state in (TaskState.SUBMITTED_SUCCESS, TaskState.DISPATCH)

    def wants_dispatch(self, task_instance_id: int, attempt: int) -> bool:
        """Whether this attempt, queued for a worker, should still be sent: it is current, not yet sent,
        and the run is not stopping (the dispatcher asks right before each send)."""
        a = self._current_attempt(task_instance_id, attempt)
        return (
            a is not None
            and a.state is TaskState.SUBMITTED_SUCCESS
            and not self.finished
            and self.state is not WorkflowState.READY_STOP
        )

    def _ready(self, code: int) -> bool:
        if code not in self.scope or code in self.retry_pending or code in self.failed or code in self.skipped:
            return False
        if code in self.disabled or (code in self.current and code not in self.to_rerun):
            return False
        ups = [up for up in self._upstream(code) if up in self.scope]
        if code in self.conditions:  # decides on its upstream results, whatever they are
            return all(self._done_ok(up) or up in self.skipped or up in self.failed or up in self.handled for up in ups)
        return all(self._done_ok(up) or up in self.skipped for up in ups)

    def _done_ok(self, code: int) -> bool:
        cur = self.current.get(code)
        return cur is not None and cur.state.succeeded and code not in self.to_rerun

    def _submitting(self) -> bool:
        if self.state is not WorkflowState.RUNNING_EXECUTION:
            return False
        return not (self.failure_strategy == END and self.failed)

    # -- transitions ------------------------------------------------------------------------------

    def _adopt(self, a: Attempt, rerun: bool = False) -> None:
        prev = self.current.get(a.code)
        if prev is None or a.attempt >= prev.attempt:
            self.current[a.code] = a
        if a.id:
            self.by_id[a.id] = a
        self.floors[a.code] = max(self.floors.get(a.code, 0), a.attempt)
        if rerun:
            self.to_rerun.add(a.code)
            return
        if a.state.succeeded and a.code not in self.succeeded_order:
            self.succeeded_order.append(a.code)
        task = self.spec.tasks.get(a.code)
        if a.state is TaskState.FAILURE and task is not None and a.retry_times < task.retries:
            self.retry_adopted.add(a.code)  # its retry was waiting (or cancelled by a pause): start() re-arms it
        elif a.state in (TaskState.FAILURE, TaskState.KILL):
            self.failed.add(a.code)  # taken back failed for good: it stays failed

    def _task_to(self, a: Attempt, new: TaskState, cause: str) -> None:
        check_task(a.id or (a.code, a.attempt), a.state, new, cause)
        self.story.append((time.time(), "task", a.id, a.state.name, new.name, cause))
        a.state = new

    def _workflow_to(self, new: WorkflowState, cause: str) -> None:
        check_workflow(self.instance_id, self.state, new, cause)
        self.story.append((time.time(), "workflow", self.instance_id, self.state.name, new.name, cause))
        self.state = new

    def bind(self, a: Attempt, task_instance_id: int) -> None:
        """The actor persisted ``a`` as task instance ``task_instance_id``."""
        a.id = task_instance_id
        self.by_id[task_instance_id] = a

    # -- entry points -----------------------------------------------------------------------------

    def start(self, now: float | None = None) -> list[Action]:
        """The first actions of a run, new or taken back (``now``: epoch seconds, the clock a taken-back
        run's timers are re-armed by)."""
        now = time.time() if now is None else now
        actions: list[Action] = [RunLogic(a) for a in self.active() if a.code in self.logic]
        actions += self._rearm(now)
        if self.state is WorkflowState.READY_STOP:
            actions += self._kill_active()  # taken over while stopping: the kills were the old owner's
        if self.spec.timeout > 0:
            # the limit is the whole run's: a run taken over mid-way has less of it left
            left = max(0.0, self.spec.timeout * 60.0 - self.elapsed)
            actions.append(ArmTimer(("workflow-timeout",), left, WorkflowTimedOut()))
        # taken over from a dead master: attempts lost with their worker run again as the next attempt
        lost = [a for a in self.current.values() if a.state is TaskState.NEED_FAULT_TOLERANCE]
        for a in lost:
            actions += self._after_failure(a)
        actions += self._submit_ready()
        actions += self._maybe_finish()
        return actions

    def _rearm(self, now: float) -> list[Action]:
        """Timers of a taken-back run, from what the database holds (the previous owner's were in its
        memory): each failed attempt's retry, due ``retry_interval`` after its end (at once if overdue; not
        while the run stops or pauses), and the WARN timeout of each running attempt, from its start."""
        actions: list[Action] = []
        for code in sorted(self.retry_adopted):
            a, task = self.current[code], self.spec.tasks[code]
            if self.state is WorkflowState.READY_STOP:
                self.failed.add(code)  # a stop cancels a waiting retry
            elif self.state is WorkflowState.RUNNING_EXECUTION:
                waited = max(0.0, now - a.end_time / 1000) if a.end_time else 0.0
                left = task.retry_interval * 60.0 - waited
                if left > 0:
                    self.retry_pending.add(code)
                    actions.append(ArmTimer(("retry", code), left, RetryDue(code)))
                else:
                    actions.append(CreateAttempts((self._next_attempt(code),)))
        self.retry_adopted.clear()
        for a in self.active():
            task = self.spec.tasks[a.code]
            warn = task.timeout_flag and task.timeout > 0 and task.timeout_strategy in (WARN, WARNFAILED)
            if warn and a.state is TaskState.RUNNING_EXECUTION:
                ran = max(0.0, now - a.start_time / 1000) if a.start_time else 0.0
                left = max(0.0, task.timeout * 60.0 - ran)
                actions.append(ArmTimer(("task-timeout", a.id), left, TaskTimedOut(a.id, a.attempt)))
        return actions

    def handle(self, event: Event) -> list[Action]:
        """Actions for one event. An event that would need an illegal transition raises
        :class:`InvalidTransition`, logged with the event and the run's story: the handler may already have
        changed the run in memory, so the run is not driven on (its actor ends, and the master recovers the
        instance from the database, as after any failure of the actor)."""
        if self.finished:
            return []
        handler = _HANDLERS.get(type(event))
        if handler is None:  # pragma: no cover - programming error
            raise TypeError(f"no handler for {type(event).__name__}")
        try:
            return handler(self, event)  # type: ignore[no-any-return]
        except InvalidTransition as exc:
            log.error("illegal transition: the run ends here and is recovered from the database", by=repr(event),
                      error=str(exc), story=list(self.story)[-10:])  # fmt: skip
            raise

    # -- handlers ---------------------------------------------------------------------------------

    def _current_attempt(self, task_instance_id: int, attempt: int) -> Attempt | None:
        a = self.by_id.get(task_instance_id)
        if a is None or a.attempt != attempt or self.current.get(a.code) is not a:
            return None  # stale: an older attempt, or one this owner does not know
        return a

    def _on_running(self, ev: TaskRunningEvent) -> list[Action]:
        a = self._current_attempt(ev.task_instance_id, ev.attempt)
        if a is not None and a.state is TaskState.RUNNING_EXECUTION and ev.app_id:
            # a report sent again once the task's application (a Spark application) is known
            return [PersistTask(a, a.state, (("app_id", ev.app_id), ("app_link", ev.app_link)))]
        if a is None or a.state.finished or a.state is TaskState.RUNNING_EXECUTION:
            return []  # stale, duplicate, or the result already arrived
        self._task_to(a, TaskState.RUNNING_EXECUTION, ev.cause_id or "running report")
        a.host, a.start_time = ev.host, ev.start_time
        actions: list[Action] = [
            PersistTask(
                a,
                a.state,
                (
                    ("host", ev.host),
                    ("pid", ev.pid),
                    ("log_path", ev.log_path),
                    ("execute_path", ev.execute_path),
                    ("start_time", ev.start_time),
                    *((("app_id", ev.app_id), ("app_link", ev.app_link)) if ev.app_id else ()),
                ),
            )
        ]
        task = self.spec.tasks[a.code]
        if task.timeout_flag and task.timeout > 0 and task.timeout_strategy in (WARN, WARNFAILED):
            actions.append(ArmTimer(("task-timeout", a.id), task.timeout * 60.0, TaskTimedOut(a.id, a.attempt)))
        if self.state is WorkflowState.READY_STOP:
            actions.append(KillTask(a))  # started after the stop (its kill had no host yet, or was lost)
        return actions

    def _on_dispatched(self, ev: TaskDispatched) -> list[Action]:
        a = self._current_attempt(ev.task_instance_id, ev.attempt)
        if a is None or a.state is not TaskState.SUBMITTED_SUCCESS:
            return []  # RUNNING (or the result) overtook the dispatch acknowledgement
        self._task_to(a, TaskState.DISPATCH, ev.cause_id or "dispatched")
        a.host, a.incarnation = ev.host, ev.incarnation
        actions: list[Action] = [PersistTask(a, a.state, (("host", ev.host),))]
        if self.state is WorkflowState.READY_STOP:
            actions.append(KillTask(a))  # it left the dispatch queue after the stop: now it has a host to kill on
        return actions

    def _on_result(self, ev: TaskResultEvent) -> list[Action]:
        a = self._current_attempt(ev.task_instance_id, ev.attempt)
        if a is None or a.state.finished:
            return []  # stale or duplicate: already persisted, nothing to do
        self._task_to(a, ev.state, ev.cause_id or f"result {ev.state.name}")
        a.end_time, a.var_pool = ev.end_time, _merge_pool(a.var_in, ev.var_pool)
        a.start_time = a.start_time or ev.start_time
        fields: list[tuple[str, Any]] = [
            ("end_time", ev.end_time),
            ("exit_code", ev.exit_code),
            ("var_pool", a.var_pool),
            ("start_time", a.start_time),
        ]
        if ev.host:
            a.host = ev.host
            fields.append(("host", ev.host))
        if ev.log_path:
            fields.append(("log_path", ev.log_path))
        if ev.pid:  # the RUNNING report may have been skipped (a quick task): the result carries these
            fields += [("pid", ev.pid), ("execute_path", ev.execute_path)]
        if ev.app_id:
            fields += [("app_id", ev.app_id), ("app_link", ev.app_link)]
        if ev.log_tail:
            a.log_tail = ev.log_tail
            fields.append(("log_tail", ev.log_tail))
        actions: list[Action] = [PersistTask(a, a.state, tuple(fields)), CancelTimer(("task-timeout", a.id))]
        if a.state.succeeded:
            self.succeeded_order.append(a.code)
            skipped = len(self.skipped)
            self._skip(ev.skip)
            actions += self._task_alert(a, "success")
            # nothing else was ready (every change that readies a task submits what it readied): only what
            # waits for this task can be ready now, unless tasks were skipped
            actions += self._submit_ready(a.code if len(self.skipped) == skipped else None)
        else:
            after = self._after_failure(a)
            if a.state is TaskState.FAILURE:
                final = a.code in self.failed or a.code in self.handled  # else a retry runs
                actions += self._task_alert(a, "failure" if final else "retry")
            actions += after
        actions += self._maybe_finish()
        return actions

    def _task_alert(self, a: Attempt, kind: str) -> list[Action]:
        """The task's own alert for this end of attempt ``a`` when its ``alert_on`` asks for it: recorded in
        the transaction that persists the end (the actor batches the actions), sent by the API servers."""
        task = self.spec.tasks[a.code]
        if kind not in task.alert_on:
            return []
        word = {"failure": "failed", "success": "succeeded", "retry": "failed, retrying", "timeout": "timed out"}
        title = f"task {task.name} {word[kind]}"
        content = (
            f"task {task.name} of workflow {self.spec.name} (instance {self.instance_id}) {word[kind]}:"
            f" attempt {a.attempt}, task instance {a.id}, worker {a.host or '-'}"
        )
        if kind == "timeout":
            content += f"; it ran longer than {task.timeout} minute(s)"
        if a.log_tail:
            content += f"\nlast log lines:\n{a.log_tail}"
        return [RaiseAlert(TASK_ALERTS[kind], title, content, task.alert_group_id or None, a.id)]

    def _after_failure(self, a: Attempt) -> list[Action]:
        task = self.spec.tasks[a.code]
        retryable = (a.state is TaskState.FAILURE and a.retry_times < task.retries) or (
            a.state is TaskState.NEED_FAULT_TOLERANCE
        )
        if retryable and self.state is WorkflowState.RUNNING_EXECUTION:
            delay = 0.0 if a.state is TaskState.NEED_FAULT_TOLERANCE else task.retry_interval * 60.0
            if delay <= 0:
                return [CreateAttempts((self._next_attempt(a.code),))]
            self.retry_pending.add(a.code)
            return [ArmTimer(("retry", a.code), delay, RetryDue(a.code))]
        if any(d in self.conditions and d in self.scope for d in self.spec.dag.downstream[a.code]):
            self.handled.add(a.code)  # a CONDITIONS task downstream decides what follows
            return self._submit_ready()
        self.failed.add(a.code)
        if self.failure_strategy == END:
            return [KillTask(x) for x in self.active()]
        return []

    def _on_retry_due(self, ev: RetryDue) -> list[Action]:
        if ev.code not in self.retry_pending:
            return []
        self.retry_pending.discard(ev.code)
        if self.state is not WorkflowState.RUNNING_EXECUTION:
            # stopped or paused while waiting: the retry does not happen
            if self.state is WorkflowState.READY_STOP:
                self.failed.add(ev.code)
            return self._maybe_finish()
        return [CreateAttempts((self._next_attempt(ev.code),))]

    def _on_task_timeout(self, ev: TaskTimedOut) -> list[Action]:
        a = self._current_attempt(ev.task_instance_id, ev.attempt)
        if a is None or a.state.finished:
            return []
        task = self.spec.tasks[a.code]
        own = self._task_alert(a, "timeout")
        if own and not task.alert_group_id:
            return own  # the task's alert goes to the instance's warning group: it replaces the plain one
        return [
            RaiseAlert(
                ALERT_TASK_TIMEOUT,
                f"task {task.name} timed out",
                f"task {task.name} (instance {a.id}, attempt {a.attempt}) of workflow instance "
                f"{self.instance_id} ran longer than {task.timeout} minute(s)",
            ),
            *own,
        ]

    def _on_workflow_timeout(self, _: WorkflowTimedOut) -> list[Action]:
        if self.state.finished:
            return []
        failing = self.spec.timeout_strategy == TIMEOUT_FAILED
        actions: list[Action] = [
            RaiseAlert(
                ALERT_WORKFLOW_TIMEOUT,
                f"workflow {self.spec.name} timed out",
                f"workflow instance {self.instance_id} of {self.spec.name} ran longer than "
                f"{self.spec.timeout} minute(s)" + ("; stopping it: it fails" if failing else ""),
            )
        ]
        if failing and self.state in (WorkflowState.RUNNING_EXECUTION, WorkflowState.READY_PAUSE):
            self.timed_out = True
            actions += self._on_stop(StopRequested("workflow timed out"))
        return actions

    def _on_stop(self, ev: StopRequested) -> list[Action]:
        if self.state is WorkflowState.READY_STOP:
            return self._kill_active()  # stopped again: the kills go out again
        if self.state not in (WorkflowState.RUNNING_EXECUTION, WorkflowState.READY_PAUSE):
            return []
        cause = ev.cause_id or "stop requested"
        self._workflow_to(WorkflowState.READY_STOP, cause)
        actions: list[Action] = [SetWorkflowState(self.state, cause=cause)]
        for code in sorted(self.retry_pending):
            actions.append(CancelTimer(("retry", code)))
            self.failed.add(code)
        self.retry_pending.clear()
        actions += self._kill_active()
        return actions + self._maybe_finish()

    def _kill_active(self) -> list[Action]:
        """Kills for every attempt still active, the attempts never sent dropped from the dispatch queue
        (each comes back as a KILL result: only the dispatcher knows whether it left already), and the timer
        that does both again while any is active."""
        active = self.active()
        if not active:
            return []
        actions: list[Action] = [KillTask(a) for a in active]
        queued = tuple(
            a for a in active if a.state is TaskState.SUBMITTED_SUCCESS and not a.host and a.code not in self.logic
        )
        if queued:
            actions.append(CancelDispatch(queued))
        return [*actions, ArmTimer(("kill-resend",), KILL_RESEND, KillResend())]

    def _on_kill_resend(self, ev: KillResend) -> list[Action]:
        if self.state is not WorkflowState.READY_STOP:
            return []
        return self._kill_active()

    def _on_worker_lost(self, ev: WorkerLost) -> list[Action]:
        actions: list[Action] = []
        for a in self.active():
            if a.host != ev.host or a.state is TaskState.SUBMITTED_SUCCESS or a.code in self.logic:
                continue  # not there (a SUBMITTED attempt is still in our dispatch queue; logic runs here)
            if ev.incarnation and a.incarnation and a.incarnation != ev.incarnation:
                continue  # another incarnation at that address took it (a restart within the TTL): it runs
            self._task_to(a, TaskState.NEED_FAULT_TOLERANCE, ev.cause_id or f"worker {ev.host} lost")
            actions += [PersistTask(a, a.state), CancelTimer(("task-timeout", a.id))]
            actions += self._after_failure(a)
        if actions:
            actions.append(
                RaiseAlert(
                    ALERT_FAULT_TOLERANCE,
                    f"worker {ev.host} lost",
                    f"worker {ev.host} lost its registry lease; its tasks of workflow instance {self.instance_id} "
                    "run again elsewhere",
                )
            )
        return actions + self._maybe_finish()

    def _on_dispatch_lost(self, ev: DispatchLost) -> list[Action]:
        a = self._current_attempt(ev.task_instance_id, ev.attempt)
        if a is None or a.state not in (TaskState.SUBMITTED_SUCCESS, TaskState.DISPATCH) or a.host != ev.host:
            return []  # a report came meanwhile (then it was taken after all), or it moved on
        self._task_to(a, TaskState.NEED_FAULT_TOLERANCE, ev.cause_id or f"dispatch to {ev.host} not delivered")
        actions: list[Action] = [PersistTask(a, a.state), CancelTimer(("task-timeout", a.id))]
        return actions + self._after_failure(a) + self._maybe_finish()

    def _on_logic_check(self, ev: LogicCheck) -> list[Action]:
        a = self._current_attempt(ev.task_instance_id, ev.attempt)
        if a is None or a.state.finished:
            return []
        return [RunLogic(a)]

    def _on_pause(self, ev: PauseRequested) -> list[Action]:
        if self.state is not WorkflowState.RUNNING_EXECUTION:
            return []
        cause = ev.cause_id or "pause requested"
        self._workflow_to(WorkflowState.READY_PAUSE, cause)
        actions: list[Action] = [SetWorkflowState(self.state, cause=cause)]
        actions += [ControlChild(a, "pause") for a in self.active() if a.code in self.logic]
        for code in sorted(self.retry_pending):
            actions.append(CancelTimer(("retry", code)))
        self.retry_pending.clear()
        return actions + self._maybe_finish()

    # -- helpers ----------------------------------------------------------------------------------

    def _skip(self, codes: tuple[int, ...]) -> None:
        """Skip a branch, and downstream whatever only skipped tasks lead to."""
        todo = [c for c in codes if c in self.scope and c not in self.current]
        while todo:
            code = todo.pop()
            if code in self.skipped:
                continue
            self.skipped.add(code)
            self.story.append((time.time(), "task", 0, "", f"skip {code}", "branch not taken"))
            for down in self.spec.dag.downstream[code]:
                ups = [u for u in self.spec.dag.upstream[down] if u in self.scope]
                if down in self.scope and all(u in self.skipped for u in ups):
                    todo.append(down)

    def _next_attempt(self, code: int) -> Attempt:
        prev = self.current.get(code)
        number = max(self.floors.get(code, 0), prev.attempt if prev else 0) + 1
        self.floors[code] = number
        if code in self.to_rerun and prev is not None:
            # run again from scratch (new upstream values); a killed / lost attempt keeps its retry count
            self.to_rerun.discard(code)
            keep = prev.state in RERUN_ON_RESUME or prev.state is TaskState.NEED_FAULT_TOLERANCE
            a = Attempt(code=code, attempt=number, retry_times=prev.retry_times if keep else 0)
            a.var_in = self._var_in(code)
        elif prev is None:
            a = Attempt(code=code, attempt=number, retry_times=0)
            a.var_in = self._var_in(code)
        else:
            retry = prev.retry_times + (0 if prev.state is TaskState.NEED_FAULT_TOLERANCE else 1)
            a = Attempt(code=code, attempt=number, retry_times=retry, var_in=prev.var_in)
        self.current[code] = a
        self.story.append((time.time(), "task", 0, "", f"attempt {a.attempt} of {code}", "submit"))
        return a

    def _var_in(self, code: int) -> list[dict[str, Any]]:
        """Upstream OUT values: on a name clash a non-empty value beats an empty one, and between
        two non-empty values the earliest-finished upstream wins (DolphinScheduler's rule)."""
        merged: dict[str, dict[str, Any]] = {}
        ups = set(self._upstream(code))
        for up in self.succeeded_order:
            if up not in ups:
                continue
            for p in self.current[up].var_pool:
                name = p.get("prop", "")
                item = {**p, "direct": "IN"}
                if name not in merged or (merged[name].get("value", "") == "" and item.get("value", "") != ""):
                    merged[name] = item
        return list(merged.values())

    def _submit_ready(self, after: int | None = None) -> list[Action]:
        """New attempts of the tasks ready now: of all tasks, or of those waiting for task ``after`` only."""
        if not self._submitting():
            return []
        codes = self.spec.dag.topological() if after is None else self._dependents(after)
        fresh = [self._next_attempt(code) for code in codes if self._ready(code)]
        return [CreateAttempts(tuple(fresh))] if fresh else []

    def _maybe_finish(self) -> list[Action]:
        if self.finished or self.retry_pending or any(a.state in TASK_ACTIVE for a in reversed(self.current.values())):
            return []
        if self._submitting() and any(self._ready(code) for code in self.scope):
            return []  # more to submit (the caller's _submit_ready does it)
        all_done = all(
            self._done_ok(code) or code in self.skipped or code in self.handled or code in self.disabled
            for code in self.scope
        )
        if self.state is WorkflowState.READY_STOP:
            stopped = WorkflowState.FAILURE if self.timed_out else WorkflowState.STOP
            final = WorkflowState.SUCCESS if all_done else stopped
        elif self.state is WorkflowState.READY_PAUSE:
            final = WorkflowState.SUCCESS if all_done else WorkflowState.PAUSE
        elif all_done:
            final = WorkflowState.SUCCESS
        else:
            final = WorkflowState.FAILURE
        self._workflow_to(final, "no task left to run")
        self.finished = True
        return [SetWorkflowState(final, finished=True, cause="no task left to run")]


TASK_ONLY, TASK_PRE, TASK_POST = 0, 1, 2


def scope_for(dag: Any, start: list[int], depend_type: int) -> frozenset[int]:
    """The tasks a run started from ``start`` drives: those tasks (TASK_ONLY), with everything upstream
    of them (TASK_PRE) or everything downstream of them (TASK_POST), as DolphinScheduler's sub-DAG."""
    out = set(start)
    if depend_type in (TASK_PRE, TASK_POST):
        edges = dag.upstream if depend_type == TASK_PRE else dag.downstream
        todo = list(start)
        while todo:
            for nxt in edges[todo.pop()]:
                if nxt not in out:
                    out.add(nxt)
                    todo.append(nxt)
    return frozenset(out)


def dispatch_timeout(task: TaskSpec) -> int:
    """Seconds after which the worker kills the task: set when the timeout is on and its strategy
    includes FAILED (FAILED or WARNFAILED), as DolphinScheduler's worker-side enforcement; else 0."""
    if task.timeout_flag and task.timeout > 0 and task.timeout_strategy in (FAILED, WARNFAILED):
        return task.timeout * 60
    return 0


def _merge_pool(inherited: list[dict[str, Any]], produced: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    """A finished attempt's var pool: what it inherited, overridden by the OUT values it produced
    (so values flow on transitively, as in DolphinScheduler)."""
    merged = {p.get("prop", ""): p for p in inherited}
    for p in produced:
        merged[p.get("prop", "")] = p
    return list(merged.values())


_HANDLERS: dict[type, Any] = {
    TaskRunningEvent: WorkflowRun._on_running,
    TaskResultEvent: WorkflowRun._on_result,
    TaskDispatched: WorkflowRun._on_dispatched,
    RetryDue: WorkflowRun._on_retry_due,
    TaskTimedOut: WorkflowRun._on_task_timeout,
    WorkflowTimedOut: WorkflowRun._on_workflow_timeout,
    StopRequested: WorkflowRun._on_stop,
    KillResend: WorkflowRun._on_kill_resend,
    PauseRequested: WorkflowRun._on_pause,
    WorkerLost: WorkflowRun._on_worker_lost,
    DispatchLost: WorkflowRun._on_dispatch_lost,
    LogicCheck: WorkflowRun._on_logic_check,
}
