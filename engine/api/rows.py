"""Database rows -> API JSON: state codes become names, times ISO 8601 (JSON columns are objects already:
engine/storage/jsoncodec.py)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from engine.states import CommandType, TaskState, WorkflowState

PRIORITY_NAMES = ("HIGHEST", "HIGH", "MEDIUM", "LOW", "LOWEST")
FAILURE_STRATEGY_NAMES = ("END", "CONTINUE")
RELEASE_NAMES = ("OFFLINE", "ONLINE")
#: the state listed for a disabled task (it has no task instance, so no TaskState)
DISABLED = "DISABLED"
#: the state listed for a task a logic task's branch skipped (it has no task instance either)
SKIPPED = "SKIPPED"


def _ms(a: dt.datetime | None, b: dt.datetime | None) -> int | None:
    if a is None or b is None:
        return None
    return int((b - a).total_seconds() * 1000)


def pick(row: Mapping[str, Any], names: Iterable[str]) -> dict[str, Any]:
    return {n: row[n] for n in names}


#: how a run came to be, from the command that made it (DolphinScheduler's command types)
RUN_TYPES = ("manual", "scheduled", "backfill", "rerun", "recovery")
#: the run type of each command type (any other is manual)
RUN_TYPE_OF = {
    CommandType.START_PROCESS: "manual",
    CommandType.START_CURRENT_TASK_PROCESS: "manual",
    CommandType.SCHEDULER: "scheduled",
    CommandType.COMPLEMENT_DATA: "backfill",
    CommandType.REPEAT_RUNNING: "rerun",
    CommandType.RECOVER_TOLERANCE_FAULT_PROCESS: "recovery",
    CommandType.RECOVER_SUSPENDED_PROCESS: "recovery",
    CommandType.START_FAILURE_TASK_PROCESS: "recovery",
}


def run_type(command_type: int | None, history_cmd: str | None) -> str:
    """manual, scheduled, backfill, rerun or recovery. A run woken from a serial wait keeps the type of the
    command that made it (the first of ``history_cmd``)."""
    if command_type == CommandType.RECOVER_SERIAL_WAIT and history_cmd:
        first = history_cmd.split(",")[0]
        if first in CommandType.__members__:
            command_type = CommandType[first]
    try:
        return RUN_TYPE_OF.get(CommandType(command_type), "manual")
    except ValueError:
        return "manual"


def instance(row: Mapping[str, Any]) -> dict[str, Any]:
    end = row["end_time"]
    return {
        "id": row["id"],
        "name": row["name"],
        "workflow_code": row["workflow_definition_code"],
        "workflow_version": row["workflow_definition_version"],
        "project_code": row["project_code"],
        "state": WorkflowState(row["state"]).name,
        "finished": WorkflowState(row["state"]).finished,
        "host": row["host"],
        "command_type": row["command_type"],
        "run_type": run_type(row["command_type"], row["history_cmd"]),
        "run_times": row["run_times"],
        "priority": PRIORITY_NAMES[row["workflow_instance_priority"]],
        "failure_strategy": FAILURE_STRATEGY_NAMES[row["failure_strategy"]],
        "worker_group": row["worker_group"],
        "schedule_time": row["schedule_time"],
        "start_time": row["start_time"],
        "end_time": end,
        "duration_ms": _ms(row["start_time"], end or dt.datetime.now(dt.UTC)),
    }


def instance_detail(row: Mapping[str, Any]) -> dict[str, Any]:
    out = instance(row)
    out.update(
        epoch=row["epoch"],
        command_id=row["command_id"],
        history_cmd=row["history_cmd"],
        global_params=row["global_params"],
        var_pool=row["var_pool"],
        state_history=row["state_history"],
        restart_time=row["restart_time"],
        dry_run=bool(row["dry_run"]),
    )
    return out


def task(row: Mapping[str, Any]) -> dict[str, Any]:
    state = TaskState(row["state"])
    end = row["end_time"]
    start = row["start_time"]
    return {
        "id": row["id"],
        "name": row["name"],
        "type": row["task_type"],
        "task_code": row["task_code"],
        "workflow_instance_id": row["workflow_instance_id"],
        "state": state.name,
        "finished": state.finished,
        "attempt": row["attempt"],
        "current": bool(row["flag"]),
        "retry_times": row["retry_times"],
        "host": row["host"],
        "submit_time": row["submit_time"],
        "start_time": start,
        "end_time": end,
        "queued_ms": _ms(row["submit_time"], start),
        "duration_ms": _ms(start, end or (dt.datetime.now(dt.UTC) if start else None)),
        "exit_code": row["exit_code"],
    }


def disabled_task(definition: Mapping[str, Any], workflow_instance_id: int) -> dict[str, Any]:
    """A disabled task of the instance's definition: it has no task instance, only this listing."""
    return {
        "id": None,
        "name": definition["name"],
        "type": definition["task_type"],
        "task_code": definition["code"],
        "workflow_instance_id": workflow_instance_id,
        "state": DISABLED,
        "finished": True,
        "attempt": 0,
        "current": True,
        "retry_times": 0,
        "host": None,
        "submit_time": None,
        "start_time": None,
        "end_time": None,
        "queued_ms": None,
        "duration_ms": None,
        "exit_code": None,
    }


def skipped_task(definition: Mapping[str, Any], workflow_instance_id: int) -> dict[str, Any]:
    """A task a SWITCH or CONDITIONS branch skipped (engine/api/skipped.py): no task instance, only this."""
    return {
        **disabled_task({**definition, "code": definition["post_task_code"]}, workflow_instance_id),
        "state": SKIPPED,
    }


def task_detail(row: Mapping[str, Any]) -> dict[str, Any]:
    out = task(row)
    out.update(
        pid=row["pid"],
        log_path=row["log_path"],
        execute_path=row["execute_path"],
        app_id=row["app_id"],
        app_link=row["app_link"],
        task_params=row["task_params"],
        var_pool=row["var_pool"],
        priority=PRIORITY_NAMES[row["task_instance_priority"]],
        worker_group=row["worker_group"],
        task_version=row["task_definition_version"],
    )
    return out
