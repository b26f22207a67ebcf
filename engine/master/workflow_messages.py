"""What a running workflow instance's core (``WorkflowRun``, workflow.py) works on and speaks: the attempt
record (one task instance row), the events it is fed (worker reports, timers, requests) and the actions it
returns for the actor (actor.py) to perform. Plain frozen data, no behaviour."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.states import TaskState, WorkflowState

# -- the attempt record -------------------------------------------------------------------------


@dataclass
class Attempt:
    """One task instance row: one attempt of one task."""

    code: int
    attempt: int
    retry_times: int
    state: TaskState = TaskState.SUBMITTED_SUCCESS
    id: int = 0  # assigned when persisted
    host: str = ""
    var_pool: list[dict[str, Any]] = field(default_factory=list)
    #: var pool this attempt starts with (upstream OUT values)
    var_in: list[dict[str, Any]] = field(default_factory=list)
    start_time: int = 0
    end_time: int = 0
    #: the incarnation of the worker at ``host`` that took it (0: not known, e.g. taken back from the database)
    incarnation: int = 0
    #: the attempt's last log lines, as its worker reported them with the result (secrets masked)
    log_tail: str = ""
    #: epoch ms it was created (task_instance.submit_time): a task's delay_time counts from it
    submit_time: int = 0

    @classmethod
    def from_row(cls, row: Any) -> Attempt:
        """A persisted attempt (task_instance row) taken back by a resumed or failed-over instance."""
        pool = list(row["var_pool"] or [])
        return cls(
            code=int(row["task_code"]),
            attempt=int(row["attempt"]),
            retry_times=int(row["retry_times"]),
            state=TaskState(row["state"]),
            id=int(row["id"]),
            host=row["host"] or "",
            var_pool=pool,
            var_in=pool,
            start_time=_ms(row["start_time"]),
            end_time=_ms(row["end_time"]),
            log_tail=row.get("log_tail") or "",
            submit_time=_ms(row.get("submit_time")),
        )


def _ms(when: Any) -> int:
    return int(when.timestamp() * 1000) if when is not None else 0


#: attempts a resumed instance runs again (DolphinScheduler re-inits the KILL tasks on recover-suspended)
RERUN_ON_RESUME = frozenset({TaskState.KILL, TaskState.PAUSE, TaskState.STOP})


# -- events ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskRunningEvent:
    task_instance_id: int
    attempt: int
    host: str
    pid: int
    log_path: str
    execute_path: str
    start_time: int
    cause_id: str = ""
    app_id: str = ""
    app_link: str = ""


@dataclass(frozen=True)
class TaskResultEvent:
    task_instance_id: int
    attempt: int
    state: TaskState
    exit_code: int
    start_time: int
    end_time: int
    host: str = ""
    log_path: str = ""
    var_pool: tuple[dict[str, Any], ...] = ()
    message: str = ""
    cause_id: str = ""
    #: CONDITIONS / SWITCH: the downstream tasks of the branch not taken
    skip: tuple[int, ...] = ()
    pid: int = 0
    execute_path: str = ""
    app_id: str = ""
    app_link: str = ""
    #: the attempt's last log lines (TaskResult.log_tail)
    log_tail: str = ""


@dataclass(frozen=True)
class LogicCheck:
    """Time to look again at a waiting logic task (a sub-workflow's state, a dependency)."""

    task_instance_id: int
    attempt: int
    cause_id: str = ""


@dataclass(frozen=True)
class TaskDispatched:
    task_instance_id: int
    attempt: int
    host: str
    cause_id: str = ""
    #: the incarnation of the worker at ``host`` that took it (DispatchReply.incarnation; 0: not known)
    incarnation: int = 0


@dataclass(frozen=True)
class RetryDue:
    code: int
    cause_id: str = ""


@dataclass(frozen=True)
class TaskTimedOut:
    task_instance_id: int
    attempt: int
    cause_id: str = ""


@dataclass(frozen=True)
class WorkflowTimedOut:
    cause_id: str = ""


@dataclass(frozen=True)
class StopRequested:
    cause_id: str = ""


@dataclass(frozen=True)
class KillResend:
    """While the run stops: send the kills again to the attempts whose results have not arrived."""

    cause_id: str = ""


@dataclass(frozen=True)
class PauseRequested:
    cause_id: str = ""


@dataclass(frozen=True)
class DispatchLost:
    """A dispatch to ``host`` whose reply was lost turned out not to have been taken: the worker said,
    after every copy sent to it had expired, that it does not have the attempt. It runs again."""

    task_instance_id: int
    attempt: int
    host: str
    cause_id: str = ""


@dataclass(frozen=True)
class WorkerLost:
    """The worker at ``host`` lost its registry lease: its attempts are dead (it kills them itself).
    With ``incarnation``, only that incarnation's: an attempt a later one at the same address took (a
    restart within the TTL, whose old key's removal is seen after the new one took it) runs on."""

    host: str
    cause_id: str = ""
    #: the create revision of the lost registry key (0: whichever incarnation)
    incarnation: int = 0


@dataclass(frozen=True)
class LogicWaiting:
    """A look at a logic task found it still waiting (a sub-workflow running, a dependency unmet): look
    again after ``delay`` seconds (the core arms the timer)."""

    task_instance_id: int
    attempt: int
    delay: float
    cause_id: str = ""


@dataclass(frozen=True)
class GroupSlotGranted:
    """The task group admitted an attempt waiting in its queue (the queue row's NOTIFY, or a takeover
    finding it admitted meanwhile): it may be sent now."""

    task_instance_id: int
    cause_id: str = ""


@dataclass(frozen=True)
class DelayDue:
    """Attempt ``attempt`` of task ``code`` has waited its task's ``delay_time``: it may be sent now (the
    core armed the timer when it created the attempt, or a new owner re-armed the rest of it)."""

    code: int
    attempt: int
    cause_id: str = ""


Event = (
    TaskRunningEvent
    | TaskResultEvent
    | TaskDispatched
    | RetryDue
    | TaskTimedOut
    | WorkflowTimedOut
    | StopRequested
    | KillResend
    | PauseRequested
    | WorkerLost
    | DispatchLost
    | LogicCheck
    | LogicWaiting
    | GroupSlotGranted
    | DelayDue
)


# -- actions ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CreateAttempts:
    """Insert these attempts (superseding earlier attempts of the same tasks), then dispatch them."""

    attempts: tuple[Attempt, ...]


@dataclass(frozen=True)
class PersistTask:
    attempt: Attempt
    state: TaskState
    fields: tuple[tuple[str, Any], ...] = ()
    #: the write may wait for the instance's next one (WorkflowActor.DEFER_SECONDS at most): an accepted
    #: dispatch's DISPATCH and host, which the attempt's RUNNING or result supersedes within milliseconds
    #: as a rule. Until written the row says SUBMITTED_SUCCESS, which a takeover settles by asking every
    #: live worker, as for a dispatch whose acknowledgement the dead master never wrote
    deferred: bool = False


@dataclass(frozen=True)
class KillTask:
    attempt: Attempt


@dataclass(frozen=True)
class CancelDispatch:
    """The run stopped: the dispatcher drops its attempts still queued for a worker (never sent), each
    reported back as KILL; one already on its way is killed once its worker is known."""

    attempts: tuple[Attempt, ...]


@dataclass(frozen=True)
class CancelHeld:
    """Stop an attempt still waiting in its task group's queue or for its delay: it was never sent, so there
    is nothing to kill; the actor reports it KILL with ``message`` (the write of that result leaves the
    group's queue)."""

    attempt: Attempt
    message: str = "stopped while waiting for its task group"


@dataclass(frozen=True)
class SendAttempt:
    """Dispatch an attempt its task group has just admitted, or whose delay is over."""

    attempt: Attempt


@dataclass(frozen=True)
class ArmTimer:
    key: tuple[Any, ...]
    delay: float
    event: Any


@dataclass(frozen=True)
class CancelTimer:
    key: tuple[Any, ...]


@dataclass(frozen=True)
class SetWorkflowState:
    state: WorkflowState
    finished: bool = False
    #: why, for the instance's state history
    cause: str = ""


@dataclass(frozen=True)
class RunLogic:
    """Start (idempotently) or look again at a logic task the master runs itself."""

    attempt: Attempt


@dataclass(frozen=True)
class ControlChild:
    """Pass a pause on to a running sub-workflow (or end a waiting dependent as paused)."""

    attempt: Attempt
    action: str


@dataclass(frozen=True)
class RaiseAlert:
    alert_type: int
    title: str
    content: str
    #: the alert group it goes to (None: the instance's warning group)
    alert_group_id: int | None = None
    #: the attempt a task alert is about (0: none): the alert links to its log
    task_instance_id: int = 0


Action = (
    CreateAttempts
    | PersistTask
    | KillTask
    | CancelDispatch
    | CancelHeld
    | SendAttempt
    | ArmTimer
    | CancelTimer
    | SetWorkflowState
    | RaiseAlert
    | RunLogic
    | ControlChild
)

# alert types (DolphinScheduler's AlertType codes)
ALERT_WORKFLOW_TIMEOUT = 3
ALERT_FAULT_TOLERANCE = 4
ALERT_TASK_TIMEOUT = 7
ALERT_TASK_FAILURE = 5
ALERT_TASK_SUCCESS = 6
#: beyond DolphinScheduler's codes (8 is its CLOSE_ALERT)
ALERT_TASK_RETRY = 9
#: a task's ``alert_on`` words and the alert type each raises
TASK_ALERTS = {
    "failure": ALERT_TASK_FAILURE,
    "success": ALERT_TASK_SUCCESS,
    "retry": ALERT_TASK_RETRY,
    "timeout": ALERT_TASK_TIMEOUT,
}
