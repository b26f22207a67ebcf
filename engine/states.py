"""Workflow and task instance states (DolphinScheduler's codes) and their transition tables.

Every state change of an instance or a task instance goes through :func:`check_workflow` /
:func:`check_task`; an illegal one raises :class:`InvalidTransition` before it is applied.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable


class CommandType(enum.IntEnum):
    """``command.command_type`` (DolphinScheduler's codes; PAUSE and STOP are never queued as commands,
    they go to the owning master by RPC; the 3.2 types are not built)."""

    START_PROCESS = 0
    START_CURRENT_TASK_PROCESS = 1
    RECOVER_TOLERANCE_FAULT_PROCESS = 2
    RECOVER_SUSPENDED_PROCESS = 3
    START_FAILURE_TASK_PROCESS = 4
    COMPLEMENT_DATA = 5
    SCHEDULER = 6
    REPEAT_RUNNING = 7
    PAUSE = 8
    STOP = 9
    #: wake a run waiting behind its workflow's serial rule or cap (inserted by the master only)
    RECOVER_SERIAL_WAIT = 11


class ReleaseState(enum.IntEnum):
    """``release_state`` of workflow definitions and schedules."""

    OFFLINE = 0
    ONLINE = 1


class UserType(enum.IntEnum):
    """``users.user_type``."""

    ADMIN = 0
    GENERAL = 1


class UserState(enum.IntEnum):
    """``users.state``: a disabled user's sessions and tokens stop working."""

    DISABLED = 0
    ENABLED = 1


class WorkflowState(enum.IntEnum):
    SUBMITTED_SUCCESS = 0
    RUNNING_EXECUTION = 1
    READY_PAUSE = 2
    PAUSE = 3
    READY_STOP = 4
    STOP = 5
    FAILURE = 6
    SUCCESS = 7
    DELAY_EXECUTION = 12
    SERIAL_WAIT = 14
    READY_BLOCK = 15
    BLOCK = 16

    @property
    def finished(self) -> bool:
        return self in WORKFLOW_FINISHED


class TaskState(enum.IntEnum):
    SUBMITTED_SUCCESS = 0
    RUNNING_EXECUTION = 1
    PAUSE = 3
    STOP = 5
    FAILURE = 6
    SUCCESS = 7
    NEED_FAULT_TOLERANCE = 8
    KILL = 9
    DELAY_EXECUTION = 12
    FORCED_SUCCESS = 13
    DISPATCH = 17

    @property
    def finished(self) -> bool:
        return self in TASK_FINISHED

    @property
    def succeeded(self) -> bool:
        return self in (TaskState.SUCCESS, TaskState.FORCED_SUCCESS)


WORKFLOW_FINISHED = frozenset(
    {
        WorkflowState.PAUSE,
        WorkflowState.STOP,
        WorkflowState.FAILURE,
        WorkflowState.SUCCESS,
        WorkflowState.BLOCK,
    }
)
#: unfinished instances a failover must take over (DolphinScheduler's NEED_FAILOVER_STATES)
WORKFLOW_FAILOVER = frozenset(
    {
        WorkflowState.SUBMITTED_SUCCESS,
        WorkflowState.RUNNING_EXECUTION,
        WorkflowState.DELAY_EXECUTION,
        WorkflowState.READY_PAUSE,
        WorkflowState.READY_STOP,
    }
)
TASK_FINISHED = frozenset(
    {
        TaskState.PAUSE,
        TaskState.STOP,
        TaskState.FAILURE,
        TaskState.SUCCESS,
        TaskState.NEED_FAULT_TOLERANCE,
        TaskState.KILL,
        TaskState.FORCED_SUCCESS,
    }
)
#: attempts that may still be running somewhere
TASK_ACTIVE = frozenset(
    {TaskState.SUBMITTED_SUCCESS, TaskState.DISPATCH, TaskState.RUNNING_EXECUTION, TaskState.DELAY_EXECUTION}
)

#: a finished dependency's outcome for DEPENDENT tasks: its task succeeded (SUCCESS, FORCED_SUCCESS)
TASK_SUCCEEDED = frozenset({TaskState.SUCCESS, TaskState.FORCED_SUCCESS})
#: a finished dependency's outcome for DEPENDENT tasks: its task failed or was stopped
TASK_FAILED_OUTCOMES = frozenset(
    {TaskState.PAUSE, TaskState.STOP, TaskState.FAILURE, TaskState.NEED_FAULT_TOLERANCE, TaskState.KILL}
)


def sql_codes(codes: Iterable[enum.IntEnum]) -> str:
    """``(0, 1, 12)``: codes as a SQL list, for the partial-index conditions that cannot take parameters."""
    return "(" + ", ".join(str(int(c)) for c in sorted(codes)) + ")"


def code_list(codes: Iterable[enum.IntEnum]) -> list[int]:
    """Codes as a ``smallint[]`` query parameter, in a stable order."""
    return sorted(int(c) for c in codes)


W, T, C = WorkflowState, TaskState, CommandType

#: the command types a master claims and runs
CLAIMABLE = frozenset(
    {
        C.START_PROCESS,
        C.START_CURRENT_TASK_PROCESS,
        C.RECOVER_SUSPENDED_PROCESS,
        C.START_FAILURE_TASK_PROCESS,
        C.COMPLEMENT_DATA,
        C.SCHEDULER,
        C.REPEAT_RUNNING,
        C.RECOVER_SERIAL_WAIT,
    }
)

#: commands that act on an existing instance -> the instance states they apply to (DolphinScheduler's
#: API rules). The API refuses other states with a 409; the claiming master checks again in its UPDATE.
RESTART_FROM: dict[CommandType, frozenset[WorkflowState]] = {
    C.RECOVER_SUSPENDED_PROCESS: frozenset({W.PAUSE, W.STOP}),
    C.START_FAILURE_TASK_PROCESS: frozenset({W.FAILURE}),
    C.REPEAT_RUNNING: frozenset({W.PAUSE, W.STOP, W.FAILURE, W.SUCCESS}),
}

_WORKFLOW: dict[WorkflowState, frozenset[WorkflowState]] = {
    W.SUBMITTED_SUCCESS: frozenset({W.RUNNING_EXECUTION, W.READY_STOP, W.READY_PAUSE, W.FAILURE, W.SERIAL_WAIT}),
    W.SERIAL_WAIT: frozenset({W.RUNNING_EXECUTION, W.STOP, W.READY_STOP}),
    W.DELAY_EXECUTION: frozenset({W.RUNNING_EXECUTION, W.READY_STOP, W.READY_PAUSE, W.FAILURE}),
    W.RUNNING_EXECUTION: frozenset({W.READY_PAUSE, W.READY_STOP, W.SUCCESS, W.FAILURE, W.READY_BLOCK}),
    W.READY_PAUSE: frozenset({W.PAUSE, W.READY_STOP, W.SUCCESS, W.FAILURE}),
    W.READY_STOP: frozenset({W.STOP, W.SUCCESS, W.FAILURE}),
    W.READY_BLOCK: frozenset({W.BLOCK, W.READY_STOP}),
    # finished instances move again only through a command (rerun, recover, resume)
    W.PAUSE: frozenset({W.RUNNING_EXECUTION}),
    W.STOP: frozenset({W.RUNNING_EXECUTION}),
    W.FAILURE: frozenset({W.RUNNING_EXECUTION}),
    W.SUCCESS: frozenset({W.RUNNING_EXECUTION}),
    W.BLOCK: frozenset({W.RUNNING_EXECUTION}),
}

_TASK: dict[TaskState, frozenset[TaskState]] = {
    T.SUBMITTED_SUCCESS: frozenset(
        {
            T.DISPATCH,
            T.DELAY_EXECUTION,
            T.RUNNING_EXECUTION,
            T.SUCCESS,
            T.FAILURE,
            T.KILL,
            T.NEED_FAULT_TOLERANCE,
            T.PAUSE,  # a logic task (sub-workflow, dependent) paused with its workflow
        }
    ),
    T.DISPATCH: frozenset({T.RUNNING_EXECUTION, T.SUCCESS, T.FAILURE, T.KILL, T.NEED_FAULT_TOLERANCE}),
    T.DELAY_EXECUTION: frozenset({T.RUNNING_EXECUTION, T.SUCCESS, T.FAILURE, T.KILL, T.NEED_FAULT_TOLERANCE}),
    T.RUNNING_EXECUTION: frozenset({T.SUCCESS, T.FAILURE, T.KILL, T.NEED_FAULT_TOLERANCE, T.PAUSE}),
    T.FAILURE: frozenset({T.FORCED_SUCCESS}),
    T.KILL: frozenset({T.FORCED_SUCCESS}),
    # an attempt lost with its worker, left so when its run ended: the API may force it (as a failed one)
    T.NEED_FAULT_TOLERANCE: frozenset({T.FORCED_SUCCESS}),
    T.SUCCESS: frozenset(),
    T.FORCED_SUCCESS: frozenset(),
    T.PAUSE: frozenset(),
    T.STOP: frozenset(),
}


class InvalidTransition(RuntimeError):
    def __init__(self, kind: str, ident: object, old: enum.Enum, new: enum.Enum, cause: str) -> None:
        super().__init__(f"illegal {kind} transition {old.name} -> {new.name} for {ident} ({cause})")
        self.old, self.new = old, new


def check_workflow(ident: object, old: WorkflowState, new: WorkflowState, cause: str) -> None:
    if new is not old and new not in _WORKFLOW[old]:
        raise InvalidTransition("workflow", ident, old, new, cause)


def check_task(ident: object, old: TaskState, new: TaskState, cause: str) -> None:
    if new is not old and new not in _TASK[old]:
        raise InvalidTransition("task", ident, old, new, cause)


def workflow_transitions() -> dict[WorkflowState, frozenset[WorkflowState]]:
    return dict(_WORKFLOW)


def task_transitions() -> dict[TaskState, frozenset[TaskState]]:
    return dict(_TASK)
