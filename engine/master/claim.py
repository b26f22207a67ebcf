"""Claiming commands: one page of a master's slot turned into workflow instances it owns.

One transaction deletes the page's commands (a row another master took is simply not returned) and,
per command, inserts its instance with ``host = me`` and a fresh epoch, takes back the instance it
names (RECOVER_SUSPENDED_PROCESS, START_FAILURE_TASK_PROCESS, REPEAT_RUNNING), or moves it to
``error_command`` with the reason (invariant 1: nothing vanishes).

A poison command (its instance cannot be built, or the database refuses its rows: a value too long, a
constraint) must not take its page down with it, or the poller would retry the page forever and
starve the slot: the page is first claimed without savepoints (the common case, one round trip less
per command), and when a statement of one command fails, claimed again with a savepoint around each
command. Only a lost connection or a failing server (:func:`engine.storage.failures.transient`)
fails the whole page, which the poller tries again.

A page of plain starts (new instances only: no serial rule, no sub-workflow, no command known bad; the
common case, from the API, the scheduler and backfills) is claimed in one statement that commits itself: the
DELETE of the page's commands and the INSERT of the instances of those it deleted, their columns as one typed
array each (one statement text whatever the page's size, prepared once), and the first attempts of the runs
they start (engine.master.first_turn), joined to the instances inserted. Any refusal by the database sends
the page down the transaction above, which finds the command at fault (and writes no attempt: the actors do).

Serial execution and concurrency caps (:mod:`engine.concurrency.serial_sql`): a command of a workflow with a
limited rule is admitted under the workflow's lock (taken up front for the whole page, in code order, so
two claiming masters never wait on each other): its instance runs (``host = me``), waits (SERIAL_WAIT,
no owner) or is discarded (STOP with the reason); a restart that would be discarded goes to
``error_command`` with the reason instead. RECOVER_SERIAL_WAIT takes a waiting instance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import asyncpg

from core import logs
from engine.concurrency import serial_sql
from engine.concurrency.serial import Rule, Verdict
from engine.master import attempt_rows
from engine.master.attempt_rows import NewAttempt
from engine.states import RESTART_FROM, CommandType, WorkflowState
from engine.storage.failures import transient

log = logs.get(__name__)

# RECOVER_SUSPENDED_PROCESS: take a paused / stopped instance back with a fresh epoch; its KILL
# attempts are re-run by the actor (DolphinScheduler re-inits the KILL tasks). The instance records
# the command that last (re)started it.
_RESTART = (
    "UPDATE workflow_instance SET host = $2, epoch = nextval('workflow_epoch_seq'), state = $7, end_time = NULL,"
    " restart_time = now(), run_times = run_times + 1, command_id = $3, command_type = $4,"
    " history_cmd = concat_ws(',', history_cmd, $5::text), update_time = now(),"
    " state_history = state_history || coalesce($8::jsonb, '[]'){extra}"
    " WHERE id = $1 AND state = ANY($6::smallint[]) RETURNING *"
)
#: a RECOVER_SERIAL_WAIT whose instance stopped waiting: consumed, nothing to record (the instance says why)
_NO_LONGER_WAITING = "no longer waiting"
#: command id -> (the rule of the workflow version it runs, the workflow's name), for limited rules only
Rules = dict[int, tuple[Rule, str]]
#: command type -> extra SET clauses; the states each applies to are states.RESTART_FROM
_ON_INSTANCE = {
    CommandType.RECOVER_SUSPENDED_PROCESS: "",  # a paused or stopped instance
    CommandType.START_FAILURE_TASK_PROCESS: "",  # a failed instance, from its failed tasks
    # any finished instance, from scratch (same instance, same schedule time)
    CommandType.REPEAT_RUNNING: ", start_time = now(), var_pool = '[]'",
}


class _PoisonCommand(Exception):
    """A statement of one command failed during a claim without savepoints (the transaction is lost)."""

    def __init__(self, command_id: int) -> None:
        super().__init__(f"command {command_id}")
        self.command_id = command_id


def _describe(exc: BaseException) -> str:
    """A refusal's reason: a ValueError's message is written for users; anything else names its type."""
    if isinstance(exc, ValueError | asyncpg.PostgresError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


async def claim(
    pool: asyncpg.Pool,
    me: str,
    ids: Sequence[int],
    build: Any,
    errors: dict[int, str],
    rules: Rules | None = None,
    stops: list[int] | None = None,
    polled: Sequence[asyncpg.Record] = (),
    firsts: Mapping[int, Sequence[NewAttempt]] | None = None,
) -> tuple[list[tuple[asyncpg.Record, asyncpg.Record]], int]:
    """Claim the commands ``ids`` for master ``me`` (see the module's docstring).

    ``polled``: the rows of those commands as the poll read them (a command never changes once queued),
    for the one-statement claim of a page of plain starts. ``firsts``: by command id, the first attempts of
    the run a plain start becomes (engine.master.first_turn), written by that statement with the instance:
    its row then carries their ids and task codes as ``first_task_ids`` and ``first_task_codes``.

    ``build(command) -> dict`` gives the instance columns; ``errors`` maps command ids already known
    not to become instances to the reason; ``rules`` the commands whose workflow limits its runs.
    Returns the (command, instance row) pairs this master now drives (not the waiting or discarded
    ones) and how many commands went to error_command; ``stops`` receives the active instances a
    SERIAL_PRIORITY run asks to stop (to be sent once this returns: the claim has committed).
    """
    rules = rules or {}
    if polled and not errors and not rules:
        fast = await _claim_starts(pool, me, polled, build, firsts or {})
        if fast is not None:
            return fast, 0
    out: list[int] = []
    try:
        result = await _claim(pool, me, ids, build, errors, rules, out, careful=False)
    except _PoisonCommand as exc:
        log.warning("a command failed while it was claimed; claiming its page one command at a time",
                    command_id=exc.command_id, error=str(exc.__cause__))  # fmt: skip
        out.clear()
        result = await _claim(pool, me, ids, build, errors, rules, out, careful=True)
    if stops is not None:
        stops.extend(out)
    return result


#: workflow_instance column -> its type without modifier (a value too long for a varchar(n) column is then
#: refused by the INSERT, as a single row's would be, not cut by a cast): read once, and again when a column
#: is not there (a schema upgraded under a running master)
_COLUMN_TYPES: dict[str, str] = {}


async def _column_types(conn: asyncpg.Connection, cols: list[str]) -> dict[str, str]:
    if any(c not in _COLUMN_TYPES for c in cols):
        _COLUMN_TYPES.clear()
        rows = await conn.fetch(
            "SELECT attname, format_type(atttypid, NULL) AS type FROM pg_attribute"
            " WHERE attrelid = 'workflow_instance'::regclass AND attnum > 0 AND NOT attisdropped"
        )
        _COLUMN_TYPES.update({r["attname"]: r["type"] for r in rows})
    return _COLUMN_TYPES


async def _claim_starts(
    pool: asyncpg.Pool,
    me: str,
    polled: Sequence[asyncpg.Record],
    build: Any,
    firsts: Mapping[int, Sequence[NewAttempt]],
) -> list[tuple[asyncpg.Record, asyncpg.Record]] | None:
    """A page of plain starts in one statement (the module's docstring), with the ``firsts`` of its commands;
    None: the page is not only plain starts, or the database refused one of them (nothing was written: the
    statement is atomic)."""
    commands = sorted(polled, key=lambda c: int(c["id"]))
    values: list[dict[str, Any]] = []
    for cmd in commands:
        if cmd["workflow_instance_id"] or cmd["command_type"] == CommandType.RECOVER_SERIAL_WAIT:
            return None
        try:
            row = build(cmd)
        except Exception:
            return None  # refused: the transaction records why
        if row.get("is_sub_workflow"):
            return None  # its relation row is written with it
        values.append({**row, "host": me})
    cols = list(values[0])
    if any(list(v) != cols for v in values):
        return None
    async with pool.acquire() as conn:
        types = await _column_types(conn, cols)
        if any(c not in types for c in cols):
            return None
        arrays = ", ".join(f"${i}::{types[c]}[]" for i, c in enumerate(cols, start=2))
        insert = (
            f"INSERT INTO workflow_instance ({', '.join(cols)}, epoch)"
            f" SELECT {', '.join(f'v.{c}' for c in cols)}, nextval('workflow_epoch_seq')"
            f" FROM unnest({arrays}) AS v({', '.join(cols)}) WHERE v.command_id IN (SELECT id FROM d)"
            " ORDER BY v.command_id RETURNING *"
        )
        args: list[Any] = [[int(c["id"]) for c in commands], *([v[c] for v in values] for c in cols)]
        attempts = [(int(c["id"]), a) for c in commands for a in firsts.get(int(c["id"]), ())]
        if attempts:
            # each instance's first attempts, keyed by its command
            tasks = attempt_rows.insert_sql(len(args) + 1, "i.id", "JOIN i ON i.command_id = u.key")
            args += [[key for key, _ in attempts], *attempt_rows.arrays([a for _, a in attempts])]
            sql = (
                f"WITH d AS (DELETE FROM command WHERE id = ANY($1::bigint[]) RETURNING id), i AS ({insert}),"
                f" t AS ({tasks} RETURNING id, workflow_instance_id, task_code)"
                " SELECT i.*, coalesce(f.ids, '{}') AS first_task_ids, coalesce(f.codes, '{}') AS first_task_codes"
                " FROM i LEFT JOIN (SELECT workflow_instance_id, array_agg(id ORDER BY id) AS ids,"
                " array_agg(task_code ORDER BY id) AS codes FROM t GROUP BY workflow_instance_id) f"
                " ON f.workflow_instance_id = i.id"
            )
        else:
            sql = f"WITH d AS (DELETE FROM command WHERE id = ANY($1::bigint[]) RETURNING id) {insert}"
        try:
            rows = await conn.fetch(sql, *args)
        except Exception as exc:
            if transient(exc):
                raise
            log.info("a page of starts refused as a whole; claiming it in a transaction", error=str(exc))
            return None
    by_command = {int(r["command_id"]): r for r in rows}
    return [(cmd, by_command[int(cmd["id"])]) for cmd in commands if int(cmd["id"]) in by_command]


async def _claim(
    pool: asyncpg.Pool,
    me: str,
    ids: Sequence[int],
    build: Any,
    errors: dict[int, str],
    rules: Rules,
    stops: list[int],
    careful: bool,
) -> tuple[list[tuple[asyncpg.Record, asyncpg.Record]], int]:
    created: list[tuple[asyncpg.Record, asyncpg.Record]] = []
    failed = 0
    async with pool.acquire() as conn, conn.transaction():
        deleted = await conn.fetch("DELETE FROM command WHERE id = ANY($1) RETURNING *", list(ids))
        commands = sorted(deleted, key=lambda c: int(c["id"]))  # runs of one workflow are admitted in order
        serial = {
            int(c["workflow_definition_code"])
            for c in commands
            if c["id"] not in errors and (c["id"] in rules or c["command_type"] == CommandType.RECOVER_SERIAL_WAIT)
        }
        for code in sorted(serial):
            await serial_sql.lock(conn, code)
        for cmd in commands:
            reason = errors.get(cmd["id"])
            row: asyncpg.Record | None = None
            if reason is None:
                try:
                    if careful:
                        async with conn.transaction():  # a savepoint: a failure undoes this command only
                            row, reason = await _instance(conn, me, cmd, build, rules.get(cmd["id"]), stops)
                    else:
                        row, reason = await _instance(conn, me, cmd, build, rules.get(cmd["id"]), stops)
                except Exception as exc:
                    if transient(exc):
                        raise
                    if not careful:
                        raise _PoisonCommand(cmd["id"]) from exc
                    reason = f"cannot create the workflow instance: {_describe(exc)}"
            if reason is _NO_LONGER_WAITING:
                log.info("woken run no longer waits; the next one was woken instead",
                         workflow_instance_id=cmd["workflow_instance_id"])  # fmt: skip
                continue
            if row is not None:
                if row["host"] == me:  # not a run that waits or was discarded
                    created.append((cmd, row))
                continue
            await conn.execute(
                "INSERT INTO error_command SELECT (c).*, $2 FROM (SELECT $1::command AS c) s",
                tuple(cmd.values()),
                reason or "cannot be converted",
            )
            failed += 1
    return created, failed


async def _instance(
    conn: asyncpg.Connection,
    me: str,
    cmd: asyncpg.Record,
    build: Any,
    limited: tuple[Rule, str] | None,
    stops: list[int],
) -> tuple[asyncpg.Record | None, str | None]:
    """Inside the claim's transaction: the instance a command creates (or takes back), or why not."""
    if cmd["command_type"] == CommandType.RECOVER_SERIAL_WAIT:
        row = await serial_sql.claim_woken(conn, me, cmd)
        if row is None:  # stopped or superseded while its wake-up was queued: its own record says so
            return None, _NO_LONGER_WAITING
        return row, None
    code = int(cmd["workflow_definition_code"])
    if cmd["workflow_instance_id"]:
        ctype = CommandType(cmd["command_type"])
        extra = _ON_INSTANCE[ctype]
        states = sorted(int(s) for s in RESTART_FROM[ctype])
        wid = cmd["workflow_instance_id"]
        host, state, note = me, int(WorkflowState.RUNNING_EXECUTION), None
        decision = None
        if limited is not None:
            decision = await serial_sql.admission(conn, code, limited[0], limited[1], exclude=wid)
            if decision.verdict is Verdict.DISCARD:
                return None, f"not restarted: {decision.reason}"
            if decision.verdict is Verdict.WAIT:
                host, state = None, serial_sql.WAIT
                note = serial_sql.history(WorkflowState.SERIAL_WAIT, decision.reason)
        sql = _RESTART.format(extra=extra)
        row = await conn.fetchrow(sql, wid, host, cmd["id"], int(ctype), ctype.name, states, state, note)
        if row is None:
            return None, f"workflow instance {wid} is not in a state {ctype.name} applies to (any more)"
        if ctype == CommandType.REPEAT_RUNNING:
            await conn.execute("UPDATE task_instance SET flag = 0 WHERE workflow_instance_id = $1 AND flag = 1", wid)
        if decision is not None:
            await serial_sql.supersede(conn, list(decision.supersede), wid)
            stops.extend(decision.stop)
        return row, None
    try:
        values: dict[str, Any] = build(cmd)
    except Exception as exc:
        return None, _describe(exc)
    values["host"] = me
    decision = None
    if limited is not None:
        decision = await serial_sql.admission(conn, code, limited[0], limited[1])
        values = serial_sql.instance_columns(decision, values, me)
    cols = list(values)
    marks = ", ".join(f"${i}" for i in range(1, len(cols) + 1))
    row = await conn.fetchrow(
        f"INSERT INTO workflow_instance ({', '.join(cols)}, epoch) VALUES ({marks},"
        " nextval('workflow_epoch_seq')) RETURNING *",
        *values.values(),
    )
    if values.get("is_sub_workflow"):
        await conn.execute(
            "UPDATE sub_workflow_relation SET workflow_instance_id = $2 WHERE command_id = $1", cmd["id"], row["id"]
        )
    if decision is not None:
        await serial_sql.supersede(conn, list(decision.supersede), int(row["id"]))
        stops.extend(decision.stop)
        if decision.verdict is not Verdict.RUN:
            log.info("run not started now", workflow_instance_id=row["id"], verdict=decision.verdict.value,
                     reason=decision.reason)  # fmt: skip
    return row, None
