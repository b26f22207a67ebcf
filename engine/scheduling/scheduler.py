"""The cron scheduler every master runs: online schedules in, SCHEDULER commands out.

Each master fires the schedules of its slot (``id % count = index``) but correctness does not rest
on that: a fire time becomes a command only through one statement that inserts the
``schedule_fire`` row (primary key schedule + fire time) and, only if that insert did not conflict,
the command with that fire time as its ``schedule_time`` (invariant 5). Two masters that both think
they own a schedule (slots re-forming after a death) produce one command per fire time.

``fired_until`` on the schedule is the watermark: every fire time up to it is done. After downtime
the missed times are fired (``fire_all``, at most ``misfire_max_fires`` most recent ones, each with
its own schedule time) or dropped (``skip``) when older than ``misfire_threshold`` seconds. A fire
time of an offline workflow is passed over, as DolphinScheduler skips it. No time before the
schedule's ``start_time`` fires, whenever it was put online.

Fire times are cut at the database's clock (``now()`` read with the schedules), never at this master's:
a master whose clock runs ahead of the others' fires nothing early, one behind fires late only by its
poll. Fire times are computed in a thread (each costs bounded work, engine/scheduling/cron.py, but a tick
may compute many). A schedule that cannot be evaluated (refused since it was saved, or failing in
any way) is logged once and passed over; the others keep firing.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Callable
from typing import Any

import asyncpg

from core import logs
from core.aio import BackgroundService
from engine.scheduling.cron import between, parse
from engine.states import CommandType, ReleaseState
from engine.storage.failures import DB_FAILURES

log = logs.get(__name__)

FIRE_ALL, SKIP = "fire_all", "skip"
#: fire times one schedule's tick looks at (after a long downtime the oldest beyond it wait a tick)
SCAN_LIMIT = 100_000

_ONLINE = (
    "SELECT now() AS db_now, s.id, s.crontab, s.timezone_id, s.start_time, s.end_time, s.misfire_policy,"
    " greatest(s.fired_until, s.start_time - interval '1 microsecond') AS watermark"
    f" FROM schedule s WHERE s.release_state = {int(ReleaseState.ONLINE)} AND s.id % $1 = $2"
)

# One statement: the fire rows that did not exist yet become commands (same ids), nothing else.
_FIRE = f"""
WITH fired AS (
    INSERT INTO schedule_fire (schedule_id, fire_time, command_id)
    SELECT $1, t, nextval(pg_get_serial_sequence('command', 'id')) FROM unnest($2::timestamptz[]) AS t
    ON CONFLICT DO NOTHING
    RETURNING fire_time, command_id
)
INSERT INTO command (id, command_type, workflow_definition_code, command_param, failure_strategy, warning_type,
                     warning_group_id, schedule_id, schedule_time, executor_id, workflow_instance_priority,
                     worker_group, environment_code)
SELECT f.command_id, {int(CommandType.SCHEDULER)}, s.workflow_definition_code,
       jsonb_build_object('schedule_timezone', s.timezone_id), s.failure_strategy, s.warning_type,
       s.warning_group_id, s.id, f.fire_time, s.user_id, s.workflow_instance_priority, s.worker_group,
       s.environment_code
FROM fired f JOIN schedule s ON s.id = $1
JOIN workflow_definition d ON d.code = s.workflow_definition_code AND d.release_state = {int(ReleaseState.ONLINE)}
RETURNING id
"""
_ADVANCE = (
    "UPDATE schedule SET fired_until = greatest(coalesce(fired_until, '-infinity'::timestamptz), $2)"
    f" WHERE id = $1 AND release_state = {int(ReleaseState.ONLINE)}"
)


def aware(when: dt.datetime) -> dt.datetime:
    """asyncpg returns +/-infinity timestamps as naive datetime.max/min: read them as UTC."""
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)


def due_times(
    crontab: str,
    tz: str,
    watermark: dt.datetime,
    end: dt.datetime,
    now: dt.datetime,
    policy: str,
    threshold: float,
    max_fires: int,
) -> tuple[list[dt.datetime], int]:
    """Fire times to fire now (ascending) and how many missed ones were dropped.

    Times are in (watermark, min(now, end)]. Under ``skip`` those older than ``threshold`` seconds are
    dropped; under ``fire_all`` only the ``max_fires`` most recent are kept.
    """
    cron = parse(crontab)
    end = aware(end)
    times = between(cron, tz, watermark, min(now, end), limit=SCAN_LIMIT)
    dropped = 0
    if policy == SKIP:
        late = now - dt.timedelta(seconds=threshold)
        kept = [t for t in times if t >= late]
        dropped = len(times) - len(kept)
        times = kept
    if len(times) > max_fires:
        dropped += len(times) - max_fires
        times = times[-max_fires:]
    return times, dropped


class Scheduler(BackgroundService):
    task_name = "cron-scheduler"

    def __init__(
        self,
        pool: asyncpg.Pool,
        slot: Callable[[], tuple[int, int]],
        poll_interval: float,
        misfire_threshold: float,
        misfire_max_fires: int,
        metrics: Any = None,
        clock: Callable[[], dt.datetime] | None = None,
    ) -> None:
        self.pool = pool
        self.slot = slot
        self.poll_interval = poll_interval
        self.threshold = misfire_threshold
        self.max_fires = misfire_max_fires
        self.metrics = metrics
        #: the time fire times are cut at (tests); None: the database's now(), read with the schedules
        self.clock = clock
        self._bad: dict[int, str] = {}

    async def _run(self) -> None:
        while True:
            wait = self.poll_interval
            try:
                started = time.monotonic()
                nxt, now = await self._tick()
                if nxt is not None and now is not None:
                    # on the clock the tick cut at (the database's), less the time the tick took
                    wait = min(wait, max(0.0, (nxt - now).total_seconds() - (time.monotonic() - started)))
            except DB_FAILURES as exc:
                log.warning("schedule tick failed", error=str(exc))
            await asyncio.sleep(wait)

    async def tick(self) -> dt.datetime | None:
        """Fire what is due for this master's schedules; returns the earliest next fire time."""
        return (await self._tick())[0]

    async def _tick(self) -> tuple[dt.datetime | None, dt.datetime | None]:
        """The earliest next fire time and the time the tick cut fire times at: the database's ``now()``,
        read in the statement that reads the schedules, so a master whose clock runs ahead never fires a
        time before it has come (a fire time is a business date: early is wrong, however little)."""
        index, count = self.slot()
        if count == 0:
            return None, None
        rows = await self.pool.fetch(_ONLINE, count, index)
        if not rows:
            return None, None
        now = self.clock() if self.clock is not None else aware(rows[0]["db_now"])
        earliest: dt.datetime | None = None
        for row in rows:
            nxt = await self._schedule(row, now)
            if nxt is not None and (earliest is None or nxt < earliest):
                earliest = nxt
        return earliest, now

    def _times(self, row: asyncpg.Record, now: dt.datetime) -> tuple[list[dt.datetime], int, dt.datetime | None]:
        times, dropped = due_times(
            row["crontab"],
            row["timezone_id"],
            aware(row["watermark"]),
            row["end_time"],
            now,
            row["misfire_policy"],
            self.threshold,
            self.max_fires,
        )
        after = max(now, aware(row["watermark"]))
        upcoming = between(parse(row["crontab"]), row["timezone_id"], after, aware(row["end_time"]), limit=1)
        return times, dropped, upcoming[0] if upcoming else None

    async def _schedule(self, row: asyncpg.Record, now: dt.datetime) -> dt.datetime | None:
        sid = int(row["id"])
        try:
            times, dropped, upcoming = await asyncio.to_thread(self._times, row, now)
        except Exception as exc:  # one bad schedule must not stop the others of the slot
            if self._bad.get(sid) != str(exc):
                log.error("schedule cannot be evaluated", schedule_id=sid, crontab=row["crontab"], error=str(exc))
                self._bad[sid] = str(exc)
            return None
        self._bad.pop(sid, None)
        if times or dropped:
            upto = min(now, aware(row["end_time"]))
            await self.fire(sid, times, upto)
            if dropped:
                log.warning("missed fire times dropped", schedule_id=sid, dropped=dropped, policy=row["misfire_policy"])
                if self.metrics is not None:
                    self.metrics.inc("schedule_misfires_dropped", dropped)
        return upcoming

    async def fire(self, schedule_id: int, times: list[dt.datetime], upto: dt.datetime) -> list[int]:
        """Insert one command per fire time not fired yet (by anyone); advance the watermark to ``upto``.
        Returns the new command ids."""
        async with self.pool.acquire() as conn, conn.transaction():
            ids = [int(r["id"]) for r in await conn.fetch(_FIRE, schedule_id, times)] if times else []
            await conn.execute(_ADVANCE, schedule_id, upto)
        if ids:
            log.info("schedule fired", schedule_id=schedule_id, commands=len(ids), first=times[0].isoformat())
            if self.metrics is not None:
                self.metrics.inc("schedule_fires", len(ids))
        return ids


async def set_online(conn: asyncpg.Connection, schedule_id: int, online: bool) -> None:
    """Online: fire from now on (never for the time it was offline). Offline: stop firing."""
    await conn.execute(
        "UPDATE schedule SET release_state = $2::smallint,"
        " fired_until = CASE WHEN $2::smallint = 1 THEN now() ELSE fired_until END, update_time = now() WHERE id = $1",
        schedule_id,
        1 if online else 0,
    )
