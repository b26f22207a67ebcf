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
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg

from engine import logs
from engine.master.states import RESTART_FROM, CommandType
from engine.storage.failures import transient

log = logs.get(__name__)

# RECOVER_SUSPENDED_PROCESS: take a paused / stopped instance back with a fresh epoch; its KILL
# attempts are re-run by the actor (DolphinScheduler re-inits the KILL tasks). The instance records
# the command that last (re)started it.
_RESTART = (
    "UPDATE workflow_instance SET host = $2, epoch = nextval('workflow_epoch_seq'), state = 1, end_time = NULL,"
    " restart_time = now(), run_times = run_times + 1, command_id = $3, command_type = $4,"
    " history_cmd = concat_ws(',', history_cmd, $5::text), update_time = now(){extra}"
    " WHERE id = $1 AND state = ANY($6::smallint[]) RETURNING *"
)
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
    pool: asyncpg.Pool, me: str, ids: Sequence[int], build: Any, errors: dict[int, str]
) -> tuple[list[tuple[asyncpg.Record, asyncpg.Record]], int]:
    """Claim the commands ``ids`` for master ``me`` (see the module's docstring).

    ``build(command) -> dict`` gives the instance columns; ``errors`` maps command ids already known
    not to become instances to the reason. Returns the (command, instance row) pairs and how many
    commands went to error_command.
    """
    try:
        return await _claim(pool, me, ids, build, errors, careful=False)
    except _PoisonCommand as exc:
        log.warning("a command failed while it was claimed; claiming its page one command at a time",
                    command_id=exc.command_id, error=str(exc.__cause__))  # fmt: skip
        return await _claim(pool, me, ids, build, errors, careful=True)


async def _claim(
    pool: asyncpg.Pool, me: str, ids: Sequence[int], build: Any, errors: dict[int, str], careful: bool
) -> tuple[list[tuple[asyncpg.Record, asyncpg.Record]], int]:
    created: list[tuple[asyncpg.Record, asyncpg.Record]] = []
    failed = 0
    async with pool.acquire() as conn, conn.transaction():
        commands = await conn.fetch("DELETE FROM command WHERE id = ANY($1) RETURNING *", list(ids))
        for cmd in commands:
            reason = errors.get(cmd["id"])
            row: asyncpg.Record | None = None
            if reason is None:
                try:
                    if careful:
                        async with conn.transaction():  # a savepoint: a failure undoes this command only
                            row, reason = await _instance(conn, me, cmd, build)
                    else:
                        row, reason = await _instance(conn, me, cmd, build)
                except Exception as exc:
                    if transient(exc):
                        raise
                    if not careful:
                        raise _PoisonCommand(cmd["id"]) from exc
                    reason = f"cannot create the workflow instance: {_describe(exc)}"
            if row is not None:
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
    conn: asyncpg.Connection, me: str, cmd: asyncpg.Record, build: Any
) -> tuple[asyncpg.Record | None, str | None]:
    """Inside the claim's transaction: the instance a command creates (or takes back), or why not."""
    if cmd["workflow_instance_id"]:
        ctype = CommandType(cmd["command_type"])
        extra = _ON_INSTANCE[ctype]
        states = sorted(int(s) for s in RESTART_FROM[ctype])
        wid = cmd["workflow_instance_id"]
        row = await conn.fetchrow(_RESTART.format(extra=extra), wid, me, cmd["id"], int(ctype), ctype.name, states)
        if row is None:
            return None, f"workflow instance {wid} is not in a state {ctype.name} applies to (any more)"
        if ctype == CommandType.REPEAT_RUNNING:
            await conn.execute("UPDATE task_instance SET flag = 0 WHERE workflow_instance_id = $1 AND flag = 1", wid)
        return row, None
    try:
        values: dict[str, Any] = build(cmd)
    except Exception as exc:
        return None, _describe(exc)
    values["host"] = me
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
    return row, None
