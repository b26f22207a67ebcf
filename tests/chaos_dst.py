"""A schedule crossing daylight-saving changes during the chaos run (tests/chaos.py).

A real zone changes its clocks twice a year; the round lasts minutes. So the run writes a zone of its own,
``Chaos/Shift``, as a TZif file (the format of the system's zoneinfo database, read by Python's zoneinfo
from ``PYTHONTZPATH``, which every node of the run gets): its clocks go forward SHIFT at one moment of the
round and back at another. A Quartz schedule firing every STEP seconds in that zone fires through both
changes while masters are killed, paused and restarted: the window opens as the faults begin and closes
while they go on. Afterwards its commands must be exactly the zone's distinct wall-clock fire times, each
once: none for the times the clocks skipped (the first time after the gap fires, as Quartz does), none
again for the times repeated when the clocks went back (DolphinScheduler and Quartz fire a repeated
wall-clock time once), none lost to a failover. The zone shifts by seconds, not hours: a TZif offset is
any whole number of seconds, and a window of seconds fits inside the round.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import secrets
import struct
import time
import zoneinfo
from pathlib import Path

import asyncpg

from engine.states import ReleaseState
from engine.storage.failures import DB_FAILURES
from engine.workflows.model import TaskDef, WorkflowDef

#: the zone's name, made unique per file written (zoneinfo caches a zone by name for the process's life)
ZONE = "Chaos/Shift"
#: the schedule fires every STEP seconds (Quartz's seconds field)
STEP = 5
CRON = f"*/{STEP} * * * * ?"
#: how far the clocks go forward and back (whole STEPs, so a wall-clock fire time falls on a UTC one):
#: three fire times skipped going forward, three repeated going back
SHIFT = dt.timedelta(seconds=3 * STEP)
#: the schedule's window, and when in it the clocks change (seconds after its start)
FORWARD_AT, BACK_AT, LENGTH = 30, 60, 90
#: the window opens this many seconds after the schedule is added (then on a whole STEP)
LEAD = 5
WORKFLOW = WorkflowDef(name="dst", project="chaos", tasks=(TaskDef("tick", "SHELL", {"rawScript": "true"}),))


def write_zone(tzdir: Path, forward: dt.datetime, back: dt.datetime) -> str:
    """A new zone under ``tzdir``: UTC+0, UTC+SHIFT (DST) from ``forward``, UTC+0 again from ``back``; its name."""
    times = [int(forward.timestamp()), int(back.timestamp())]
    kinds = [1, 0]
    types = [(0, 0, 0), (int(SHIFT.total_seconds()), 1, 5)]  # (utoff, isdst, index of the abbreviation)
    names = b"CST0\x00CDT0\x00"

    def block(width: str) -> tuple[bytes, bytes]:
        counts = struct.pack(">6l", 0, 0, 0, len(times), len(types), len(names))
        body = b"".join(struct.pack(f">{width}", t) for t in times) + bytes(kinds)
        body += b"".join(struct.pack(">lbB", *t) for t in types) + names
        return counts, body

    out = bytearray()
    for width, version in (("l", b"2"), ("q", b"2")):
        counts, body = block(width)
        out += b"TZif" + version + b"\x00" * 15 + counts + body
    out += b"\n\n"  # no rule after the last change: its type holds
    name = f"{ZONE}{secrets.token_hex(4)}"
    path = tzdir / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes(out))
    return name


def use_zones(tzdir: Path) -> None:
    """This process reads zones from ``tzdir`` too (the nodes get it as PYTHONTZPATH)."""
    zoneinfo.reset_tzpath([str(tzdir), *zoneinfo.TZPATH])


def expected_fires(zone_name: str, start: dt.datetime, end: dt.datetime) -> list[dt.datetime]:
    """The fire times of CRON in the zone over [start, end] (``start`` on a whole STEP), worked out UTC
    STEP by UTC STEP (independently of engine/scheduling/cron.py): a time fires when its wall-clock time
    was not seen yet."""
    zone = zoneinfo.ZoneInfo(zone_name)
    seen: set[dt.datetime] = set()
    fires = []
    t = start
    while t <= end:
        wall = t.astimezone(zone).replace(tzinfo=None)
        if wall not in seen:
            seen.add(wall)
            fires.append(t)
        t += dt.timedelta(seconds=STEP)
    return fires


async def add_schedule(conn: asyncpg.Connection, code: int, tzdir: Path) -> tuple[int, str, dt.datetime, dt.datetime]:
    """A zone written and a schedule in it online from LEAD seconds on (on a whole STEP); its id, zone and
    window."""
    now = await conn.fetchval("SELECT now()")
    lead = now.replace(microsecond=0) + dt.timedelta(seconds=LEAD)
    start = lead + dt.timedelta(seconds=-lead.second % STEP)
    zone = write_zone(tzdir, start + dt.timedelta(seconds=FORWARD_AT), start + dt.timedelta(seconds=BACK_AT))
    use_zones(tzdir)
    end = start + dt.timedelta(seconds=LENGTH)
    schedule_id = await conn.fetchval(
        "INSERT INTO schedule (workflow_definition_code, start_time, end_time, timezone_id, crontab,"
        " release_state) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
        code,
        start,
        end,
        zone,
        CRON,
        int(ReleaseState.ONLINE),
    )
    return int(schedule_id), zone, start, end


async def check(
    conn: asyncpg.Connection, schedule_id: int, zone: str, start: dt.datetime, end: dt.datetime
) -> list[str]:
    """Violations: fire times missing, extra or repeated among the schedule's commands and instances."""
    fired = [
        r["schedule_time"]
        for r in await conn.fetch(
            "SELECT schedule_time FROM workflow_instance WHERE command_id IN"
            " (SELECT command_id FROM schedule_fire WHERE schedule_id = $1) ORDER BY schedule_time",
            schedule_id,
        )
    ]
    want = expected_fires(zone, start, end)
    out = []
    if len(set(fired)) != len(fired):
        out.append(f"DST schedule: a fire time ran twice: {fired}")
    missing, extra = sorted(set(want) - set(fired)), sorted(set(fired) - set(want))
    if missing or extra:
        out.append(f"DST schedule: fire times missing {missing}, extra {extra} (expected {want})")
    return out


async def all_fired(conn: asyncpg.Connection, schedule_id: int, end: dt.datetime) -> bool:
    """Every fire time of the window has a finished instance (the window is over)."""
    now = await conn.fetchval("SELECT now()")
    if now <= end:
        return False
    left = await conn.fetchval(
        "SELECT count(*) FROM schedule_fire f LEFT JOIN workflow_instance w ON w.command_id = f.command_id"
        " WHERE f.schedule_id = $1 AND (w.id IS NULL OR w.end_time IS NULL)",
        schedule_id,
    )
    fired_until = await conn.fetchval("SELECT fired_until FROM schedule WHERE id = $1", schedule_id)
    return left == 0 and fired_until is not None and fired_until >= end


async def settle(
    dsn: str, schedule_id: int, zone: str, start: dt.datetime, end: dt.datetime, deadline: float
) -> list[str]:
    """After the run: wait (at most ``deadline`` seconds) for the window to be over and every fire time's
    instance to end, then check the fire times."""
    until = time.monotonic() + deadline
    while True:
        try:
            conn = await asyncpg.connect(dsn, timeout=5)
            try:
                if await all_fired(conn, schedule_id, end) or time.monotonic() >= until:
                    return await check(conn, schedule_id, zone, start, end)
            finally:
                await conn.close()
        except DB_FAILURES:
            if time.monotonic() >= until:
                return ["DST schedule: the database did not answer to check its fire times"]
        await asyncio.sleep(1.0)  # polling interval of the wait (no notification to wait on)
