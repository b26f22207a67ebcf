"""Serial execution and concurrency caps in the database: the per-workflow lock, admission at claim time,
and the wake-up of waiting runs (the decisions themselves are pure: :mod:`engine.concurrency.serial`).

Every step that reads or changes how many runs of a workflow are active or waiting runs inside a
transaction holding the workflow's advisory lock (:func:`lock`), so the rule holds across masters:

- the claim (``engine/master/claim.py``) admits a new or restarted run: RUN (owned by the claiming
  master), WAIT (state SERIAL_WAIT, no owner), or DISCARD (state STOP, with the reason in
  ``state_history``); SERIAL_PRIORITY also names the active runs to stop, which the claiming master asks
  their owners to do once the claim committed;
- an instance's final fenced write (``MasterStore.write``) wakes the oldest waiting runs when places are
  free, by inserting one RECOVER_SERIAL_WAIT command each in the same transaction: exactly once, and not
  at all if the write is fenced out;
- a RECOVER_SERIAL_WAIT claim takes its waiting instance (fresh epoch, RUNNING_EXECUTION); if the
  instance is no longer waiting (stopped by a user, superseded) it wakes the next one instead;
- :func:`repair` (from each master's failover sweep) wakes what should be awake and re-sends the stops a
  SERIAL_PRIORITY run is waiting for (a stop lost with a master that died).

A waiting run has a pending wake-up iff a RECOVER_SERIAL_WAIT command names it.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import Callable
from typing import Any

import asyncpg

from core import logs
from core.aio import BackgroundService
from engine.concurrency.serial import Decision, Mode, Rule, admit, superseded_reason, to_wake
from engine.states import WORKFLOW_FAILOVER, CommandType, WorkflowState, code_list
from engine.storage import state_writes
from engine.storage.failures import DB_FAILURES

log = logs.get(__name__)

#: advisory lock class of the per-workflow lock (two-key form: does not collide with one-key locks)
_LOCK_CLASS = 0x5E41
#: instance states counted as active runs: the unfinished ones a failover takes over
ACTIVE = code_list(WORKFLOW_FAILOVER)
WAIT = int(WorkflowState.SERIAL_WAIT)
STOP = int(WorkflowState.STOP)
RECOVER_SERIAL_WAIT = int(CommandType.RECOVER_SERIAL_WAIT)

_WAKE = (
    "INSERT INTO command (command_type, workflow_definition_code, workflow_definition_version, workflow_instance_id,"
    " failure_strategy, warning_type, warning_group_id, schedule_time, executor_id, workflow_instance_priority,"
    " worker_group, environment_code, dry_run)"
    " SELECT $2, workflow_definition_code, workflow_definition_version, id, failure_strategy, warning_type,"
    " warning_group_id, schedule_time, executor_id, workflow_instance_priority, worker_group, environment_code,"
    " dry_run FROM workflow_instance WHERE id = ANY($1::bigint[]) AND state = $3"
)


history = state_writes.history


async def lock(conn: asyncpg.Connection, code: int) -> None:
    """Inside a transaction: the workflow's lock, held until the transaction ends."""
    await conn.execute("SELECT pg_advisory_xact_lock($1, hashtext($2::text))", _LOCK_CLASS, str(code))


async def current_rule(conn: asyncpg.Connection, code: int) -> Rule:
    row = await conn.fetchrow("SELECT execution_type, max_active_runs FROM workflow_definition WHERE code = $1", code)
    return Rule(Mode.PARALLEL, 0) if row is None else Rule.of(row["execution_type"], row["max_active_runs"])


async def _runs(conn: asyncpg.Connection, code: int, exclude: int = 0) -> tuple[list[int], list[int], list[int]]:
    """(active ids, waiting ids without a wake-up, waiting ids with one), oldest first."""
    rows = await conn.fetch(
        "SELECT w.id, w.state, EXISTS (SELECT 1 FROM command c WHERE c.workflow_instance_id = w.id"
        " AND c.command_type = $3) AS woken FROM workflow_instance w"
        " WHERE w.workflow_definition_code = $1 AND w.id <> $2 AND (w.state = ANY($4::smallint[]) OR w.state = $5)"
        " ORDER BY w.id",
        code,
        exclude,
        RECOVER_SERIAL_WAIT,
        ACTIVE,
        WAIT,
    )
    active = [int(r["id"]) for r in rows if r["state"] != WAIT]
    waiting = [int(r["id"]) for r in rows if r["state"] == WAIT and not r["woken"]]
    woken = [int(r["id"]) for r in rows if r["state"] == WAIT and r["woken"]]
    return active, waiting, woken


async def admission(conn: asyncpg.Connection, code: int, rule: Rule, name: str, exclude: int = 0) -> Decision:
    """Under the workflow's lock (the caller holds it): what becomes of a new run (or the restart of
    instance ``exclude``). Supersedes the waiting runs a SERIAL_PRIORITY run replaces."""
    active, waiting, woken = await _runs(conn, code, exclude)
    return admit(rule, active, sorted([*woken, *waiting]), name)


async def supersede(conn: asyncpg.Connection, ids: list[int], newer: int) -> None:
    """Waiting runs replaced by a newer SERIAL_PRIORITY run: STOP, with the reason."""
    reason = superseded_reason(newer)
    await state_writes.move_workflows(conn, ids, [WorkflowState.SERIAL_WAIT], WorkflowState.STOP, reason)


async def wake(conn: asyncpg.Connection, code: int) -> list[int]:
    """Under the workflow's lock: queue a RECOVER_SERIAL_WAIT command for each waiting run that may
    start now (oldest first). Returns their ids."""
    active, waiting, woken = await _runs(conn, code)
    if not waiting:
        return []
    ids = to_wake(await current_rule(conn, code), len(active), len(woken), waiting)
    if ids:
        await conn.execute(_WAKE, ids, RECOVER_SERIAL_WAIT, WAIT)
        log.info("waiting runs woken", workflow_definition_code=code, workflow_instance_ids=ids)
    return ids


#: for an instance's final write made as one statement (engine/master/store.py ``_write_one``, ``$1`` the
#: instance): true when its end needs none of :func:`on_run_ended`'s work (its workflow limits no runs, as
#: ``Rule.of(...).limited`` says, and no run of it waits); false: end it in a transaction; NULL: no instance.
#: It reads with the statement's snapshot, so it also takes the instance row, without waiting: a row someone
#: holds (a rerun or force-success being queued, a takeover) is "not free", and the transaction, which reads
#: after that lock, ends the run (a claim may have made a run wait meanwhile)
RUN_END_FREE = (
    "SELECT NOT (coalesce(d.max_active_runs > 0 OR d.execution_type IN ("
    + ", ".join(str(int(m)) for m in Mode if m is not Mode.PARALLEL)
    + "), false) OR EXISTS (SELECT 1 FROM workflow_instance o WHERE o.workflow_definition_code"
    f" = w.workflow_definition_code AND o.state = {WAIT}))"
    " AND EXISTS (SELECT 1 FROM workflow_instance l WHERE l.id = $1 FOR NO KEY UPDATE SKIP LOCKED) AS free"
    " FROM workflow_instance w LEFT JOIN workflow_definition d ON d.code = w.workflow_definition_code"
    " WHERE w.id = $1"
)


async def on_run_ended(conn: asyncpg.Connection, instance_id: int) -> None:
    """Inside an instance's final fenced write: wake the runs of its workflow that may start now.

    Takes the workflow's lock whenever the workflow limits its runs, not only when a waiting run is
    visible: a claim may be making one wait right now, behind this very run (it read this run as still
    active); once the lock is ours that claim has committed, and :func:`wake` sees its waiting run."""
    row = await conn.fetchrow(
        "SELECT w.workflow_definition_code AS code, d.execution_type, d.max_active_runs, EXISTS (SELECT 1"
        " FROM workflow_instance o WHERE o.workflow_definition_code = w.workflow_definition_code AND o.state = $2)"
        " AS waiting FROM workflow_instance w LEFT JOIN workflow_definition d ON d.code = w.workflow_definition_code"
        " WHERE w.id = $1",
        instance_id,
        WAIT,
    )
    if row is None:
        return
    limited = row["execution_type"] is not None and Rule.of(row["execution_type"], row["max_active_runs"]).limited
    if limited or row["waiting"]:
        await lock(conn, int(row["code"]))
        await wake(conn, int(row["code"]))


async def claim_woken(conn: asyncpg.Connection, me: str, cmd: asyncpg.Record) -> asyncpg.Record | None:
    """Inside the claim (the workflow's lock held): take the waiting instance a RECOVER_SERIAL_WAIT
    command names. None when it no longer waits; then the next waiting run is woken instead."""
    row = await conn.fetchrow(
        "UPDATE workflow_instance SET host = $2, epoch = nextval('workflow_epoch_seq'),"
        f" state = {int(WorkflowState.RUNNING_EXECUTION)}, start_time = now(),"
        " end_time = NULL, update_time = now(), state_history = state_history || $4::jsonb"
        " WHERE id = $1 AND state = $3 RETURNING *",
        cmd["workflow_instance_id"],
        me,
        WAIT,
        history(WorkflowState.RUNNING_EXECUTION, "woken: a place is free"),
    )
    if row is None:
        await wake(conn, int(cmd["workflow_definition_code"]))
    return row


async def repair(pool: asyncpg.Pool) -> list[int]:
    """Wake the waiting runs that may start (a wake-up missed), and return the active runs that a
    waiting SERIAL_PRIORITY run is waiting for, to be stopped (again)."""
    codes = await pool.fetch(
        "SELECT DISTINCT workflow_definition_code AS code FROM workflow_instance WHERE state = $1", WAIT
    )
    stops: list[int] = []
    for r in codes:
        code = int(r["code"])
        async with pool.acquire() as conn, conn.transaction():
            await lock(conn, code)
            await wake(conn, code)
            rule = await current_rule(conn, code)
            if rule.mode is Mode.SERIAL_PRIORITY:
                active, waiting, woken = await _runs(conn, code)
                if waiting or woken:
                    excess = max(0, len(active) - rule.limit + 1)
                    stops += active[:excess]
    return stops


def instance_columns(decision: Decision, values: dict[str, Any], me: str) -> dict[str, Any]:
    """The new instance's columns for a decision: owned and running, waiting without an owner, or
    discarded (STOP) with the reason."""
    out = dict(values)
    if decision.verdict.value == "run":
        out["host"] = me
        return out
    out["host"] = None
    if decision.verdict.value == "wait":
        out["state"] = WAIT
        out["state_history"] = history(WorkflowState.SERIAL_WAIT, decision.reason)
    else:
        out["state"] = STOP
        out["end_time"] = dt.datetime.now(dt.UTC)
        out["state_history"] = history(WorkflowState.STOP, decision.reason)
    return out


class SerialRepair(BackgroundService):
    """Every ``interval`` seconds: :func:`repair`, and the stops it finds go to ``stop``."""

    task_name = "serial-repair"

    def __init__(self, pool: asyncpg.Pool, interval: float, stop: Callable[[list[int]], None]) -> None:
        self.pool = pool
        self.interval = interval
        self.stop = stop

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            with contextlib.suppress(*DB_FAILURES):
                stops = await repair(self.pool)
                if stops:
                    self.stop(stops)
