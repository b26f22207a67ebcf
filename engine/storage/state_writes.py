"""State written outside a workflow's actor, through one checked path.

The actor's own changes are checked by its pure core (engine/master/workflow.py) and written in its fenced
batch (engine/master/store.py). A few writers change states of instances no actor runs, or of attempts
whose actor is gone: a failover marking the lost attempts NEED_FAULT_TOLERANCE, the API forcing a failed
attempt to success or stopping a run that waits for its place, a SERIAL_PRIORITY run superseding the runs
it replaces. Each goes through :func:`move_tasks` / :func:`move_workflows`: every (from, to) pair is
checked against the transition tables of engine/states.py before the statement runs, and the statement
changes only rows still in one of the ``from`` states (a row that moved meanwhile is left alone and not
returned). tests/test_state_writes.py fails on an ``UPDATE ... SET state`` of these tables elsewhere.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Collection, Sequence

import asyncpg

from engine.states import TaskState, WorkflowState, check_task, check_workflow, code_list


async def move_tasks(
    conn: asyncpg.Connection,
    ids: Sequence[int],
    old: Collection[TaskState],
    new: TaskState,
    cause: str,
) -> list[int]:
    """Attempts ``ids`` still in one of ``old`` move to ``new``; the ids that moved."""
    for state in old:
        check_task(list(ids), state, new, cause)
    if not ids:
        return []
    rows = await conn.fetch(
        "UPDATE task_instance SET state = $3, update_time = now()"
        " WHERE id = ANY($1::bigint[]) AND state = ANY($2::smallint[]) RETURNING id",
        list(ids),
        code_list(old),
        int(new),
    )
    return [int(r["id"]) for r in rows]


def history(state: WorkflowState, desc: str) -> str:
    """A ``state_history`` entry (as the actor appends them), JSON for ``state_history || $n::jsonb``."""
    return json.dumps([{"time": dt.datetime.now(dt.UTC).isoformat(), "state": state.name, "desc": desc}])


async def move_workflows(
    conn: asyncpg.Connection,
    ids: Sequence[int],
    old: Collection[WorkflowState],
    new: WorkflowState,
    cause: str,
) -> list[int]:
    """Instances ``ids`` still in one of ``old`` move to ``new`` (``cause`` in their state history; a
    finished state sets their end time); the ids that moved."""
    for state in old:
        check_workflow(list(ids), state, new, cause)
    if not ids:
        return []
    rows = await conn.fetch(
        "UPDATE workflow_instance SET state = $3, update_time = now(),"
        " end_time = CASE WHEN $4 THEN now() ELSE end_time END, state_history = state_history || $5::jsonb"
        " WHERE id = ANY($1::bigint[]) AND state = ANY($2::smallint[]) RETURNING id",
        list(ids),
        code_list(old),
        int(new),
        new.finished,
        history(new, cause),
    )
    return [int(r["id"]) for r in rows]
