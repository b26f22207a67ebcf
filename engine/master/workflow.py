"""The pure core of a running workflow instance: events in, actions out.

``WorkflowRun`` owns the DAG state of one instance — one ``TaskNode`` per task, holding its status and
current attempt — and maps each event (a worker report, a timer, a stop request) at a time given to it
(it reads no clock) to a list of actions (create attempts, persist a task change, kill, arm a timer, set
the workflow state). It does no I/O and awaits nothing; the actor (actor.py) performs the actions and
feeds async outcomes back as events. Attempt states change through the transition tables in states.py,
node statuses through ``NODE_TRANSITIONS``; both are recorded in a bounded story for debugging, and
``validate()`` checks the invariants that tie them together.

Semantics follow DolphinScheduler 3.1: a task runs when all its upstream tasks succeeded; a failed
task is retried ``retries`` times after ``retry_interval`` minutes as a new attempt; when retries are
exhausted, END kills the running tasks and submits nothing more, CONTINUE lets independent branches
finish while the failed task's descendants never run; the instance ends FAILURE if any task failed,
STOP after a stop, PAUSE after a pause with work left, else SUCCESS. A disabled task (DolphinScheduler's
flag = NO, "forbidden") gets no attempt: a task downstream of it waits for the disabled task's own
upstream tasks instead (WorkflowExecuteRunnable.setIndirectDepList), and it counts as done. A task with
a ``delay_time`` of N minutes is created when it becomes runnable and sent N minutes after (a timer of the
core, DelayDue); a retry does not wait again, nor does a logic task; an attempt lost with its master runs
again after the rest of the delay only, counted from the lost attempt's creation.
"""

from __future__ import annotations

import collections
import enum
from dataclasses import dataclass
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
    CancelHeld,
    CancelTimer,
    ControlChild,
    CreateAttempts,
    DelayDue,
    DispatchLost,
    Event,
    GroupSlotGranted,
    KillResend,
    KillTask,
    LogicCheck,
    LogicWaiting,
    PauseRequested,
    PersistTask,
    RaiseAlert,
    RetryDue,
    RunLogic,
    SendAttempt,
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


class Status(enum.IntEnum):
    """Where one task stands in its run (its current attempt's own state is ``TaskNode.attempt.state``; an
    IntEnum for speed: its hash and the counts' list index are C-level)."""

    #: no attempt in this run yet: waiting for its upstream tasks (or outside the run's scope)
    NEW = 0
    #: taken back with an attempt that runs again from scratch (a resume's KILL tasks, a recovery's failed ones)
    RERUN = 1
    #: taken back with an attempt lost with its worker (NEED_FAULT_TOLERANCE): start() runs it again
    LOST = 2
    #: taken back failed with retries left: start() re-arms its retry (or runs it at once when overdue)
    ADOPTED_RETRY = 3
    #: its current attempt is queued, dispatched or running
    ACTIVE = 4
    #: its attempt failed with retries left: waiting for the retry timer
    RETRY_WAIT = 5
    SUCCEEDED = 6
    #: failed for good (no retry left, killed, or its retry cancelled by a stop)
    FAILED = 7
    #: failed for good into a CONDITIONS task: that task decides, the workflow does not fail for it
    HANDLED = 8
    #: its attempt ended and nothing follows in this run (a retry cancelled by a pause, taken back paused)
    ENDED = 9
    #: on a branch a CONDITIONS or SWITCH task did not take (or only such tasks lead to it)
    SKIPPED = 10


class CoreInvariantError(AssertionError):
    """The run's state broke one of its invariants (``WorkflowRun.validate``): a defect of the core."""


_N = Status
#: the statuses a node may move to from each status (adoption sets the first status of a taken-back task)
NODE_TRANSITIONS: dict[Status, frozenset[Status]] = {
    _N.NEW: frozenset({_N.ACTIVE, _N.SKIPPED}),
    _N.RERUN: frozenset({_N.ACTIVE, _N.FAILED, _N.HANDLED, _N.SKIPPED}),
    _N.LOST: frozenset({_N.ACTIVE, _N.FAILED, _N.HANDLED}),
    _N.ADOPTED_RETRY: frozenset({_N.ACTIVE, _N.RETRY_WAIT, _N.FAILED, _N.ENDED}),
    _N.ACTIVE: frozenset({_N.ACTIVE, _N.RETRY_WAIT, _N.SUCCEEDED, _N.FAILED, _N.HANDLED}),
    _N.RETRY_WAIT: frozenset({_N.ACTIVE, _N.FAILED, _N.ENDED}),
    _N.SUCCEEDED: frozenset(),
    _N.FAILED: frozenset(),
    _N.HANDLED: frozenset(),
    _N.ENDED: frozenset(),
    _N.SKIPPED: frozenset(),
}
#: statuses only a taken-back run has before its start()
_ADOPTED = frozenset({_N.LOST, _N.ADOPTED_RETRY})
#: taken back with an attempt lost with its worker: start() runs it again (or fails it, when stopping)
_ADOPTED_LOST = frozenset({_N.LOST, _N.RERUN})
_UPSTREAM_OK = frozenset({_N.SUCCEEDED, _N.SKIPPED})
#: what a CONDITIONS task waits for: every upstream task decided, whatever its result
_UPSTREAM_DECIDED = frozenset({_N.SUCCEEDED, _N.SKIPPED, _N.FAILED, _N.HANDLED})
#: a task in one of these counts as done for the run's SUCCESS
_DONE = frozenset({_N.SUCCEEDED, _N.SKIPPED, _N.HANDLED})
_SUBMITTABLE = frozenset({_N.NEW, _N.RERUN})


@dataclass(slots=True, eq=False)
class TaskNode:
    """One task of the run: its status, its current attempt, and its place in the graph."""

    code: int
    status: Status = Status.NEW
    #: its current (latest) attempt (None: none in this run yet)
    attempt: Attempt | None = None
    #: highest attempt number the task used in this instance (a rerun numbers on from it)
    floor: int = 0
    #: its position in the order the run's tasks succeeded (var pool precedence: earliest finisher wins); 0: not
    succeeded_seq: int = 0
    #: the tasks it waits for, disabled tasks looked through (the graph never changes: computed at first use)
    waits_for: tuple[int, ...] | None = None
    #: the tasks waiting for it (the reverse of waits_for, in topological order), built at first use
    waiters: tuple[int, ...] = ()
    #: its attempt waits in its task group's queue: persisted, not sent until GroupSlotGranted
    held: bool = False
    #: epoch seconds its attempt's delay_time is over: not sent until DelayDue (timer ("delay", code)); 0: none
    delay_due: float = 0.0


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
        #: one node per task: every fact the run holds about a task
        self.nodes: dict[int, TaskNode] = {code: TaskNode(code) for code in spec.tasks}
        #: how many nodes are in each status (kept with every change of status)
        self.counts: list[int] = [0] * len(Status)
        self.counts[Status.NEW] = len(self.nodes)
        #: the nodes whose status is ACTIVE, in the order they became so (an index kept by _set)
        self._active: dict[int, TaskNode] = {}
        #: task instance id -> attempt, for every attempt this run knows (an index of the nodes' attempts)
        self.by_id: dict[int, Attempt] = {}
        #: bounded story of (time, what, id, old, new, cause)
        self.story: collections.deque[tuple[Any, ...]] = collections.deque(maxlen=story_size)
        self.finished = False
        self.started = False
        #: keys of the timers armed (ArmTimer) and not cancelled: the actor cancels them when it ends
        self.timers: set[tuple[Any, ...]] = set()
        #: epoch seconds of the event being handled: the clock is an input (start() and handle() take it)
        self.now = 0.0
        #: seconds of the run's time limit already spent before this actor started (a takeover)
        self.elapsed = 0.0
        #: stopped by its timeout with the FAILED strategy: ends FAILURE, not STOP
        self.timed_out = False
        #: the tasks this run drives (START_CURRENT_TASK_PROCESS runs a part of the DAG); others are ignored
        self.scope = frozenset(spec.dag.nodes) if scope is None else scope
        self._succeeded = 0
        self._waiters_built = False
        types = {code: t.task_type for code, t in spec.tasks.items()}
        self.logic = frozenset(code for code, kind in types.items() if kind in LOGIC_TYPES)
        self.conditions = frozenset(code for code, kind in types.items() if kind == "CONDITIONS")
        #: switched-off tasks: never attempted, looked through by what depends on them
        self.disabled = frozenset(code for code, t in spec.tasks.items() if t.disabled)
        #: the tasks whose first attempt waits for their delay_time (logic tasks never wait)
        self.delayed = frozenset(code for code, t in spec.tasks.items() if t.delay_time > 0 and code not in self.logic)
        for code, top in (floors or {}).items():
            self.raise_floor(code, top)
        for a in attempts or []:
            self._adopt(a, a.state in rerun)

    # -- queries ----------------------------------------------------------------------------------

    def active(self) -> list[Attempt]:
        return [n.attempt for n in self._active.values()]  # type: ignore[misc]

    def attempts(self) -> list[Attempt]:
        """The current attempt of every task that has one."""
        return [n.attempt for n in self.nodes.values() if n.attempt is not None]

    def current_of(self, code: int) -> Attempt | None:
        """Task ``code``'s current attempt (None: none in this run)."""
        node = self.nodes.get(code)
        return None if node is None else node.attempt

    def status(self, code: int) -> Status:
        node = self.nodes.get(code)
        return Status.NEW if node is None else node.status

    def is_current(self, a: Attempt) -> bool:
        """Whether ``a`` is its task's current attempt."""
        node = self.nodes.get(a.code)
        return node is not None and node.attempt is a

    def raise_floor(self, code: int, top: int) -> None:
        """Attempt numbers up to ``top`` are used by earlier runs of the instance: new ones continue after."""
        node = self._node(code)
        node.floor = max(node.floor, top)

    def _node(self, code: int) -> TaskNode:
        node = self.nodes.get(code)
        if node is None:  # a task the definition no longer has, taken back with its attempt
            node = self.nodes[code] = TaskNode(code)
            self.counts[Status.NEW] += 1
        return node

    def _upstream(self, code: int) -> tuple[int, ...]:
        """The tasks ``code`` waits for: its upstream tasks, a disabled one replaced by its own upstream."""
        node = self.nodes[code]
        found = node.waits_for
        if found is None:
            out: list[int] = []
            for up in self.spec.dag.upstream[code]:
                for u in self._upstream(up) if up in self.disabled else (up,):
                    if u not in out:
                        out.append(u)
            found = node.waits_for = tuple(out)
        return found

    def _dependents(self, code: int) -> tuple[int, ...]:
        """The tasks whose readiness waits for ``code`` (those whose _upstream names it), in topological order."""
        if not self._waiters_built:
            waiters: dict[int, list[int]] = {}
            for c in self.spec.dag.topological():
                for up in self._upstream(c):
                    waiters.setdefault(up, []).append(c)
            for up, cs in waiters.items():
                self.nodes[up].waiters = tuple(cs)
            self._waiters_built = True
        node = self.nodes.get(code)
        return () if node is None else node.waiters

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
        if code not in self.scope or code in self.disabled or self.nodes[code].status not in _SUBMITTABLE:
            return False
        nodes, scope = self.nodes, self.scope
        wanted = _UPSTREAM_DECIDED if code in self.conditions else _UPSTREAM_OK
        return all(nodes[up].status in wanted for up in self._upstream(code) if up in scope)

    def _submitting(self) -> bool:
        if self.state is not WorkflowState.RUNNING_EXECUTION:
            return False
        return not (self.failure_strategy == END and self.counts[Status.FAILED])

    # -- invariants -------------------------------------------------------------------------------

    def validate(self) -> None:
        """Check the run's invariants; raises :class:`CoreInvariantError` naming the first one broken.
        The simulation tests call it after every event, the actor after every batch in debug mode
        (``PORPOISE_CORE_VALIDATE``): not on the production hot path."""
        counts = [0] * len(Status)
        for code, node in self.nodes.items():
            counts[node.status] += 1
            self._validate_node(code, node)
        if counts != self.counts:
            raise CoreInvariantError(f"status counts {self.counts} do not match the nodes {counts}")
        active = {c: n for c, n in self.nodes.items() if n.status is Status.ACTIVE}
        if active.keys() != self._active.keys() or any(self._active[c] is not n for c, n in active.items()):
            raise CoreInvariantError(f"the index of active tasks {list(self._active)} does not match the nodes")
        seqs = [n.succeeded_seq for n in self.nodes.values() if n.succeeded_seq]
        if len(seqs) != len(set(seqs)) or any(s > self._succeeded for s in seqs):
            raise CoreInvariantError(f"success order {sorted(seqs)} is not a sequence up to {self._succeeded}")
        for tid, a in self.by_id.items():
            if a.id != tid:
                raise CoreInvariantError(f"task instance {tid} indexes attempt {a.id}")
            node = self.nodes.get(a.code)
            if node is None or a.attempt > node.floor:
                raise CoreInvariantError(f"attempt {a.attempt} of task {a.code} is above its node's floor")
            if a.state in TASK_ACTIVE and node.attempt is not a:
                raise CoreInvariantError(f"task {a.code}: attempt {a.attempt} is live but not current")
        if self.finished != self.state.finished:
            raise CoreInvariantError(f"finished={self.finished} but the workflow is {self.state.name}")
        if self.finished and (counts[Status.ACTIVE] or counts[Status.RETRY_WAIT]):
            raise CoreInvariantError(f"finished {self.state.name} with tasks active or waiting for a retry")
        if counts[Status.RETRY_WAIT] and self.state is not WorkflowState.RUNNING_EXECUTION:
            raise CoreInvariantError(f"a retry waits while the workflow is {self.state.name}")
        if self.started and (counts[Status.LOST] or counts[Status.ADOPTED_RETRY]):
            raise CoreInvariantError("a taken-back task start() decides on is still undecided")
        if self.started and not self.finished and self._submitting():
            left = [code for code in self.scope if self._ready(code)]
            if left:
                raise CoreInvariantError(f"tasks {sorted(left)} are ready but were not submitted")

    def _validate_node(self, code: int, node: TaskNode) -> None:
        st, a = node.status, node.attempt
        if node.code != code:
            raise CoreInvariantError(f"node {node.code} is filed under task {code}")
        if a is None:
            if st is not Status.NEW and st is not Status.SKIPPED:
                raise CoreInvariantError(f"task {code} is {st.name} with no attempt")
            return
        where = f"task {code} ({st.name}, attempt {a.attempt} {a.state.name})"
        if a.code != code or a.attempt > node.floor or a.attempt < 1:
            raise CoreInvariantError(f"{where}: attempt number or task does not fit its node (floor {node.floor})")
        if a.id and self.by_id.get(a.id) is not a:
            raise CoreInvariantError(f"{where}: its attempt is not indexed by its id")
        if st is Status.NEW:
            raise CoreInvariantError(f"{where}: a new task has no attempt")
        if (st is Status.ACTIVE) != (a.state in TASK_ACTIVE):
            raise CoreInvariantError(f"{where}: active status and attempt state disagree")
        if (st is Status.SUCCEEDED) != bool(node.succeeded_seq) or (st is Status.SUCCEEDED and not a.state.succeeded):
            raise CoreInvariantError(f"{where}: succeeded status, success order and attempt state disagree")
        if st in (Status.FAILED, Status.HANDLED, Status.ENDED) and a.state.succeeded:
            raise CoreInvariantError(f"{where}: ended unsuccessfully with a successful attempt")
        if node.held and (st is not Status.ACTIVE or a.state is not TaskState.SUBMITTED_SUCCESS or not a.id):
            raise CoreInvariantError(f"{where}: held by its task group but not a persisted attempt waiting to be sent")
        if node.delay_due and (st is not Status.ACTIVE or a.state is not TaskState.SUBMITTED_SUCCESS):
            raise CoreInvariantError(f"{where}: waits for its delay but is not an attempt waiting to be sent")
        if bool(node.delay_due) != (("delay", code) in self.timers):
            raise CoreInvariantError(f"{where}: its delay (due {node.delay_due}) and its delay timer disagree")
        if node.delay_due and self.state is WorkflowState.READY_STOP:
            raise CoreInvariantError(f"{where}: waits for its delay while the run stops")
        if st is Status.RETRY_WAIT and ("retry", code) not in self.timers:
            raise CoreInvariantError(f"{where}: waits for a retry whose timer is not armed")
        if st is Status.RETRY_WAIT and (a.state is not TaskState.FAILURE or a.retry_times >= self._retries(code)):
            raise CoreInvariantError(f"{where}: waits for a retry it does not have")
        if st is Status.LOST and a.state is not TaskState.NEED_FAULT_TOLERANCE:
            raise CoreInvariantError(f"{where}: lost without being lost")
        if st is Status.ADOPTED_RETRY and a.state is not TaskState.FAILURE:
            raise CoreInvariantError(f"{where}: a retry adopted for an attempt that did not fail")

    def _retries(self, code: int) -> int:
        task = self.spec.tasks.get(code)
        return task.retries if task is not None else 0

    # -- transitions ------------------------------------------------------------------------------

    def _adopt(self, a: Attempt, rerun: bool = False) -> None:
        node = self._node(a.code)
        if a.id:
            self.by_id[a.id] = a
        node.floor = max(node.floor, a.attempt)
        if node.attempt is not None and a.attempt < node.attempt.attempt:
            return  # an older attempt: known by its id only
        node.attempt = a
        task = self.spec.tasks.get(a.code)
        if rerun:
            status = Status.RERUN
        elif a.state.succeeded:
            status = Status.SUCCEEDED
        elif a.state is TaskState.FAILURE and task is not None and a.retry_times < task.retries:
            status = Status.ADOPTED_RETRY  # its retry was waiting (or cancelled by a pause): start() re-arms it
        elif a.state in (TaskState.FAILURE, TaskState.KILL):
            status = Status.FAILED  # taken back failed for good: it stays failed
        elif a.state is TaskState.NEED_FAULT_TOLERANCE:
            status = Status.LOST
        elif a.state in TASK_ACTIVE:
            status = Status.ACTIVE
        else:
            status = Status.ENDED
        self._place(node, status)
        if status is Status.SUCCEEDED and not node.succeeded_seq:
            self._succeeded += 1
            node.succeeded_seq = self._succeeded

    def _set(self, node: TaskNode, new: Status, cause: str) -> None:
        """Move ``node`` to status ``new`` through the node transition table."""
        old = node.status
        if new not in NODE_TRANSITIONS[old]:
            raise InvalidTransition("task node", node.code, old, new, cause)
        self._place(node, new)

    def _place(self, node: TaskNode, new: Status) -> None:
        self.counts[node.status] -= 1
        self.counts[new] += 1
        if new is Status.ACTIVE:
            self._active[node.code] = node
        elif node.status is Status.ACTIVE:
            del self._active[node.code]
            node.held = False
            if node.delay_due:  # ended before its delay was over (its timer's DelayDue finds nothing)
                node.delay_due = 0.0
                self.timers.discard(("delay", node.code))
        node.status = new

    def _task_to(self, a: Attempt, new: TaskState, cause: str) -> None:
        check_task(a.id or (a.code, a.attempt), a.state, new, cause)
        self.story.append((self.now, "task", a.id, a.state.name, new.name, cause))
        a.state = new

    def _workflow_to(self, new: WorkflowState, cause: str) -> None:
        check_workflow(self.instance_id, self.state, new, cause)
        self.story.append((self.now, "workflow", self.instance_id, self.state.name, new.name, cause))
        self.state = new

    def bind(self, a: Attempt, task_instance_id: int, held: bool = False) -> None:
        """The actor persisted ``a`` as task instance ``task_instance_id``; ``held``: its task group had no
        free slot, so it waits in the group's queue until GroupSlotGranted."""
        a.id = task_instance_id
        self.by_id[task_instance_id] = a
        if held:
            self.nodes[a.code].held = True

    def hold(self, task_instance_ids: frozenset[int]) -> None:
        """Taken over still queued in their task group: these attempts wait for GroupSlotGranted (in their
        place in the queue) instead of being sent at the start."""
        for tid in task_instance_ids:
            a = self.by_id.get(tid)
            if a is not None and self.nodes[a.code].attempt is a and a.state is TaskState.SUBMITTED_SUCCESS:
                self.nodes[a.code].held = True

    def held(self) -> list[Attempt]:
        """The attempts waiting in their task group's queue."""
        return [n.attempt for n in self._active.values() if n.held]  # type: ignore[misc]

    def is_held(self, a: Attempt) -> bool:
        node = self.nodes.get(a.code)
        return node is not None and node.attempt is a and node.held

    def delay_due(self, code: int) -> float:
        """Epoch seconds task ``code``'s attempt waits for its delay_time until (0: it does not wait)."""
        node = self.nodes.get(code)
        return 0.0 if node is None else node.delay_due

    def holds(self, a: Attempt) -> bool:
        """Whether ``a`` is not to be sent yet: its task group or its delay holds it."""
        node = self.nodes.get(a.code)
        return node is not None and node.attempt is a and (node.held or node.delay_due > 0)

    def release_held(self, a: Attempt) -> bool:
        """Whether ``a`` was held by its task group, no longer held now: a kill decided before the write that
        found its group full (CreateAttempts and a stop in one batch) reaches it as a KILL report."""
        if not self.is_held(a):
            return False
        self.nodes[a.code].held = False
        return True

    def _arm(self, key: tuple[Any, ...], delay: float, event: Any) -> ArmTimer:
        self.timers.add(key)
        return ArmTimer(key, delay, event)

    def _unarm(self, key: tuple[Any, ...]) -> CancelTimer:
        self.timers.discard(key)
        return CancelTimer(key)

    def _unhold(self, a: Attempt) -> list[Action]:
        """A worker reports on ``a``, still waiting for its delay: it was sent after all, so whatever held it
        (its delay, its group) holds it no more."""
        node = self.nodes[a.code]
        node.held, node.delay_due = False, 0.0
        return [self._unarm(("delay", a.code))]

    def _kill(self, a: Attempt) -> list[Action]:
        """Stop attempt ``a``: one still held by its task group or its delay was never sent, so it is dropped
        (from the group's queue; its delay's timer cancelled) and reported KILL by the actor (CancelHeld);
        any other is killed where it runs."""
        node = self.nodes[a.code]
        if node.delay_due:
            node.held, node.delay_due = False, 0.0
            return [self._unarm(("delay", a.code)), CancelHeld(a, "stopped while waiting for its delay")]
        if node.held:
            node.held = False
            return [CancelHeld(a)]
        return [KillTask(a)]

    # -- entry points -----------------------------------------------------------------------------

    def start(self, now: float | None = None) -> list[Action]:
        """The first actions of a run, new or taken back (``now``: epoch seconds, the clock a taken-back
        run's timers are re-armed by; the core reads no clock)."""
        if now is not None:
            self.now = now
        self.started = True
        actions: list[Action] = [RunLogic(a) for a in self.active() if a.code in self.logic]
        actions += self._rearm(self.now)
        if self.state is WorkflowState.READY_STOP:
            actions += self._kill_active()  # taken over while stopping: the kills were the old owner's
        if self.spec.timeout > 0:
            # the limit is the whole run's: a run taken over mid-way has less of it left
            left = max(0.0, self.spec.timeout * 60.0 - self.elapsed)
            actions.append(self._arm(("workflow-timeout",), left, WorkflowTimedOut()))
        # taken over from a dead master: attempts lost with their worker run again as the next attempt
        lost = [
            n.attempt
            for n in self.nodes.values()
            if n.attempt is not None and n.attempt.state is TaskState.NEED_FAULT_TOLERANCE and n.status in _ADOPTED_LOST
        ]
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
        adopted = sorted(code for code, n in self.nodes.items() if n.status is Status.ADOPTED_RETRY)
        for code in adopted:
            node, task = self.nodes[code], self.spec.tasks[code]
            a = node.attempt
            assert a is not None
            if self.state is WorkflowState.READY_STOP:
                self._set(node, Status.FAILED, "a stop cancels a waiting retry")
            elif self.state is WorkflowState.RUNNING_EXECUTION:
                waited = max(0.0, now - a.end_time / 1000) if a.end_time else 0.0
                left = task.retry_interval * 60.0 - waited
                if left > 0:
                    self._set(node, Status.RETRY_WAIT, "retry re-armed")
                    actions.append(self._arm(("retry", code), left, RetryDue(code)))
                else:
                    actions += self._create([self._next_attempt(code)])
            else:
                self._set(node, Status.ENDED, "a pause cancels a waiting retry")
        for a in self.active():
            task = self.spec.tasks[a.code]
            warn = task.timeout_flag and task.timeout > 0 and task.timeout_strategy in (WARN, WARNFAILED)
            if warn and a.state is TaskState.RUNNING_EXECUTION:
                ran = max(0.0, now - a.start_time / 1000) if a.start_time else 0.0
                left = max(0.0, task.timeout * 60.0 - ran)
                actions.append(self._arm(("task-timeout", a.id), left, TaskTimedOut(a.id, a.attempt)))
        return actions

    def handle(self, event: Event, now: float | None = None) -> list[Action]:
        """Actions for one event at ``now`` (epoch seconds; None: the time of the previous event, the core
        reads no clock). An event that would need an illegal transition raises :class:`InvalidTransition`,
        logged with the event and the run's story: the handler may already have changed the run in memory,
        so the run is not driven on (its actor ends, and the master recovers the instance from the database,
        as after any failure of the actor)."""
        if now is not None:
            self.now = now
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
        if a is None or a.attempt != attempt or self.nodes[a.code].attempt is not a:
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
        actions: list[Action] = self._unhold(a) if self.nodes[a.code].delay_due else []
        actions += [
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
            actions.append(self._arm(("task-timeout", a.id), task.timeout * 60.0, TaskTimedOut(a.id, a.attempt)))
        if self.state is WorkflowState.READY_STOP:
            actions.append(KillTask(a))  # started after the stop (its kill had no host yet, or was lost)
        return actions

    def _on_dispatched(self, ev: TaskDispatched) -> list[Action]:
        a = self._current_attempt(ev.task_instance_id, ev.attempt)
        if a is None or a.state is not TaskState.SUBMITTED_SUCCESS:
            return []  # RUNNING (or the result) overtook the dispatch acknowledgement
        self._task_to(a, TaskState.DISPATCH, ev.cause_id or "dispatched")
        a.host, a.incarnation = ev.host, ev.incarnation
        actions: list[Action] = [PersistTask(a, a.state, (("host", ev.host),), deferred=True)]
        if self.nodes[a.code].delay_due:
            actions += self._unhold(a)
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
        actions: list[Action] = [PersistTask(a, a.state, tuple(fields)), self._unarm(("task-timeout", a.id))]
        node = self.nodes[a.code]
        if a.state.succeeded:
            self._set(node, Status.SUCCEEDED, "succeeded")
            self._succeeded += 1
            node.succeeded_seq = self._succeeded
            skipped = self.counts[Status.SKIPPED]
            self._skip(ev.skip)
            actions += self._task_alert(a, "success")
            # nothing else was ready (every change that readies a task submits what it readied): only what
            # waits for this task can be ready now, unless tasks were skipped
            actions += self._submit_ready(a.code if self.counts[Status.SKIPPED] == skipped else None)
        else:
            after = self._after_failure(a)
            if a.state is TaskState.FAILURE:
                final = node.status is Status.FAILED or node.status is Status.HANDLED  # else a retry runs
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
        task, node = self.spec.tasks[a.code], self.nodes[a.code]
        retryable = (a.state is TaskState.FAILURE and a.retry_times < task.retries) or (
            a.state is TaskState.NEED_FAULT_TOLERANCE
        )
        if retryable and self.state is WorkflowState.RUNNING_EXECUTION:
            delay = 0.0 if a.state is TaskState.NEED_FAULT_TOLERANCE else task.retry_interval * 60.0
            if delay <= 0:
                return self._create([self._next_attempt(a.code)])
            self._set(node, Status.RETRY_WAIT, "retry armed")
            return [self._arm(("retry", a.code), delay, RetryDue(a.code))]
        if any(d in self.conditions and d in self.scope for d in self.spec.dag.downstream[a.code]):
            self._set(node, Status.HANDLED, "a CONDITIONS task downstream decides")
            return self._submit_ready()
        self._set(node, Status.FAILED, "failed for good")
        if self.failure_strategy == END:
            return [k for x in self.active() for k in self._kill(x)]
        return []

    def _on_retry_due(self, ev: RetryDue) -> list[Action]:
        node = self.nodes.get(ev.code)
        if node is None or node.status is not Status.RETRY_WAIT:
            return []
        self.timers.discard(("retry", ev.code))
        if self.state is not WorkflowState.RUNNING_EXECUTION:
            # stopped or paused while waiting: the retry does not happen
            stopped = self.state is WorkflowState.READY_STOP
            self._set(node, Status.FAILED if stopped else Status.ENDED, "retry cancelled")
            return self._maybe_finish()
        return self._create([self._next_attempt(ev.code)])

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
        for node in self._waiting_retries():
            actions.append(self._unarm(("retry", node.code)))
            self._set(node, Status.FAILED, "a stop cancels a waiting retry")
        actions += self._kill_active()
        return actions + self._maybe_finish()

    def _kill_active(self) -> list[Action]:
        """Kills for every attempt still active, the attempts never sent dropped from the dispatch queue
        (each comes back as a KILL result: only the dispatcher knows whether it left already), and the timer
        that does both again while any is active."""
        active = self.active()
        if not active:
            return []
        actions: list[Action] = [k for a in active for k in self._kill(a)]
        queued = tuple(
            a for a in active if a.state is TaskState.SUBMITTED_SUCCESS and not a.host and a.code not in self.logic
        )
        if queued:
            actions.append(CancelDispatch(queued))
        return [*actions, self._arm(("kill-resend",), KILL_RESEND, KillResend())]

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
            actions += [PersistTask(a, a.state), self._unarm(("task-timeout", a.id))]
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
        actions: list[Action] = [PersistTask(a, a.state), self._unarm(("task-timeout", a.id))]
        return actions + self._after_failure(a) + self._maybe_finish()

    def _on_logic_check(self, ev: LogicCheck) -> list[Action]:
        a = self._current_attempt(ev.task_instance_id, ev.attempt)
        if a is None or a.state.finished:
            return []
        return [RunLogic(a)]

    def _on_logic_waiting(self, ev: LogicWaiting) -> list[Action]:
        a = self._current_attempt(ev.task_instance_id, ev.attempt)
        if a is None or a.state.finished:
            return []
        return [self._arm(("logic", a.id), ev.delay, LogicCheck(a.id, a.attempt))]

    def _on_group_slot_granted(self, ev: GroupSlotGranted) -> list[Action]:
        a = self.by_id.get(ev.task_instance_id)
        if a is None:
            return []
        node = self.nodes[a.code]
        if node.attempt is not a or not node.held or a.state.finished:
            return []  # stale, granted already, or stopped while it waited (CancelHeld reported it)
        node.held = False
        return [] if node.delay_due else [SendAttempt(a)]  # a delay still to wait: DelayDue sends it

    def _on_delay_due(self, ev: DelayDue) -> list[Action]:
        node = self.nodes.get(ev.code)
        a = None if node is None else node.attempt
        if node is None or a is None or a.attempt != ev.attempt or not node.delay_due:
            return []  # stale, or stopped while it waited (CancelHeld reported it)
        self.timers.discard(("delay", ev.code))
        node.delay_due = 0.0
        return [] if node.held else [SendAttempt(a)]  # still in its task group's queue: GroupSlotGranted sends it

    def _on_pause(self, ev: PauseRequested) -> list[Action]:
        if self.state is not WorkflowState.RUNNING_EXECUTION:
            return []
        cause = ev.cause_id or "pause requested"
        self._workflow_to(WorkflowState.READY_PAUSE, cause)
        actions: list[Action] = [SetWorkflowState(self.state, cause=cause)]
        actions += [ControlChild(a, "pause") for a in self.active() if a.code in self.logic]
        for node in self._waiting_retries():
            actions.append(self._unarm(("retry", node.code)))
            self._set(node, Status.ENDED, "a pause cancels a waiting retry")
        return actions + self._maybe_finish()

    def _waiting_retries(self) -> list[TaskNode]:
        """The nodes waiting for their retry timer, by task code."""
        if not self.counts[Status.RETRY_WAIT]:
            return []
        return sorted((n for n in self.nodes.values() if n.status is Status.RETRY_WAIT), key=lambda n: n.code)

    # -- helpers ----------------------------------------------------------------------------------

    def _skip(self, codes: tuple[int, ...]) -> None:
        """Skip a branch, and downstream whatever only skipped tasks lead to."""
        nodes = self.nodes
        todo = [c for c in codes if c in self.scope and nodes[c].status is Status.NEW]
        while todo:
            node = nodes[todo.pop()]
            if node.status is not Status.NEW and node.status is not Status.RERUN:
                continue  # skipped already (or it ran: what runs is not skipped)
            self._set(node, Status.SKIPPED, "branch not taken")
            self.story.append((self.now, "task", 0, "", f"skip {node.code}", "branch not taken"))
            for down in self.spec.dag.downstream[node.code]:
                ups = [u for u in self.spec.dag.upstream[down] if u in self.scope]
                if down in self.scope and all(nodes[u].status is Status.SKIPPED for u in ups):
                    todo.append(down)

    def _next_attempt(self, code: int) -> Attempt:
        node = self.nodes[code]
        prev = node.attempt
        number = max(node.floor, prev.attempt if prev else 0) + 1
        node.floor = number
        if node.status is Status.RERUN and prev is not None:
            # run again from scratch (new upstream values); a killed / lost attempt keeps its retry count
            keep = prev.state in RERUN_ON_RESUME or prev.state is TaskState.NEED_FAULT_TOLERANCE
            a = Attempt(code=code, attempt=number, retry_times=prev.retry_times if keep else 0)
            a.var_in = self._var_in(code)
        elif prev is None:
            a = Attempt(code=code, attempt=number, retry_times=0)
            a.var_in = self._var_in(code)
        else:
            retry = prev.retry_times + (0 if prev.state is TaskState.NEED_FAULT_TOLERANCE else 1)
            a = Attempt(code=code, attempt=number, retry_times=retry, var_in=prev.var_in)
        self._set(node, Status.ACTIVE, "submit")
        node.attempt, node.held = a, False
        if code in self.delayed:
            a.submit_time = int(self.now * 1000)
            node.delay_due = self._delay_until(a, prev)
        self.story.append((self.now, "task", 0, "", f"attempt {a.attempt} of {code}", "submit"))
        return a

    def _var_in(self, code: int) -> list[dict[str, Any]]:
        """Upstream OUT values: on a name clash a non-empty value beats an empty one, and between
        two non-empty values the earliest-finished upstream wins (DolphinScheduler's rule)."""
        merged: dict[str, dict[str, Any]] = {}
        done = [n for n in map(self.nodes.__getitem__, self._upstream(code)) if n.succeeded_seq]
        if len(done) > 1:
            done.sort(key=lambda n: n.succeeded_seq)
        for n in done:
            for p in n.attempt.var_pool:  # type: ignore[union-attr]
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
        return self._create(fresh) if fresh else []

    def _create(self, fresh: list[Attempt]) -> list[Action]:
        """Create these new attempts, and arm the timer of each that waits for its delay_time."""
        actions: list[Action] = [CreateAttempts(tuple(fresh))]
        if not self.delayed:
            return actions
        for a in fresh:
            due = self.nodes[a.code].delay_due
            if due:
                actions.append(self._arm(("delay", a.code), due - self.now, DelayDue(a.code, a.attempt)))
        return actions

    def _delay_until(self, a: Attempt, prev: Attempt | None) -> float:
        """When new attempt ``a`` may be sent (epoch seconds; 0: at once). A task's delay_time counts from
        its first submission (DolphinScheduler): a retry does not wait again, a logic task never waits, and
        an attempt lost with its master (or its dispatch) runs again after the rest of the lost one's delay."""
        task = self.spec.tasks.get(a.code)
        if task is None or a.retry_times:
            return 0.0
        since = self.now
        if prev is not None and prev.state is TaskState.NEED_FAULT_TOLERANCE and prev.submit_time:
            since = min(since, prev.submit_time / 1000)
        due = since + task.delay_time * 60.0
        return due if due > self.now else 0.0

    def _maybe_finish(self) -> list[Action]:
        counts = self.counts
        if self.finished or counts[Status.RETRY_WAIT] or counts[Status.ACTIVE]:
            return []
        if self._submitting() and any(self._ready(code) for code in self.scope):
            return []  # more to submit (the caller's _submit_ready does it)
        nodes = self.nodes
        all_done = all(nodes[code].status in _DONE or code in self.disabled for code in self.scope)
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
    LogicWaiting: WorkflowRun._on_logic_waiting,
    GroupSlotGranted: WorkflowRun._on_group_slot_granted,
    DelayDue: WorkflowRun._on_delay_due,
}
