"""State written outside an actor goes through one checked path (engine/storage/state_writes.py): each
(from, to) pair is checked against engine/states.py's tables before anything is written, and only rows still in
a ``from`` state move. No other module writes an instance's or an attempt's state, except the actor's fenced
batch and the claim of a command (engine/master/store.py, engine/master/claim.py)."""

from __future__ import annotations

import re
from pathlib import Path

import asyncpg
import pytest

from engine.states import InvalidTransition, TaskState, WorkflowState
from engine.storage.state_writes import move_tasks, move_workflows
from tests.test_log_archive import _task
from tests.test_retention import _instance, _project

ROOT = Path(__file__).resolve().parent.parent
#: the writers allowed to set a state: the checked path, the actor's batch, a command's claim
ALLOWED = {"engine/storage/state_writes.py", "engine/master/store.py", "engine/master/claim.py"}
WRITE = re.compile(r"UPDATE\s+(task_instance|workflow_instance)\s+SET\b[^\"']*\bstate\s*=", re.IGNORECASE)


def test_no_other_module_writes_an_instance_s_or_an_attempt_s_state() -> None:
    found = {
        str(path.relative_to(ROOT))
        for path in (ROOT / "engine").rglob("*.py")
        for line in path.read_text(encoding="utf-8").splitlines()
        if WRITE.search(line)
    }
    assert found, "the pattern finds nothing: it is wrong"
    assert found <= ALLOWED, sorted(found - ALLOWED)


async def test_moves_are_checked_before_they_are_written_and_touch_only_rows_still_in_a_from_state(
    fresh_db: str,
) -> None:
    conn = await asyncpg.connect(fresh_db)
    try:
        _, failed = await _task(conn, int(TaskState.FAILURE), "w:1", "/l/1.log")
        _, running = await _task(conn, int(TaskState.RUNNING_EXECUTION), "w:1", "/l/2.log")
        _, done = await _task(conn, int(TaskState.SUCCESS), "w:1", "/l/3.log")
        with pytest.raises(InvalidTransition, match="SUCCESS -> FAILURE"):
            await move_tasks(conn, [done], [TaskState.SUCCESS], TaskState.FAILURE, "test")
        with pytest.raises(InvalidTransition, match="RUNNING_EXECUTION -> FORCED_SUCCESS"):
            await move_tasks(conn, [failed, running], [TaskState.FAILURE, TaskState.RUNNING_EXECUTION],
                             TaskState.FORCED_SUCCESS, "test")  # fmt: skip
        assert await move_tasks(conn, [failed, running], [TaskState.FAILURE, TaskState.KILL],
                                TaskState.FORCED_SUCCESS, "test") == [failed]  # fmt: skip
        states = dict(await conn.fetch("SELECT id, state FROM task_instance WHERE id = ANY($1)", [failed, running]))
        assert states == {failed: TaskState.FORCED_SUCCESS, running: TaskState.RUNNING_EXECUTION}
        assert await move_tasks(conn, [], [TaskState.FAILURE], TaskState.FORCED_SUCCESS, "nothing") == []

        project = await _project(conn, "sw", None)
        waiting = await _instance(conn, project, int(WorkflowState.SERIAL_WAIT), None, tasks=0)
        active = await _instance(conn, project, int(WorkflowState.RUNNING_EXECUTION), None, tasks=0)
        with pytest.raises(InvalidTransition, match="SERIAL_WAIT -> SUCCESS"):
            await move_workflows(conn, [waiting], [WorkflowState.SERIAL_WAIT], WorkflowState.SUCCESS, "test")
        moved = await move_workflows(conn, [waiting, active], [WorkflowState.SERIAL_WAIT], WorkflowState.STOP, "why")
        assert moved == [waiting]
        row = await conn.fetchrow("SELECT state, end_time, state_history FROM workflow_instance WHERE id = $1", waiting)
        assert row["state"] == WorkflowState.STOP and row["end_time"] is not None
        assert '"desc": "why"' in row["state_history"] and '"state": "STOP"' in row["state_history"]
        assert await conn.fetchval("SELECT state FROM workflow_instance WHERE id = $1", active) == (
            WorkflowState.RUNNING_EXECUTION
        )
    finally:
        await conn.close()
