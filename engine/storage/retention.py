"""Retention: remove finished run history older than its project's keep days, in small batches.

Every batch is its own short transaction touching at most ``batch`` rows of the table it walks (keyset
order, never OFFSET), so no lock is held for long and masters claiming, driving and failing over runs are
not held up. A pass may be interrupted anywhere (the master is stopped, the database goes away): what
committed is consistent, the next pass goes on.

What a workflow instance needs to be removed, checked with its row locked (``FOR UPDATE SKIP LOCKED``,
so a row a user or master is changing right now is passed over until the next pass) and re-read in a
statement after the lock was taken (READ COMMITTED: a command the API inserted under the same row lock
before we took it is seen):

- it is finished (PAUSE, STOP, FAILURE, SUCCESS, BLOCK) and ended before its project's cutoff;
- it is not a sub-workflow child of an instance that still exists (children go with their parent);
- none of its sub-workflow descendants is unfinished, and none has a queued command (a rerun, a resume,
  a child about to be created) or an alert not yet delivered.

Then it goes with its descendants, their task instances (foreign key cascade), their sub-workflow
relations, alerts and task-group queue rows; once that batch committed, the archived task logs of those
instances (blob keys under ``task-logs/<instance id>/``, engine/api/logarchive.py) are deleted from the blob
store. A pass stopped between the two leaves those blobs behind, nothing else (no row names them any more).

Serial runs waiting (SERIAL_WAIT) and runs of a backfill chain in progress are unfinished, so kept; a
chain's ``backfill`` row goes only when no command and no instance names it any more. A ``schedule_fire``
row goes only once it is older than the cutoff *and* behind its schedule's ``fired_until`` watermark
(no master computes fire times before the watermark, so invariant 5 is untouched). DEPENDENT tasks read
other workflows' runs up to ``DEPENDENT_LOOKBACK_DAYS`` before their business date: keep days below that
are refused (engine/config.py), so a dependency of a current run is never removed; a backfill of dates
older than the retention with DEPENDENT tasks finds no runs for them and waits (docs).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field

import asyncpg

from core import logs
from engine.states import WORKFLOW_FINISHED, sql_codes
from engine.storage.blobs import BlobError, BlobStore
from engine.storage.task_logs import instance_prefix

log = logs.get(__name__)

#: the finished workflow states, written into the statements below (the retention index's condition)
_FIN = sql_codes(WORKFLOW_FINISHED)

# A project's candidates in end order after the keyset, locked; a row being changed is passed over.
_CANDIDATES = f"""
SELECT w.id, w.end_time FROM workflow_instance w
WHERE w.project_code = $1 AND w.state IN {_FIN} AND w.end_time < $2 AND (w.end_time, w.id) > ($3, $4)
  AND NOT EXISTS (SELECT 1 FROM sub_workflow_relation r WHERE r.workflow_instance_id = w.id)
ORDER BY w.end_time, w.id LIMIT $5
FOR UPDATE OF w SKIP LOCKED
"""

# Each candidate and its sub-workflow descendants (children of reruns too).
_TREE = """
WITH RECURSIVE tree(root, id) AS (
    SELECT r, r FROM unnest($1::bigint[]) AS r
    UNION
    SELECT tree.root, s.workflow_instance_id FROM sub_workflow_relation s
    JOIN tree ON s.parent_workflow_instance_id = tree.id WHERE s.workflow_instance_id <> 0
)
SELECT root, id FROM tree
"""

# Instances of ``$1`` that something still needs (statement run after the locks were taken).
_NEEDED = f"""
SELECT u.id FROM unnest($1::bigint[]) AS u(id)
WHERE EXISTS (SELECT 1 FROM workflow_instance w WHERE w.id = u.id AND w.state NOT IN {_FIN})
   OR EXISTS (SELECT 1 FROM command c WHERE c.workflow_instance_id = u.id)
   OR EXISTS (SELECT 1 FROM alert a WHERE a.workflow_instance_id = u.id AND a.alert_status = 0)
   OR EXISTS (SELECT 1 FROM sub_workflow_relation s JOIN command c ON c.id = s.command_id
              WHERE s.parent_workflow_instance_id = u.id)
"""

_LOCK = "SELECT id FROM workflow_instance WHERE id = ANY($1::bigint[]) ORDER BY id FOR UPDATE SKIP LOCKED"

_DELETE = (
    "DELETE FROM task_group_queue WHERE workflow_instance_id = ANY($1::bigint[])",
    "DELETE FROM alert WHERE workflow_instance_id = ANY($1::bigint[])",
    "DELETE FROM workflow_instance WHERE id = ANY($1::bigint[])",
)

# Projects and their cutoffs (a project's keep_days, else the cluster's; 0 = for ever).
_PROJECTS = "SELECT code, coalesce(keep_days, $1) AS keep_days FROM project ORDER BY code"

_ERROR_COMMANDS = """
DELETE FROM error_command WHERE id IN (
    SELECT e.id FROM error_command e
    LEFT JOIN workflow_definition d ON d.code = e.workflow_definition_code
    LEFT JOIN project p ON p.code = d.project_code
    WHERE e.id > $1 AND coalesce(p.keep_days, $2) > 0
      AND e.update_time < $3::timestamptz - make_interval(days => coalesce(p.keep_days, $2))
    ORDER BY e.id LIMIT $4
) RETURNING id
"""

# Fire records behind the watermark and the cutoff, a batch at a time across schedules.
_FIRES = """
WITH doomed AS (
    SELECT f.schedule_id, f.fire_time FROM schedule s
    JOIN workflow_definition d ON d.code = s.workflow_definition_code
    JOIN project p ON p.code = d.project_code
    CROSS JOIN LATERAL (
        SELECT f.schedule_id, f.fire_time FROM schedule_fire f
        WHERE f.schedule_id = s.id AND f.fire_time < s.fired_until
          AND f.fire_time < $1::timestamptz - make_interval(days => coalesce(p.keep_days, $2))
        ORDER BY f.fire_time LIMIT $3
    ) f
    WHERE coalesce(p.keep_days, $2) > 0
    LIMIT $3
)
DELETE FROM schedule_fire x USING doomed
WHERE x.schedule_id = doomed.schedule_id AND x.fire_time = doomed.fire_time
RETURNING x.schedule_id
"""

# Backfill date lists older than the cutoff that no command and no instance names any more.
_BACKFILLS = """
WITH batch AS (
    SELECT b.id, b.workflow_definition_code FROM backfill b
    LEFT JOIN workflow_definition d ON d.code = b.workflow_definition_code
    LEFT JOIN project p ON p.code = d.project_code
    WHERE b.id > $1 AND coalesce(p.keep_days, $2) > 0
      AND b.create_time < $3::timestamptz - make_interval(days => coalesce(p.keep_days, $2))
    ORDER BY b.id LIMIT $4
), doomed AS (
    SELECT batch.id FROM batch
    WHERE NOT EXISTS (SELECT 1 FROM command c WHERE c.command_param->>'backfillId' = batch.id::text)
      AND NOT EXISTS (SELECT 1 FROM workflow_instance w
                      WHERE w.workflow_definition_code = batch.workflow_definition_code
                        AND w.command_param->>'backfillId' = batch.id::text)
), gone AS (
    DELETE FROM backfill WHERE id IN (SELECT id FROM doomed) RETURNING 1
)
SELECT (SELECT max(id) FROM batch) AS last, (SELECT count(*) FROM gone) AS n
"""

_AUDIT = """
DELETE FROM audit_log WHERE id IN (
    SELECT id FROM audit_log WHERE create_time < $1 ORDER BY create_time, id LIMIT $2
) RETURNING id
"""


@dataclass
class Removed:
    """What one pass removed, per kind."""

    instances: int = 0
    error_commands: int = 0
    schedule_fires: int = 0
    backfills: int = 0
    audit_rows: int = 0
    #: archived task logs deleted from the blob store with their instances
    log_archives: int = 0
    #: candidates kept because something still needs them (or their row was being changed)
    kept: int = 0
    batches: int = 0
    by_project: dict[int, int] = field(default_factory=dict)

    def total(self) -> int:
        return self.instances + self.error_commands + self.schedule_fires + self.backfills + self.audit_rows


class Retention:
    """One retention pass over a database: ``await Retention(pool, keep_days, ...).run()``.

    ``go_on`` is asked before every batch: the master answers False once it no longer holds the
    retention lock (or stops), and the pass ends there."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        keep_days: int,
        audit_keep_days: int,
        batch: int = 500,
        go_on: Callable[[], bool] = lambda: True,
        now: dt.datetime | None = None,
        blobs: BlobStore | None = None,
    ) -> None:
        self.pool = pool
        #: where the instances' archived task logs are (None: not deleted here)
        self.blobs = blobs
        self.keep_days = keep_days
        self.audit_keep_days = audit_keep_days
        self.batch = batch
        self.go_on = go_on
        self.now = now
        self.removed = Removed()

    async def run(self) -> Removed:
        now = self.now or await self.pool.fetchval("SELECT now()")
        for project in await self.pool.fetch(_PROJECTS, self.keep_days):
            if project["keep_days"] > 0:
                cutoff = now - dt.timedelta(days=project["keep_days"])
                await self._instances(int(project["code"]), cutoff)
        await self._keyset(_ERROR_COMMANDS, now, "error_commands")
        await self._backfills(now)
        while self.go_on():
            n = len(await self.pool.fetch(_FIRES, now, self.keep_days, self.batch))
            self.removed.schedule_fires += n
            self.removed.batches += 1
            if n < self.batch:
                break
        if self.audit_keep_days > 0:
            cutoff = now - dt.timedelta(days=self.audit_keep_days)
            while self.go_on():
                n = len(await self.pool.fetch(_AUDIT, cutoff, self.batch))
                self.removed.audit_rows += n
                self.removed.batches += 1
                if n < self.batch:
                    break
        return self.removed

    async def _instances(self, project: int, cutoff: dt.datetime) -> None:
        after: tuple[dt.datetime, int] = (dt.datetime.min.replace(tzinfo=dt.UTC), 0)
        while self.go_on():
            doomed: list[int] = []
            async with self.pool.acquire() as conn, conn.transaction():
                rows = await conn.fetch(_CANDIDATES, project, cutoff, after[0], after[1], self.batch)
                if rows:
                    after = (rows[-1]["end_time"], int(rows[-1]["id"]))
                    doomed = await self._remove(conn, project, [int(r["id"]) for r in rows])
            await self._remove_log_archives(doomed)
            self.removed.batches += 1
            if len(rows) < self.batch:
                return

    async def _remove_log_archives(self, instances: list[int]) -> None:
        if self.blobs is None:
            return
        for instance in instances:
            try:
                self.removed.log_archives += await self.blobs.delete_prefix(instance_prefix(instance))
            except BlobError as exc:  # the rows are gone: these blobs stay behind (logged), the pass goes on
                log.warning("archived task logs not deleted", workflow_instance_id=instance, error=str(exc))

    async def _remove(self, conn: asyncpg.Connection, project: int, roots: list[int]) -> list[int]:
        """Remove the roots that nothing needs with their descendants; the instances removed."""
        tree: dict[int, list[int]] = {}
        for row in await conn.fetch(_TREE, roots):
            tree.setdefault(int(row["root"]), []).append(int(row["id"]))
        below = [i for members in tree.values() for i in members if i not in tree]
        locked = {int(r["id"]) for r in await conn.fetch(_LOCK, below)} if below else set()
        members = [i for ms in tree.values() for i in ms]
        needed = {int(r["id"]) for r in await conn.fetch(_NEEDED, members)}
        doomed: list[int] = []
        for root, ms in tree.items():
            if any(i in needed or (i != root and i not in locked) for i in ms):
                self.removed.kept += 1
                continue
            doomed.extend(ms)
        if not doomed:
            return []
        for statement in _DELETE:
            await conn.execute(statement, doomed)
        self.removed.instances += len(doomed)
        self.removed.by_project[project] = self.removed.by_project.get(project, 0) + len(doomed)
        return doomed

    async def _keyset(self, statement: str, now: dt.datetime, kind: str) -> None:
        after = 0
        while self.go_on():
            ids = [int(r["id"]) for r in await self.pool.fetch(statement, after, self.keep_days, now, self.batch)]
            setattr(self.removed, kind, getattr(self.removed, kind) + len(ids))
            self.removed.batches += 1
            if len(ids) < self.batch:
                return
            after = max(ids)

    async def _backfills(self, now: dt.datetime) -> None:
        after = 0
        while self.go_on():
            row = await self.pool.fetchrow(_BACKFILLS, after, self.keep_days, now, self.batch)
            self.removed.backfills += int(row["n"])
            self.removed.batches += 1
            if row["last"] is None:
                return
            after = int(row["last"])
