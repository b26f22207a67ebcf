"""Every SQL statement the master runs, in one place (but the claim's: engine/master/claim.py).

Hot paths use asyncpg directly with prepared statements (on the schema the SQLAlchemy tables of
engine/storage define, from which schema.sql is generated).

Fencing (invariant 2): every write an actor makes goes through :meth:`MasterStore.write`, one
transaction that first locks the instance row ``WHERE id = $1 AND host = $me AND epoch = $epoch``.
If the row is no longer ours (failover bumped the epoch, or moved the host), nothing is written and
:class:`FencedOut` is raised; the lock also makes a concurrent takeover wait for our commit.

Outages: a write whose connection is lost before COMMIT wrote nothing and is sent again
(:meth:`MasterStore.write_retrying`); one lost while committing may have applied, so it raises
:class:`CommitUnknown` instead and the instance is recovered from what the database holds (a batch
sent twice could insert a second alert or a second backfill command).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import functools
import json
import random
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from core import logs
from core.errors import StorageError
from engine.concurrency import serial_sql, task_groups_sql
from engine.master import attempt_rows
from engine.master.attempt_rows import NewAttempt
from engine.master.claim import Rules, claim
from engine.master.workflow_messages import ALERT_FAULT_TOLERANCE, RaiseAlert
from engine.resources import catalog
from engine.resources.refs import MAIN_FIELDS
from engine.scheduling.backfill import BACKFILL_ID, INDEX
from engine.states import (
    TASK_ACTIVE,
    TASK_FAILED_OUTCOMES,
    TASK_SUCCEEDED,
    WORKFLOW_FAILOVER,
    WORKFLOW_FINISHED,
    CommandType,
    TaskState,
    WorkflowState,
    code_list,
)
from engine.storage import state_writes
from engine.storage.failures import CONNECTION_LOST
from engine.tasks.registry import LOGIC_TYPES

log = logs.get(__name__)

#: a transaction PostgreSQL rolled back whole to resolve a conflict: nothing applied, safe to send again
ROLLED_BACK = (asyncpg.DeadlockDetectedError, asyncpg.SerializationError)
#: a master's address that may be written into SQL text as it is (a host name or IP address and a port)
_PLAIN_ADDRESS = re.compile(r"[A-Za-z0-9.:_\[\]-]+")


class FencedOut(StorageError):
    """The workflow instance is no longer owned by this master at this epoch."""


class CommitUnknown(StorageError):
    """The connection was lost once COMMIT was under way: the write may or may not have applied, so it
    must not simply be sent again (a second alert, a second backfill command); the database decides."""


def ms_to_dt(ms: int | None) -> dt.datetime | None:
    if not ms:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)


@dataclass
class TaskUpdate:
    task_instance_id: int
    state: int
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass
class WriteBatch:
    workflow_state: int | None = None
    workflow_finished: bool = False
    workflow_var_pool: list[dict[str, Any]] | None = None
    #: entries for the instance's state history ({time, state, desc}), appended with the state
    workflow_history: list[dict[str, str]] = field(default_factory=list)
    new_attempts: list[NewAttempt] = field(default_factory=list)
    updates: list[TaskUpdate] = field(default_factory=list)
    alerts: list[RaiseAlert] = field(default_factory=list)
    #: the next COMPLEMENT_DATA command of a serial backfill: its command_param (which names the backfill
    #: row and the index of its date) and, for a chain of the older format, the dates to keep in a new row
    next_backfill: tuple[dict[str, Any], list[dt.datetime]] | None = None
    #: new attempts that take task group slots: (index in new_attempts, group id, priority, slots)
    group_requests: list[tuple[int, int, int, int]] = field(default_factory=list)
    #: set by the write: the task instance ids of the grouped new attempts admitted at once
    admitted: set[int] = field(default_factory=set)
    #: False when no task of the instance's definition names a task group: its ended attempts hold no
    #: slot, so the write skips releasing them (a round trip per batch)
    grouped: bool = True

    def empty(self) -> bool:
        return (
            self.workflow_state is None
            and not self.new_attempts
            and not self.updates
            and not self.alerts
            and self.workflow_var_pool is None
        )


#: the current attempt (flag = 1) of every task an instance has started, as Attempt.from_row reads it
_CURRENT_ATTEMPTS = (
    "SELECT id, task_code, task_type, attempt, retry_times, state, host, var_pool, submit_time, start_time,"
    " end_time, log_tail FROM task_instance WHERE workflow_instance_id = $1 AND flag = 1"
)
#: the current attempts of instances ``$1`` (an array), with the instance each belongs to
_CURRENT_ATTEMPTS_OF_MANY = (
    "SELECT workflow_instance_id, id, task_code, task_type, attempt, retry_times, state, host, var_pool,"
    " submit_time, start_time, end_time, log_tail FROM task_instance"
    " WHERE workflow_instance_id = ANY($1::bigint[]) AND flag = 1"
)
#: instance states a failover takes over (DolphinScheduler's NEED_FAILOVER_STATES)
_FAILOVER_STATES = code_list(WORKFLOW_FAILOVER)
#: task states that may still be running somewhere (SUBMITTED, RUNNING, DELAY, DISPATCH)
_ACTIVE_STATES = code_list(TASK_ACTIVE)

# A serial backfill goes on with the next date: a new COMPLEMENT_DATA command like this instance's, whose
# schedule time is date $4 (0-based) of backfill row $3, in the same transaction as the instance's final
# state (so exactly once, and fenced).
_NEXT_BACKFILL = (
    "INSERT INTO command (command_type, workflow_definition_code, workflow_definition_version, command_param,"
    " task_depend_type, failure_strategy, warning_type, warning_group_id, schedule_time, executor_id,"
    " workflow_instance_priority, worker_group, environment_code, dry_run)"
    f" SELECT {int(CommandType.COMPLEMENT_DATA)}, w.workflow_definition_code, w.workflow_definition_version,"
    " $2::jsonb, w.task_depend_type,"
    " w.failure_strategy, w.warning_type, w.warning_group_id, b.dates[$4::int + 1], w.executor_id,"
    " w.workflow_instance_priority, w.worker_group, w.environment_code, w.dry_run"
    " FROM workflow_instance w JOIN backfill b ON b.id = $3 WHERE w.id = $1"
)
# A chain of the older format (its dates in the command) keeps its remaining dates in a backfill row.
_KEEP_BACKFILL = (
    "INSERT INTO backfill (workflow_definition_code, dates)"
    " SELECT workflow_definition_code, $2::timestamptz[] FROM workflow_instance WHERE id = $1 RETURNING id"
)

#: the SQL type of each task field an update sets (the arrays of a batched update are cast to them)
_TASK_FIELD_TYPES = {
    "host": "text", "pid": "int", "log_path": "text", "execute_path": "text", "start_time": "timestamptz",
    "end_time": "timestamptz", "exit_code": "int", "var_pool": "jsonb", "app_id": "text", "app_link": "text",
    "log_tail": "text",
}  # fmt: skip
_TASK_FIELDS = frozenset(_TASK_FIELD_TYPES)


@dataclass(frozen=True)
class RunContext:
    """The per-run facts of a dispatch (:meth:`MasterStore.run_context`)."""

    #: ``{prop, value, secret}`` as TaskDispatch carries them, by name
    project_params: list[dict[str, Any]] = field(default_factory=list)
    #: environment code -> its shell lines
    environments: dict[int, str] = field(default_factory=dict)

    def environment_config(self, code: int) -> str:
        return self.environments.get(code, "") if code >= 0 else ""


class MasterStore:
    def __init__(self, pool: asyncpg.Pool, me: str) -> None:
        self.pool = pool
        self.me = me
        #: this master's address as an SQL literal, for the write's first round trip (None: the address has
        #: characters other than those of a host and port, and the lock goes as a statement of its own)
        self._me_literal = f"'{me}'" if _PLAIN_ADDRESS.fullmatch(me) else None

    # -- commands ---------------------------------------------------------------------------------

    async def fetch_commands(self, index: int, count: int, limit: int) -> list[asyncpg.Record]:
        return await self.pool.fetch(
            "SELECT * FROM command WHERE id % $1 = $2 ORDER BY workflow_instance_priority, id LIMIT $3",
            count,
            index,
            limit,
        )

    async def claim(
        self,
        ids: Sequence[int],
        build: Any,
        errors: dict[int, str],
        rules: Rules | None = None,
        stops: list[int] | None = None,
        polled: Sequence[asyncpg.Record] = (),
        firsts: Mapping[int, Sequence[NewAttempt]] | None = None,
    ) -> tuple[list[tuple[asyncpg.Record, asyncpg.Record]], int]:
        """:func:`engine.master.claim.claim`: commands into instances owned by this master."""
        return await claim(self.pool, self.me, ids, build, errors, rules, stops, polled, firsts)

    # -- fenced actor writes ----------------------------------------------------------------------

    async def _lock_owned(self, conn: asyncpg.Connection, instance_id: int, epoch: int) -> None:
        """Inside a transaction: lock the instance row if it is still ours at ``epoch``, else FencedOut."""
        owned = await conn.fetchval(
            "SELECT 1 FROM workflow_instance WHERE id = $1 AND host = $2 AND epoch = $3 FOR NO KEY UPDATE",
            instance_id,
            self.me,
            epoch,
        )
        if not owned:
            raise FencedOut(f"workflow instance {instance_id} is no longer owned by {self.me} at epoch {epoch}")

    async def write(self, instance_id: int, epoch: int, batch: WriteBatch) -> list[int]:
        """Apply ``batch`` if the instance is still ours; returns the ids of the new attempts.

        A lost connection before COMMIT leaves nothing written (the caller may send the batch again);
        one while committing raises :class:`CommitUnknown`; one while the pool takes the connection back
        after the commit does not matter. A batch of task updates and first attempts only (every step of a
        chain, every RUNNING and dispatch report) is one statement that fences, writes and commits itself
        (:meth:`_write_one`): a connection lost while it runs raises :class:`CommitUnknown`."""
        applied = committed = False
        ids: list[int] = []
        try:
            async with self.pool.acquire() as conn:
                written: list[int] | None = None
                if _one_statement(batch):
                    applied = True  # sent from here on: it commits itself, the outcome of a lost one is unknown
                    written = await self._write_one(conn, instance_id, epoch, batch)
                    applied = written is not None  # None: nothing written, the run's end needs the transaction
                if written is not None:
                    ids = written
                elif self._me_literal is None:
                    async with conn.transaction():
                        await self._lock_owned(conn, instance_id, epoch)
                        ids = await self._apply(conn, instance_id, batch)
                        applied = True
                else:
                    try:
                        await self._begin_owned(conn, instance_id, epoch)
                        ids = await self._apply(conn, instance_id, batch)
                        applied = True
                        await conn.execute("COMMIT")
                    except BaseException as exc:
                        # a COMMIT that failed leaves no transaction, a lost connection none to end; else it
                        # is rolled back here (if that fails too, the pool's release rolls it back)
                        if not applied and not isinstance(exc, CONNECTION_LOST):
                            with contextlib.suppress(Exception):
                                if conn.is_in_transaction():
                                    await conn.execute("ROLLBACK")
                        raise
                committed = True
        except CONNECTION_LOST as exc:
            if committed:
                log.info("connection lost after a commit", error=str(exc))
                return ids
            if applied:
                raise CommitUnknown(f"instance {instance_id}: connection lost while committing: {exc}") from exc
            raise
        return ids

    async def write_retrying(
        self, instance_id: int, epoch: int, batch: WriteBatch, max_delay: float = 5.0
    ) -> list[int]:
        """:meth:`write`, sent again (with doubling backoff) while the connection is lost before COMMIT,
        as when PostgreSQL restarts, or when the server rolled the transaction back as a deadlock's or a
        serialization conflict's victim. :class:`FencedOut`, :class:`CommitUnknown` and server-side errors
        propagate: the actor then ends and the master recovers the instance from what committed."""
        delay = 0.1
        while True:
            try:
                return await self.write(instance_id, epoch, batch)
            except CONNECTION_LOST as exc:
                log.warning("database write failed; retrying", error=str(exc), retry_in=delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, max_delay)
            except ROLLED_BACK as exc:
                # PostgreSQL chose this transaction as a deadlock's (or serialization's) victim and rolled
                # it back whole: nothing applied, so the same batch is sent again (jittered, so the two
                # writers do not meet again in step)
                pause = random.uniform(0.01, delay)
                log.info("database write rolled back by a conflict; retrying", error=str(exc), retry_in=pause)
                await asyncio.sleep(pause)
                delay = min(delay * 2, max_delay)

    async def _write_one(
        self, conn: asyncpg.Connection, instance_id: int, epoch: int, batch: WriteBatch
    ) -> list[int] | None:
        """The batch in one statement, outside any transaction (it commits itself: one round trip instead of
        BEGIN and the lock, the writes, COMMIT): ``owned`` locks the instance row if it is still ours at
        ``epoch`` (a FOR NO KEY UPDATE, or the UPDATE of its state, which takes the same lock), and every
        other write is filtered on it (an uncorrelated EXISTS, evaluated once before the write's first row:
        the lock is taken before anything else is written); an empty ``owned`` wrote nothing and raises
        FencedOut. The other writes touch only rows other than the new ones (the task updates' rows exist
        already), so their order within the statement does not matter.

        The run's end too, when its workflow limits no runs and none waits (``gate``, serial_sql.RUN_END_FREE,
        read before anything is written): else the statement writes nothing and None is returned, for the
        transaction that takes the workflow's lock and wakes the waiting runs (serial_sql.on_run_ended)."""
        owner: list[Any] = [instance_id, self.me, epoch]
        gated = batch.workflow_finished  # an end names its state (_one_statement): the UPDATE below
        if batch.workflow_state is None and batch.workflow_var_pool is None:
            ctes = [
                "owned AS MATERIALIZED (SELECT 1 FROM workflow_instance WHERE id = $1 AND host = $2 AND epoch = $3"
                " FOR NO KEY UPDATE)"
            ]
        else:
            ctes = [f"gate AS MATERIALIZED ({serial_sql.RUN_END_FREE})"] if gated else []
            ctes.append(
                "owned AS (UPDATE workflow_instance SET state = coalesce($4, state),"
                + (" end_time = now()," if gated else "")
                + " var_pool = coalesce($5::jsonb, var_pool), state_history = state_history || $6::jsonb,"
                " update_time = now() WHERE id = $1 AND host = $2 AND epoch = $3"
                + (" AND (SELECT free FROM gate)" if gated else "")
                + " RETURNING 1)"
            )
            owner += [
                batch.workflow_state,
                None if batch.workflow_var_pool is None else json.dumps(batch.workflow_var_pool),
                json.dumps(batch.workflow_history),
            ]
        args: list[Any] = []
        if batch.new_attempts:
            insert, args = _insert_attempts(batch.new_attempts, first=len(owner) + 1)
            ctes.append(f"ins AS ({insert} WHERE EXISTS (SELECT FROM owned) RETURNING id, task_code)")
        updates, update_args = _task_update_ctes(
            batch.updates, len(owner) + len(args) + 1, " AND EXISTS (SELECT FROM owned)"
        )
        ctes += updates
        counted = "SELECT count(*) AS n" + (", (SELECT free FROM gate) AS free" if gated else "") + " FROM owned"
        final = (
            f"SELECT o.*, i.id, i.task_code FROM ({counted}) o LEFT JOIN ins i ON true"
            if batch.new_attempts
            else counted
        )
        rows = await conn.fetch(f"WITH {', '.join(ctes)} {final}", *owner, *args, *update_args)
        if not rows or not rows[0]["n"]:
            if gated and rows and rows[0]["free"] is False:
                return None  # the end needs the workflow's lock: nothing was written
            raise FencedOut(f"workflow instance {instance_id} is no longer owned by {self.me} at epoch {epoch}")
        by_code = {int(r["task_code"]): int(r["id"]) for r in rows if batch.new_attempts and r["id"] is not None}
        return [by_code[a.task_code] for a in batch.new_attempts]

    async def _begin_owned(self, conn: asyncpg.Connection, instance_id: int, epoch: int) -> None:
        """BEGIN and :meth:`_lock_owned` in one round trip (one simple query of two statements, its values
        inlined: integers, and this master's address checked to be a plain host and port)."""
        status = await conn.execute(
            f"BEGIN; SELECT 1 FROM workflow_instance WHERE id = {int(instance_id)} AND host = {self._me_literal}"
            f" AND epoch = {int(epoch)} FOR NO KEY UPDATE"
        )
        if status != "SELECT 1":
            await conn.execute("ROLLBACK")
            raise FencedOut(f"workflow instance {instance_id} is no longer owned by {self.me} at epoch {epoch}")

    async def _apply(self, conn: asyncpg.Connection, instance_id: int, batch: WriteBatch) -> list[int]:
        """Inside the write's transaction, once the instance row is locked as ours: the batch's statements."""
        if batch.workflow_state is not None or batch.workflow_var_pool is not None:
            await conn.execute(
                "UPDATE workflow_instance SET state = coalesce($2, state),"
                " end_time = CASE WHEN $3 THEN now() ELSE end_time END,"
                " var_pool = coalesce($4::jsonb, var_pool), state_history = state_history || $5::jsonb,"
                " update_time = now() WHERE id = $1",
                instance_id,
                batch.workflow_state,
                batch.workflow_finished,
                None if batch.workflow_var_pool is None else json.dumps(batch.workflow_var_pool),
                json.dumps(batch.workflow_history),
            )
        if batch.workflow_finished:
            await serial_sql.on_run_ended(conn, instance_id)  # a place is free: wake a waiting run
        ids: list[int] = []
        if batch.new_attempts:
            codes = [a.task_code for a in batch.new_attempts]
            retired = [a.task_code for a in batch.new_attempts if a.attempt > 1]
            if retired:  # a task's first attempt (number 1) has no earlier one to retire (the unique index checks)
                await conn.execute(
                    "UPDATE task_instance SET flag = 0 WHERE workflow_instance_id = $1 AND task_code = ANY($2)"
                    " AND flag = 1",
                    instance_id,
                    retired,
                )
            # the batch's task updates ride in the same statement (one round trip less per write that ends
            # attempts and makes new ones: every step of a chain); they touch only rows that exist already
            insert, insert_args = _insert_attempts(batch.new_attempts, first=2)
            ctes, update_args = _task_update_ctes(batch.updates, first=2 + len(insert_args))
            with_clause = f"WITH {', '.join(ctes)} " if ctes else ""
            rows = await conn.fetch(
                f"{with_clause}{insert} RETURNING id, task_code", instance_id, *insert_args, *update_args
            )
            by_code = {int(r["task_code"]): int(r["id"]) for r in rows}
            ids = [by_code[c] for c in codes]
            requests = [(ids[i], group, priority, slots) for i, group, priority, slots in batch.group_requests]
            batch.admitted = await task_groups_sql.enqueue(conn, instance_id, requests)
        else:
            await _write_task_updates(conn, batch.updates)
        ended = [u.task_instance_id for u in batch.updates if batch.grouped and u.state in task_groups_sql.FINISHED]
        if ended:
            await task_groups_sql.release(conn, ended)  # their task group slots, once
        for alert in batch.alerts:
            await _insert_alert(conn, instance_id, alert.alert_type, alert.title, alert.content,
                                alert.alert_group_id, alert.task_instance_id)  # fmt: skip
        if batch.next_backfill is not None:
            await _insert_next_backfill(conn, instance_id, *batch.next_backfill)
        return ids

    # -- failover ---------------------------------------------------------------------------------

    async def epoch_floor(self) -> int:
        """A fencing epoch below every epoch this master will give an instance (taken at start-up)."""
        return int(await self.pool.fetchval("SELECT nextval('workflow_epoch_seq')"))

    async def orphans(self, floors: dict[str, int]) -> list[asyncpg.Record]:
        """Unfinished instances whose owner is not a live master (``floors``: live master address -> its
        epoch floor), or is a later incarnation at the same address (epoch below its floor)."""
        return await self.pool.fetch(
            "SELECT w.id, w.host, w.epoch FROM workflow_instance w"
            " LEFT JOIN unnest($2::text[], $3::bigint[]) AS l(host, floor) ON l.host = w.host"
            " WHERE w.state = ANY($1::smallint[]) AND w.host IS NOT NULL AND (l.host IS NULL OR w.epoch < l.floor)"
            " ORDER BY w.id",
            _FAILOVER_STATES,
            list(floors),
            list(floors.values()),
        )

    async def owned_where(self, floor: int, want: Callable[[int], bool], page: int = 5000) -> list[tuple[int, int]]:
        """(id, epoch) of the unfinished instances this incarnation owns (epoch at or above its ``floor``) whose id
        ``want`` keeps. Read through a cursor ``page`` rows at a time: 100,000 rows decoded in one answer held the
        event loop 100-150 ms."""
        kept: list[tuple[int, int]] = []
        async with self.pool.acquire() as conn, conn.transaction(readonly=True):
            cursor = await conn.cursor(
                "SELECT id, epoch FROM workflow_instance WHERE host = $1 AND epoch >= $2"
                " AND state = ANY($3::smallint[]) ORDER BY id",
                self.me,
                floor,
                _FAILOVER_STATES,
            )
            while rows := await cursor.fetch(page):
                kept.extend((int(r[0]), int(r[1])) for r in rows if want(r[0]))
        return kept

    async def take_over(
        self, instance_id: int, old_host: str, old_epoch: int, live_workers: set[str]
    ) -> tuple[asyncpg.Record, list[asyncpg.Record], set[int]] | None:
        """:meth:`take_over_many` of one instance: (row, attempts, waiting), or None if moved meanwhile."""
        taken = await self.take_over_many([(instance_id, old_host, old_epoch)], live_workers)
        return taken[0] if taken else None

    async def take_over_many(
        self, found: Sequence[tuple[int, str, int]], live_workers: set[str]
    ) -> list[tuple[asyncpg.Record, list[asyncpg.Record], set[int]]]:
        """One transaction of set-based statements for all of ``found`` (instance id, host and epoch as
        the caller found them): make each instance still where it was found ours with a fresh epoch of
        its own, and mark its active attempts on workers that are gone NEED_FAULT_TOLERANCE (attempts
        without a host are left to the caller, who asks the live workers about them); one alert each.
        Returns, per instance taken (by id), its row (read after the commit), its current attempts and
        those still waiting in their task group's queue (never admitted, so never dispatched: they keep
        their place). An instance someone else moved first, or took from us since, is not returned."""
        if not found:
            return []
        ids = [int(f[0]) for f in found]
        async with self.pool.acquire() as conn, conn.transaction():
            # the rows are locked in id order first: two takeovers of overlapping sets (a retake, a sweep
            # of another master) queue on the first row instead of deadlocking half-way
            await conn.execute(
                "SELECT 1 FROM workflow_instance WHERE id = ANY($1::bigint[]) ORDER BY id FOR NO KEY UPDATE", ids
            )
            rows = await conn.fetch(
                "UPDATE workflow_instance w SET host = $4, epoch = nextval('workflow_epoch_seq'), recovery = 1,"
                " restart_time = now(), history_cmd = concat_ws(',', w.history_cmd, 'RECOVER_TOLERANCE_FAULT_PROCESS'),"
                " update_time = now() FROM unnest($1::bigint[], $2::text[], $3::bigint[]) AS f(id, host, epoch)"
                " WHERE w.id = f.id AND w.host = f.host AND w.epoch = f.epoch AND w.state = ANY($5::smallint[])"
                " RETURNING w.id, w.epoch",
                ids,
                [f[1] for f in found],
                [int(f[2]) for f in found],
                self.me,
                _FAILOVER_STATES,
            )
            if not rows:
                return []
            taken = [int(r["id"]) for r in rows]
            attempts = await conn.fetch(_CURRENT_ATTEMPTS_OF_MANY, taken)
            old_host = {int(f[0]): f[1] for f in found}
            gone = [
                int(r["id"])
                for r in attempts
                if r["state"] in _ACTIVE_STATES
                and r["host"]
                and r["host"] not in live_workers
                and r["task_type"] not in LOGIC_TYPES  # run by the master: the new owner takes them up
            ]
            hosts = sorted({old_host[i] for i in taken})
            await state_writes.move_tasks(
                conn, gone, TASK_ACTIVE, TaskState.NEED_FAULT_TOLERANCE, f"master {', '.join(hosts)} failed over"
            )
            await task_groups_sql.release_lost(conn, taken)
            await conn.execute(
                "INSERT INTO alert (title, content, alert_type, workflow_instance_id, sign, alert_group_id,"
                " project_code, workflow_definition_code, warning_type)"
                " SELECT left(t.title, 255), t.content, $4, w.id, encode(sha256(convert_to(t.content, 'UTF8')), 'hex'),"
                " w.warning_group_id, w.project_code, w.workflow_definition_code, w.warning_type"
                " FROM (SELECT f.id, 'master ' || f.host || ' failed over' AS title,"
                " 'workflow instance ' || f.id || ' moved from ' || f.host || ' to ' || $3 AS content"
                " FROM unnest($1::bigint[], $2::text[]) AS f(id, host)) t JOIN workflow_instance w ON w.id = t.id",
                taken,
                [old_host[i] for i in taken],
                self.me,
                ALERT_FAULT_TOLERANCE,
            )
            if gone:
                attempts = await conn.fetch(_CURRENT_ATTEMPTS_OF_MANY, taken)
            waiting = await task_groups_sql.waiting_of(conn, taken)
        # the ownership is written (the target of a failover's timing): the instances' whole rows (wide:
        # their parameters and history) are read after the commit, fenced on the epochs just taken (one
        # taken from us meanwhile is left out, as one moved before the takeover is)
        full = await self.pool.fetch(
            "SELECT w.* FROM workflow_instance w JOIN unnest($1::bigint[], $2::bigint[]) AS f(id, epoch)"
            " ON f.id = w.id AND f.epoch = w.epoch WHERE w.host = $3 ORDER BY w.id",
            taken,
            [int(r["epoch"]) for r in rows],
            self.me,
        )
        by_instance: dict[int, list[asyncpg.Record]] = {i: [] for i in taken}
        for a in attempts:
            by_instance[int(a["workflow_instance_id"])].append(a)
        return [(r, by_instance[int(r["id"])], waiting.get(int(r["id"]), set())) for r in full]

    async def mark_lost(self, epochs: Mapping[int, int], task_instance_ids: Sequence[int], cause: str) -> list[int]:
        """One fenced transaction: of attempts ``task_instance_ids`` (of instances ``epochs``: id -> the epoch
        we hold), those of instances still ours at that epoch and still active move to NEED_FAULT_TOLERANCE
        (the checked path of engine/storage/state_writes.py) and give back their task group slots; the ids
        that moved. An instance taken from us meanwhile is left alone (its attempts are not returned)."""
        if not task_instance_ids:
            return []
        async with self.pool.acquire() as conn, conn.transaction():
            owned = await conn.fetch(
                "SELECT w.id FROM workflow_instance w JOIN unnest($1::bigint[], $2::bigint[]) AS f(id, epoch)"
                " ON f.id = w.id WHERE w.host = $3 AND w.epoch = f.epoch ORDER BY w.id FOR NO KEY UPDATE OF w",
                list(epochs),
                list(epochs.values()),
                self.me,
            )
            ids = await conn.fetch(
                "SELECT id FROM task_instance WHERE id = ANY($1::bigint[])"
                " AND workflow_instance_id = ANY($2::bigint[])",
                list(task_instance_ids),
                [int(r["id"]) for r in owned],
            )
            moved = await state_writes.move_tasks(
                conn, [int(r["id"]) for r in ids], TASK_ACTIVE, TaskState.NEED_FAULT_TOLERANCE, cause
            )
            await task_groups_sql.release(conn, moved)
        return moved

    # -- reads ------------------------------------------------------------------------------------

    async def group_holding(self, task_instance_ids: Sequence[int]) -> list[tuple[int, int]]:
        """Which of these attempts their task groups admitted: (workflow instance id, task instance id)."""
        return await task_groups_sql.holding(self.pool, task_instance_ids)

    async def current_attempts(self, instance_id: int) -> list[asyncpg.Record]:
        """The current attempt (flag = 1) of every task an instance has started."""
        return await self.pool.fetch(_CURRENT_ATTEMPTS, instance_id)

    # -- logic tasks ------------------------------------------------------------------------------

    async def resolve_workflow(self, project_code: int, name: str, project: str | None) -> int | None:
        """The code of workflow ``name`` in ``project`` (a name) or else in project ``project_code``."""
        value = await self.pool.fetchval(
            "SELECT d.code FROM workflow_definition d JOIN project p ON p.code = d.project_code"
            " WHERE d.name = $1 AND (CASE WHEN $2::text IS NULL THEN p.code = $3 ELSE p.name = $2 END)",
            name,
            project,
            project_code,
        )
        return None if value is None else int(value)

    async def _link_sub_workflow(
        self, conn: asyncpg.Connection, instance_id: int, epoch: int, task_instance_id: int
    ) -> int | None:
        """Fenced: the id of the SUB_PROCESS attempt's link row made now, or None when an earlier call made it."""
        await self._lock_owned(conn, instance_id, epoch)
        inserted = await conn.fetchval(
            "INSERT INTO sub_workflow_relation (parent_workflow_instance_id, parent_task_instance_id)"
            " VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING id",
            instance_id,
            task_instance_id,
        )
        return None if inserted is None else int(inserted)

    async def ensure_sub_workflow(
        self, instance_id: int, epoch: int, task_instance_id: int, task_code: int, child_code: int, params: str
    ) -> None:
        """Fenced and idempotent: link a SUB_PROCESS attempt to its child instance. The first call queues the
        child's command (START_PROCESS; or RECOVER_SUSPENDED_PROCESS of the paused / stopped child an earlier
        attempt of the task left, so a resumed parent resumes its child)."""
        async with self.pool.acquire() as conn, conn.transaction():
            inserted = await self._link_sub_workflow(conn, instance_id, epoch, task_instance_id)
            if inserted is None:
                return
            earlier = await conn.fetchrow(
                "SELECT w.id, w.state, w.workflow_definition_code, w.workflow_definition_version"
                " FROM sub_workflow_relation r JOIN task_instance t ON t.id = r.parent_task_instance_id"
                " JOIN workflow_instance w ON w.id = r.workflow_instance_id"
                " WHERE r.parent_workflow_instance_id = $1 AND t.task_code = $2 AND t.id <> $3"
                " ORDER BY t.attempt DESC LIMIT 1",
                instance_id,
                task_code,
                task_instance_id,
            )
            if earlier is not None and earlier["state"] in (WorkflowState.PAUSE, WorkflowState.STOP):
                command_id = await conn.fetchval(
                    "INSERT INTO command (command_type, workflow_definition_code, workflow_definition_version,"
                    " workflow_instance_id, failure_strategy, workflow_instance_priority, worker_group)"
                    f" SELECT {int(CommandType.RECOVER_SUSPENDED_PROCESS)}, $1, $2, $3, failure_strategy,"
                    " workflow_instance_priority, worker_group FROM workflow_instance WHERE id = $3 RETURNING id",
                    earlier["workflow_definition_code"],
                    earlier["workflow_definition_version"],
                    earlier["id"],
                )
                await conn.execute(
                    "UPDATE sub_workflow_relation SET workflow_instance_id = $2, command_id = $3 WHERE id = $1",
                    inserted,
                    earlier["id"],
                    command_id,
                )
                return
            command_id = await conn.fetchval(
                "INSERT INTO command (command_type, workflow_definition_code, command_param, failure_strategy,"
                " warning_type, warning_group_id, schedule_time, executor_id, workflow_instance_priority,"
                " worker_group, environment_code, dry_run)"
                f" SELECT {int(CommandType.START_PROCESS)}, $2, $3::jsonb, failure_strategy, warning_type,"
                " warning_group_id, schedule_time, executor_id, workflow_instance_priority, worker_group,"
                " environment_code, dry_run FROM workflow_instance WHERE id = $1 RETURNING id",
                instance_id,
                child_code,
                params,
            )
            await conn.execute("UPDATE sub_workflow_relation SET command_id = $2 WHERE id = $1", inserted, command_id)

    async def cancel_child_command(self, task_instance_id: int, reason: str) -> bool:
        """The child command a SUB_PROCESS attempt queued, if no master claimed it yet, goes to
        ``error_command`` with ``reason``: the child never starts. False when there is none to take (the
        child exists, or nothing was queued)."""
        return bool(
            await self.pool.fetchval(
                "WITH gone AS (DELETE FROM command WHERE id = (SELECT command_id FROM sub_workflow_relation"
                " WHERE parent_task_instance_id = $1) RETURNING *)"
                " INSERT INTO error_command SELECT gone.*, $2 FROM gone RETURNING 1",
                task_instance_id,
                reason,
            )
        )

    async def sub_workflow_state(self, task_instance_id: int) -> tuple[int, int | None, str]:
        """(child instance id or 0, its state or None, why it could not start or '')."""
        row = await self.pool.fetchrow(
            "SELECT r.workflow_instance_id AS child, w.state, e.message,"
            " EXISTS (SELECT 1 FROM command c WHERE c.id = r.command_id) AS queued FROM sub_workflow_relation r"
            " LEFT JOIN workflow_instance w ON w.id = r.workflow_instance_id"
            " LEFT JOIN error_command e ON e.id = r.command_id WHERE r.parent_task_instance_id = $1",
            task_instance_id,
        )
        if row is None:
            return 0, None, ""
        # a resumed child keeps its old (finished) state until its command is claimed: not an answer yet
        return int(row["child"]), None if row["queued"] else row["state"], row["message"] or ""

    async def sub_workflow_depth(self, instance_id: int, limit: int) -> int:
        """How many parents instance ``instance_id`` has (0: not a sub-workflow), counted up to ``limit``."""
        depth = await self.pool.fetchval(
            "WITH RECURSIVE up (id, depth) AS (SELECT $1::bigint, 0 UNION ALL SELECT r.parent_workflow_instance_id,"
            " up.depth + 1 FROM sub_workflow_relation r JOIN up ON r.workflow_instance_id = up.id"
            " WHERE up.depth < $2) SELECT max(depth) FROM up",
            instance_id,
            limit,
        )
        return int(depth or 0)

    async def refuse_sub_workflow(
        self, instance_id: int, epoch: int, task_instance_id: int, child_code: int, params: str, reason: str
    ) -> None:
        """Fenced and idempotent: link a SUB_PROCESS attempt to a child command that failed at once with
        ``reason`` (in error_command, as a child that could not be made)."""
        async with self.pool.acquire() as conn, conn.transaction():
            inserted = await self._link_sub_workflow(conn, instance_id, epoch, task_instance_id)
            if inserted is None:
                return
            command_id = await conn.fetchval(
                "WITH c AS (INSERT INTO command (command_type, workflow_definition_code, command_param, executor_id,"
                f" worker_group) SELECT {int(CommandType.START_PROCESS)}, $2, $3::jsonb, executor_id, worker_group"
                " FROM workflow_instance"
                " WHERE id = $1 RETURNING *) INSERT INTO error_command SELECT c.*, $4 FROM c RETURNING id",
                instance_id,
                child_code,
                params,
                reason,
            )
            # never seen by a master: the transaction removes it before it commits
            await conn.execute("DELETE FROM command WHERE id = $1", command_id)
            await conn.execute("UPDATE sub_workflow_relation SET command_id = $2 WHERE id = $1", inserted, command_id)

    async def dependent_state(self, code: int, task: str | None, start: dt.datetime, end: dt.datetime) -> str:
        """SUCCESS / FAILED / WAITING of the newest run of workflow ``code`` (or of its task ``task``) for the
        interval: scheduled in it, or unscheduled and started in it (DolphinScheduler's rule)."""
        row = await self.pool.fetchrow(
            "SELECT id, state FROM workflow_instance WHERE workflow_definition_code = $1 AND"
            " ((schedule_time >= $2 AND schedule_time < $3) OR (schedule_time IS NULL AND start_time >= $2"
            " AND start_time < $3)) ORDER BY id DESC LIMIT 1",
            code,
            start,
            end,
        )
        if row is None:
            return "WAITING"
        finished = row["state"] in WORKFLOW_FINISHED
        if task is None:
            return "WAITING" if not finished else "SUCCESS" if row["state"] == WorkflowState.SUCCESS else "FAILED"
        state = await self.pool.fetchval(
            "SELECT state FROM task_instance WHERE workflow_instance_id = $1 AND name = $2 AND flag = 1",
            row["id"],
            task,
        )
        if state is None:
            return "FAILED" if finished else "WAITING"
        if state in TASK_SUCCEEDED:
            return "SUCCESS"
        # a failed task of a running instance may yet be retried: only a finished instance makes it final
        final = finished or state != TaskState.FAILURE
        return "FAILED" if state in TASK_FAILED_OUTCOMES and final else "WAITING"

    async def attempt_floors(self, instance_id: int) -> dict[int, int]:
        """Highest attempt number per task over every run of an instance (superseded rows included)."""
        rows = await self.pool.fetch(
            "SELECT task_code, max(attempt) AS top FROM task_instance WHERE workflow_instance_id = $1 GROUP BY 1",
            instance_id,
        )
        return {int(r["task_code"]): int(r["top"]) for r in rows}

    async def owner(self, instance_id: int) -> asyncpg.Record | None:
        return await self.pool.fetchrow("SELECT host, epoch, state FROM workflow_instance WHERE id = $1", instance_id)

    async def owners(self, instance_ids: Collection[int]) -> dict[int, asyncpg.Record]:
        """:meth:`owner` of many instances in one round trip (those that exist)."""
        rows = await self.pool.fetch(
            "SELECT id, host, epoch, state FROM workflow_instance WHERE id = ANY($1::bigint[])", list(instance_ids)
        )
        return {int(r["id"]): r for r in rows}

    async def run_context(self, project_code: int, environment_codes: Collection[int]) -> RunContext:
        """What every task of a run is dispatched with, read once for the run (one round trip): its
        project's parameters (secret values still sealed) and the lines of the environments its tasks
        name. A run sees them as they were when this master started, took over or resumed it."""
        rows = await self.pool.fetch(
            "SELECT 0 AS kind, param_name AS name, param_value AS value, secret, 0::bigint AS code"
            " FROM project_parameter WHERE project_code = $1"
            " UNION ALL SELECT 1, name, config, 0, code FROM environment WHERE code = ANY($2::bigint[])"
            " ORDER BY kind, name",
            project_code,
            sorted(c for c in environment_codes if c >= 0),
        )
        params = [{"prop": r["name"], "value": r["value"], "secret": bool(r["secret"])} for r in rows if r["kind"] == 0]
        environments = {int(r["code"]): r["value"] or "" for r in rows if r["kind"] == 1}
        return RunContext(params, environments)

    async def email_senders(self, group_id: int) -> list[dict[str, Any]]:
        """The EMAIL senders of alert group ``group_id``, ``{name, params}`` (secrets still sealed)."""
        rows = await self.pool.fetch(
            "SELECT name, params FROM alert_sender WHERE alert_group_id = $1 AND plugin_type = 'EMAIL' ORDER BY id",
            group_id,
        )
        return [
            {
                "name": r["name"],
                "params": dict(r["params"]),
            }
            for r in rows
        ]

    async def resources(self, project_code: int, task_type: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The resource versions a task gets (engine/resources/catalog.for_run); none asked: no query."""
        mains = MAIN_FIELDS.get(task_type, ())
        if not params.get("resourceList") and not any(isinstance(params.get(f), Mapping) for f in mains):
            return []
        return await catalog.for_run(self.pool, project_code, task_type, params)

    async def datasources(self, names: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Each named data source's connection params (secrets still sealed) with its ``type`` added."""
        rows = await self.pool.fetch(
            "SELECT name, type, connection_params FROM datasource WHERE name = ANY($1)", list(names)
        )
        return {r["name"]: {**r["connection_params"], "type": r["type"]} for r in rows}


def _task_updates(updates: Sequence[TaskUpdate]) -> dict[tuple[str, ...], list[list[Any]]]:
    """The batch's task updates as few statements: one update per attempt (later states and fields
    win, as if applied in order), attempts setting the same columns grouped (key: those columns, sorted;
    rows: [id, state, *their values])."""
    merged: dict[int, tuple[int, dict[str, Any]]] = {}
    for update in updates:
        earlier = merged.get(update.task_instance_id)
        fields = {**earlier[1], **update.fields} if earlier is not None else dict(update.fields)
        merged[update.task_instance_id] = (update.state, fields)
    groups: dict[tuple[str, ...], list[list[Any]]] = {}
    for task_instance_id, (state, fields) in merged.items():
        names = tuple(sorted(fields))
        args: list[Any] = [task_instance_id, state]
        for name in names:
            if name not in _TASK_FIELDS:
                raise ValueError(f"unknown task field {name}")
            value = fields[name]
            if name in ("start_time", "end_time"):
                value = ms_to_dt(value)
            elif name == "var_pool":
                value = json.dumps(value)
            args.append(value)
        groups.setdefault(names, []).append(args)
    return groups


@functools.lru_cache(maxsize=256)
def _task_update_sql(names: tuple[str, ...], first: int = 1) -> str:
    """One attempt's update: $first its id, then its state, then the fields ``names`` in order."""
    sets = [f"state = ${first + 1}", "update_time = now()"]
    sets += [f"{name} = ${i}{'::jsonb' if name == 'var_pool' else ''}" for i, name in enumerate(names, start=first + 2)]
    return f"UPDATE task_instance SET {', '.join(sets)} WHERE id = ${first}"


@functools.lru_cache(maxsize=256)
def _task_updates_sql(names: tuple[str, ...], first: int = 1) -> str:
    """Many attempts' updates in one statement: $first their ids, then their states, then one array per
    field of ``names`` (about half the server's work of one statement per attempt, triggers included)."""
    cols = ("id", "state", *names)
    types = ("bigint", "smallint", *(_TASK_FIELD_TYPES[n] for n in names))
    arrays = ", ".join(f"${i}::{t}[]" for i, t in enumerate(types, start=first))
    sets = ["state = u.state", "update_time = now()", *(f"{n} = u.{n}" for n in names)]
    return (
        f"UPDATE task_instance t SET {', '.join(sets)} FROM unnest({arrays}) AS u({', '.join(cols)}) WHERE t.id = u.id"
    )


def _one_statement(batch: WriteBatch) -> bool:
    """Whether the batch is task updates, new first attempts and a change of the instance's state (its end
    too, with no alert and no next backfill step), no task group slot taken or freed: what
    MasterStore._write_one writes as one statement."""
    return (
        not (batch.workflow_finished and batch.workflow_state is None)  # an end always names its state
        and not batch.alerts
        and batch.next_backfill is None
        and not batch.group_requests
        and not batch.grouped
        and all(a.attempt == 1 for a in batch.new_attempts)  # a retry retires the earlier attempt first
        and (
            bool(batch.updates or batch.new_attempts)
            or batch.workflow_state is not None
            or batch.workflow_var_pool is not None
        )
    )


def _insert_attempts(attempts: Sequence[NewAttempt], first: int) -> tuple[str, list[Any]]:
    """INSERT ... SELECT of new attempts of the instance ``$1``, their arrays numbered from ``first``."""
    return attempt_rows.insert_sql(first), attempt_rows.arrays(attempts)


def _task_update_statements(updates: Sequence[TaskUpdate], first: int | None = None) -> list[tuple[str, list[Any]]]:
    """The batch's task updates as few statements, each with its arguments: an attempt alone as its one-row
    UPDATE, attempts setting the same columns as one UPDATE ... FROM unnest. With ``first``, their parameters
    are numbered on from it across the statements (WITH queries of one statement); without, each statement's
    from 1 (statements of their own)."""
    statements: list[tuple[str, list[Any]]] = []
    n = first or 1
    for names, rows in _task_updates(updates).items():
        if len(rows) == 1:
            statements.append((_task_update_sql(names, n), rows[0]))
        else:
            statements.append((_task_updates_sql(names, n), [list(column) for column in zip(*rows, strict=True)]))
        if first is not None:
            n += len(statements[-1][1])
    return statements


def _task_update_ctes(updates: Sequence[TaskUpdate], first: int, condition: str = "") -> tuple[list[str], list[Any]]:
    """The batch's task updates as WITH queries (``u0 AS (UPDATE ...)``, ...) of a statement whose own
    parameters end before ``first`` (theirs numbered from there on), each filtered on ``condition`` too,
    and their arguments."""
    statements = _task_update_statements(updates, first)
    parts = [f"u{i} AS ({sql}{condition})" for i, (sql, _) in enumerate(statements)]
    return parts, [value for _, values in statements for value in values]


async def _write_task_updates(conn: asyncpg.Connection, updates: Sequence[TaskUpdate]) -> None:
    for sql, values in _task_update_statements(updates):
        await conn.execute(sql, *values)


async def _insert_next_backfill(
    conn: asyncpg.Connection, instance_id: int, param: dict[str, Any], legacy_dates: list[dt.datetime]
) -> None:
    if legacy_dates:
        param = {**param, BACKFILL_ID: await conn.fetchval(_KEEP_BACKFILL, instance_id, legacy_dates)}
    step = await conn.fetchval(
        "INSERT INTO backfill_step (backfill_id, backfill_index) SELECT id, $2 FROM backfill WHERE id = $1"
        " ON CONFLICT DO NOTHING RETURNING 1",
        param[BACKFILL_ID],
        param[INDEX],
    )
    if step is None:  # queued already (this date ended before: recovered, or resumed), or the row is gone
        log.info("backfill step already queued or row missing", backfill_id=param[BACKFILL_ID], index=param[INDEX])
        return
    status = await conn.execute(_NEXT_BACKFILL, instance_id, json.dumps(param), param[BACKFILL_ID], param[INDEX])
    if status.split()[-1] == "0":
        log.warning("backfill row missing: the chain ends here", backfill_id=param[BACKFILL_ID])


async def _insert_alert(
    conn: asyncpg.Connection,
    instance_id: int,
    alert_type: int,
    title: str,
    content: str,
    group_id: int | None = None,
    task_instance_id: int = 0,
) -> None:
    """An alert row for the API servers to deliver: to ``group_id``, else the instance's warning group."""
    await conn.execute(
        "INSERT INTO alert (title, content, alert_type, workflow_instance_id, sign, alert_group_id, project_code,"
        " workflow_definition_code, warning_type, task_instance_id) SELECT $1, $2, $3, $4,"
        " encode(sha256(convert_to($2, 'UTF8')), 'hex'), coalesce($5, w.warning_group_id), w.project_code,"
        " w.workflow_definition_code, w.warning_type, $6 FROM workflow_instance w WHERE w.id = $4",
        title[:255],
        content,
        alert_type,
        instance_id,
        group_id,
        task_instance_id or None,
    )
