"""Task groups in the database: queueing, admission and release of an attempt's slots, and the
master's listener that hands admitted attempts to their actors (the rule: engine/concurrency/task_groups.py).

Every change of a group's use runs under its row lock (``SELECT ... FOR NO KEY UPDATE`` on ``task_group``) and
the use is the sum of the slots of the group's HOLDING queue rows, so two masters cannot over-admit and
the count cannot drift. An attempt naming a group gets a WAITING row in the same fenced transaction that
inserts it, and the group admits what fits at once; an admitted attempt is dispatched, a waiting one is
held by its actor. A row is deleted when its attempt reaches a finished state, in the fenced write that
records it (or in the failover's takeover, for attempts it marks NEED_FAULT_TOLERANCE): the release
happens once, however the attempt ended, and a fenced-out master can neither admit nor release. Freed
slots admit the next rows in the same transaction, and ``pg_notify`` (sent on commit) tells the masters
which attempts may go; each master's :class:`GroupListener` posts them to their actors, and re-checks
its waiting attempts every few seconds in case a notification was missed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import asyncpg

from core import logs
from core.aio import BackgroundService
from engine.concurrency.task_groups import admissible
from engine.states import TaskState
from engine.storage.failures import DB_FAILURES

log = logs.get(__name__)

CHANNEL = "porpoise_task_group"
WAITING, HOLDING = 0, 1
#: task states after which an attempt holds nothing (TASK_FINISHED)
FINISHED = frozenset({3, 5, 6, 7, 8, 9, 13})


async def admit(conn: asyncpg.Connection, group_id: int) -> list[tuple[int, int]]:
    """Inside a transaction: admit what fits of the group's queue; returns (workflow instance id, task
    instance id) of the admitted attempts, and notifies the masters of them on commit."""
    # NO KEY UPDATE: admissions serialise on the group row, but the KEY SHARE lock that inserting a queue
    # row (its foreign key) takes does not conflict with it (FOR UPDATE did: two writers that had both
    # inserted a row of the group deadlocked upgrading to it)
    size = await conn.fetchval("SELECT group_size FROM task_group WHERE id = $1 FOR NO KEY UPDATE", group_id)
    if size is None:
        return []  # the group is gone (its rows went with it)
    used = await conn.fetchval(
        "SELECT coalesce(sum(slots), 0) FROM task_group_queue WHERE task_group_id = $1 AND status = $2",
        group_id,
        HOLDING,
    )
    waiting = await conn.fetch(
        "SELECT id, slots FROM task_group_queue WHERE task_group_id = $1 AND status = $2 ORDER BY priority DESC, id",
        group_id,
        WAITING,
    )
    take = admissible(int(size), int(used), [(int(r["id"]), int(r["slots"])) for r in waiting])
    if not take:
        return []
    rows = await conn.fetch(
        "UPDATE task_group_queue SET status = $2, admit_time = now() WHERE id = ANY($1::bigint[])"
        " RETURNING workflow_instance_id, task_instance_id",
        take,
        HOLDING,
    )
    admitted = [(int(r["workflow_instance_id"]), int(r["task_instance_id"])) for r in rows]
    await conn.execute("SELECT pg_notify($1, $2)", CHANNEL, json.dumps(admitted))
    return admitted


async def enqueue(
    conn: asyncpg.Connection, instance_id: int, requests: Sequence[tuple[int, int, int, int]]
) -> set[int]:
    """Inside the actor's fenced write: queue new attempts ``(task instance id, group id, priority,
    slots)`` and admit what fits; returns the admitted task instance ids."""
    if not requests:
        return set()
    await conn.execute(
        "INSERT INTO task_group_queue (task_instance_id, task_group_id, priority, slots, workflow_instance_id)"
        " SELECT u.*, $5 FROM unnest($1::bigint[], $2::bigint[], $3::int[], $4::int[]) AS u",
        [r[0] for r in requests],
        [r[1] for r in requests],
        [r[2] for r in requests],
        [r[3] for r in requests],
        instance_id,
    )
    admitted: set[int] = set()
    for group_id in sorted({r[1] for r in requests}):
        admitted |= {tid for _, tid in await admit(conn, group_id)}
    return admitted


async def release(conn: asyncpg.Connection, task_instance_ids: Iterable[int]) -> None:
    """Inside a transaction: the attempts ended; their rows go (once) and their groups admit the next."""
    ids = sorted(set(task_instance_ids))
    if not ids:
        return
    rows = await conn.fetch(
        "DELETE FROM task_group_queue WHERE task_instance_id = ANY($1::bigint[]) RETURNING task_group_id, status",
        ids,
    )
    for group_id in sorted({int(r["task_group_id"]) for r in rows if r["status"] == HOLDING}):
        await admit(conn, group_id)


async def release_lost(conn: asyncpg.Connection, instance_ids: Sequence[int]) -> None:
    """Inside the takeover: release the slots of the instances' attempts it marked NEED_FAULT_TOLERANCE
    (the adopted ones keep theirs)."""
    rows = await conn.fetch(
        "SELECT q.task_instance_id FROM task_group_queue q JOIN task_instance t ON t.id = q.task_instance_id"
        f" WHERE q.workflow_instance_id = ANY($1::bigint[]) AND (t.state = {int(TaskState.NEED_FAULT_TOLERANCE)}"
        " OR t.flag = 0)",
        list(instance_ids),
    )
    await release(conn, [int(r["task_instance_id"]) for r in rows])


async def waiting_of(conn: asyncpg.Connection, instance_ids: Sequence[int]) -> dict[int, set[int]]:
    """The instances' attempts still waiting in their group's queue: instance id -> task instance ids."""
    rows = await conn.fetch(
        "SELECT workflow_instance_id, task_instance_id FROM task_group_queue"
        " WHERE workflow_instance_id = ANY($1::bigint[]) AND status = $2",
        list(instance_ids),
        WAITING,
    )
    out: dict[int, set[int]] = {}
    for r in rows:
        out.setdefault(int(r[0]), set()).add(int(r[1]))
    return out


async def repair(pool: asyncpg.Pool) -> None:
    """Release rows whose attempt ended or was superseded without its release (a safety net: the writes
    that end attempts release them), and let every group with waiting rows admit what fits (a group that
    grew, a notification lost)."""
    async with pool.acquire() as conn, conn.transaction():
        stale = await conn.fetch(
            "SELECT q.task_instance_id FROM task_group_queue q LEFT JOIN task_instance t ON t.id = q.task_instance_id"
            " WHERE t.id IS NULL OR t.state = ANY($1::smallint[]) OR t.flag = 0",
            sorted(FINISHED),
        )
        if stale:
            log.warning("task group slots released late", task_instance_ids=[r[0] for r in stale][:20])
        await release(conn, [int(r["task_instance_id"]) for r in stale])
    groups = await pool.fetch("SELECT DISTINCT task_group_id FROM task_group_queue WHERE status = $1", WAITING)
    for g in groups:
        async with pool.acquire() as conn, conn.transaction():
            await admit(conn, int(g["task_group_id"]))


async def holding(pool: asyncpg.Pool, task_instance_ids: Sequence[int]) -> list[tuple[int, int]]:
    """Which of these attempts are admitted (their row HOLDING): (workflow instance id, task instance id)."""
    rows = await pool.fetch(
        "SELECT workflow_instance_id, task_instance_id FROM task_group_queue"
        " WHERE task_instance_id = ANY($1::bigint[]) AND status = $2",
        list(task_instance_ids),
        HOLDING,
    )
    return [(int(r[0]), int(r[1])) for r in rows]


async def queue_places(
    pool: asyncpg.Pool, task_instance_ids: Sequence[int]
) -> dict[int, tuple[str, int, int, int, int]]:
    """Where these waiting attempts stand in their group's queue: task instance id -> (group name, position
    (1 = admitted next; the queue's order: priority, then first come), waiting rows, slots used, size)."""
    rows = await pool.fetch(
        "SELECT m.task_instance_id, g.name, g.group_size,"
        " (SELECT count(*) FROM task_group_queue q WHERE q.task_group_id = m.task_group_id AND q.status = $2"
        "   AND (q.priority > m.priority OR (q.priority = m.priority AND q.id <= m.id))) AS position,"
        " (SELECT count(*) FROM task_group_queue q WHERE q.task_group_id = m.task_group_id AND q.status = $2)"
        "   AS queued,"
        " (SELECT coalesce(sum(q.slots), 0) FROM task_group_queue q WHERE q.task_group_id = m.task_group_id"
        "   AND q.status = $3) AS used"
        " FROM task_group_queue m JOIN task_group g ON g.id = m.task_group_id"
        " WHERE m.task_instance_id = ANY($1::bigint[]) AND m.status = $2",
        list(task_instance_ids),
        WAITING,
        HOLDING,
    )
    return {
        int(r["task_instance_id"]): (r["name"], int(r["position"]), int(r["queued"]), int(r["used"]),
                                     int(r["group_size"]))
        for r in rows
    }  # fmt: skip


class GroupListener(BackgroundService):
    """LISTENs on the task group channel and hands admissions to ``deliver(workflow instance id, task
    instance id)``; every ``interval`` seconds runs :func:`repair` and re-checks ``waiting()`` (the
    task instance ids its actors hold back) in case a notification was missed."""

    task_name = "task-group-listener"

    def __init__(
        self,
        pool: asyncpg.Pool,
        dsn: str,
        interval: float,
        waiting: Callable[[], list[int]],
        deliver: Callable[[int, int], None],
    ) -> None:
        self.pool = pool
        self.dsn = dsn
        self.interval = interval
        self.waiting = waiting
        self.deliver = deliver
        self._conn: asyncpg.Connection | None = None

    async def close(self, timeout: float | None = None) -> None:
        await super().close(timeout)
        conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.close(), 5)

    def _on_notify(self, *args: Any) -> None:
        try:
            for wid, tid in json.loads(args[-1]):
                self.deliver(int(wid), int(tid))
        except (ValueError, TypeError) as exc:
            log.warning("bad task group notification", error=str(exc))

    async def _run(self) -> None:
        while True:
            if self._conn is None or self._conn.is_closed():
                with contextlib.suppress(*DB_FAILURES):
                    conn = await asyncpg.connect(self.dsn, timeout=5)
                    await conn.add_listener(CHANNEL, self._on_notify)
                    self._conn = conn
            await asyncio.sleep(self.interval)
            try:
                await repair(self.pool)
                ids = self.waiting()
                if ids:
                    for wid, tid in await holding(self.pool, ids):
                        self.deliver(wid, tid)
            except DB_FAILURES as exc:
                log.warning("task group check failed", error=str(exc))
