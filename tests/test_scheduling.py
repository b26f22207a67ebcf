"""Cron schedules: Quartz translation, misfire policies, and one command per fire time (invariant 5)
with real masters, one of them killed with SIGKILL while the schedules fire."""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import signal
from collections.abc import Callable
from pathlib import Path

import asyncpg
import pytest

from engine.infra.etcd import EtcdServer
from engine.scheduling import scheduler as scheduler_module
from engine.scheduling.cron import CronError, next_times, parse
from engine.scheduling.scheduler import FIRE_ALL, SKIP, Scheduler, due_times, set_online
from engine.states import ReleaseState, WorkflowState, sql_codes
from engine.storage.jsoncodec import register_json
from tests.cluster_harness import query, save, shell, started
from tests.helpers import NodeProc, eventually

#: instance states of a run that stopped, failed or succeeded
_ENDED = frozenset({WorkflowState.STOP, WorkflowState.FAILURE, WorkflowState.SUCCESS})


UTC = dt.UTC
BASE = dt.datetime(2026, 7, 1, tzinfo=UTC)  # a Wednesday

# (expression, zone, first fire times after BASE) — Quartz day-of-week counts 1 = SUN .. 7 = SAT
QUARTZ_CASES = [
    ("0 0 12 ? * MON-FRI", "UTC", ["2026-07-01T12:00", "2026-07-02T12:00", "2026-07-03T12:00", "2026-07-06T12:00"]),
    ("0 0 12 ? * 2-6", "UTC", ["2026-07-01T12:00", "2026-07-02T12:00", "2026-07-03T12:00", "2026-07-06T12:00"]),
    ("0 0 0 ? * 1", "UTC", ["2026-07-05T00:00", "2026-07-12T00:00"]),  # 1 = Sunday
    ("0 0 0 ? * 6#3", "UTC", ["2026-07-17T00:00", "2026-08-21T00:00"]),  # third Friday
    ("0 0 0 ? * 5L", "UTC", ["2026-07-30T00:00", "2026-08-27T00:00"]),  # last Thursday
    ("0 0 0 L * ?", "UTC", ["2026-07-31T00:00", "2026-08-31T00:00", "2026-09-30T00:00"]),
    ("0 0 0 15W * ?", "UTC", ["2026-07-15T00:00", "2026-08-14T00:00"]),  # Aug 15 is a Saturday
    ("0 0 0 * * ? *", "UTC", ["2026-07-02T00:00", "2026-07-03T00:00"]),  # DolphinScheduler's default
    ("0 0 0 1 1 ? 2028", "UTC", ["2028-01-01T00:00"]),
    ("30 15 10 * * ?", "Europe/Paris", ["2026-07-01T08:15:30", "2026-07-02T08:15:30"]),
    ("*/20 * * * * ?", "UTC", ["2026-07-01T00:00:20", "2026-07-01T00:00:40", "2026-07-01T00:01"]),
    ("15 2 * * 0", "UTC", ["2026-07-05T02:15", "2026-07-12T02:15"]),  # 5 fields: cron's 0 = Sunday
    ("0 9 1 * *", "America/New_York", ["2026-07-01T13:00", "2026-08-01T13:00"]),
]
BAD_CASES = [
    ("0 0 0 LW * ?", "LW"),
    ("0 0 0 L-3 * ?", "L-n"),
    ("0 0 0 1 * 2", "'?'"),
    ("0 61 0 * * ?", "minute '61'"),
    ("0 0 0 ? * 9", "day-of-week"),
    ("0 0 0 * * ? 20x6", "year"),
    ("* * *", "expected 5 fields"),
    ("", "expected 5 fields"),
]


@pytest.mark.parametrize(("expr", "tz", "expected"), QUARTZ_CASES)
def test_quartz_and_cron_expressions_fire_when_quartz_would(expr: str, tz: str, expected: list[str]) -> None:
    times = next_times(parse(expr), tz, BASE, len(expected) + (1 if expr.endswith("2028") else 0))
    assert [t.strftime("%Y-%m-%dT%H:%M:%S").removesuffix(":00") for t in times] == expected


@pytest.mark.parametrize(("expr", "part"), BAD_CASES)
def test_an_unsupported_expression_is_refused_naming_the_part(expr: str, part: str) -> None:
    with pytest.raises(CronError, match=part.replace("'", "'").replace("?", r"\?").replace("-", r"\-")):
        parse(expr)


def _minutes(n: int) -> dt.timedelta:
    return dt.timedelta(minutes=n)


def test_misfire_fire_all_fires_every_missed_time_up_to_the_bound() -> None:
    now = dt.datetime(2026, 7, 1, 12, 0, 30, tzinfo=UTC)
    far = dt.datetime(9999, 1, 1, tzinfo=UTC)
    times, dropped = due_times("0 * * * * ?", "UTC", now - _minutes(60), far, now, FIRE_ALL, 60, 100)
    assert len(times) == 60 and dropped == 0 and times[-1] == now.replace(second=0)
    assert times == sorted(times) and len(set(times)) == 60
    times, dropped = due_times("0 * * * * ?", "UTC", now - _minutes(60), far, now, FIRE_ALL, 60, 10)
    assert len(times) == 10 and dropped == 50 and times[0] == now.replace(second=0) - _minutes(9)


def test_misfire_skip_drops_times_older_than_the_threshold() -> None:
    now = dt.datetime(2026, 7, 1, 12, 0, 30, tzinfo=UTC)
    far = dt.datetime(9999, 1, 1, tzinfo=UTC)
    times, dropped = due_times("0 * * * * ?", "UTC", now - _minutes(60), far, now, SKIP, 90, 100)
    assert times == [now.replace(second=0) - _minutes(1), now.replace(second=0)] and dropped == 58
    # on time (nothing missed): skip changes nothing
    times, dropped = due_times("0 * * * * ?", "UTC", now - dt.timedelta(seconds=31), far, now, SKIP, 60, 100)
    assert times == [now.replace(second=0)] and dropped == 0


def test_fire_times_respect_the_end_time() -> None:
    now = dt.datetime(2026, 7, 1, 12, 0, 30, tzinfo=UTC)
    end = now - _minutes(30)
    times, _ = due_times("0 * * * * ?", "UTC", now - _minutes(60), end, now, FIRE_ALL, 60, 100)
    assert times[-1] <= end and len(times) == 30


async def _schedule(dsn: str, code: int, crontab: str, policy: str = FIRE_ALL, online: bool = True) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        sid = await conn.fetchval(
            "INSERT INTO schedule (workflow_definition_code, start_time, end_time, crontab, misfire_policy)"
            " VALUES ($1, now() - interval '1 day', 'infinity', $2, $3) RETURNING id",
            code,
            crontab,
            policy,
        )
        await set_online(conn, sid, online)
        return int(sid)
    finally:
        await conn.close()


async def test_two_schedulers_firing_the_same_times_make_one_command_each(fresh_db: str) -> None:
    code = await save(fresh_db, "cron-race", [shell("a", "true")])
    sid = await _schedule(fresh_db, code, "* * * * * ?")
    pool = await asyncpg.create_pool(fresh_db, min_size=2, max_size=8, init=register_json)
    try:
        clock = dt.datetime.now(UTC) + dt.timedelta(seconds=20)
        a, b = (Scheduler(pool, lambda: (0, 1), 1, 60, 1000, clock=lambda: clock) for _ in range(2))
        times = [clock.replace(microsecond=0) - dt.timedelta(seconds=s) for s in range(10)]
        results = await asyncio.gather(*(s.fire(sid, times, BASE) for s in (a, b, a, b)))
        assert sum(len(r) for r in results) == 10
        await asyncio.gather(a.tick(), b.tick())
        rows = await query(
            fresh_db, "SELECT schedule_time, count(*) AS n FROM command WHERE schedule_id = $1 GROUP BY 1", sid
        )
        assert rows and all(r["n"] == 1 for r in rows)
        fires = await query(fresh_db, "SELECT count(*) AS n FROM schedule_fire WHERE schedule_id = $1", sid)
        assert fires[0]["n"] == len(rows) >= 20
    finally:
        await pool.close()


async def test_after_downtime_skip_drops_old_times_and_fire_all_fires_them(fresh_db: str) -> None:
    code = await save(fresh_db, "cron-misfire", [shell("a", "true")])
    skip = await _schedule(fresh_db, code, "0 * * * * ?", SKIP)
    fire_all = await _schedule(fresh_db, code, "0 * * * * ?", FIRE_ALL)
    offline = await _schedule(fresh_db, code, "0 * * * * ?", FIRE_ALL, online=False)
    now = dt.datetime.now(UTC)
    await query(fresh_db, "UPDATE schedule SET fired_until = $1", now - _minutes(30))  # down for 30 minutes
    pool = await asyncpg.create_pool(fresh_db, min_size=1, max_size=4, init=register_json)
    try:
        await Scheduler(pool, lambda: (0, 1), 1, 90, 1000, clock=lambda: now).tick()
    finally:
        await pool.close()
    counts = {
        r["schedule_id"]: r["n"]
        for r in await query(fresh_db, "SELECT schedule_id, count(*) AS n FROM command GROUP BY 1")
    }
    assert counts[fire_all] == 30
    assert counts[skip] in (1, 2)  # only the times within the 90 s threshold
    assert offline not in counts
    types = await query(fresh_db, "SELECT DISTINCT command_type FROM command")
    assert [r["command_type"] for r in types] == [6]


@pytest.mark.slow
async def test_each_fire_time_yields_one_instance_while_a_master_is_killed(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str, fresh_db: str
) -> None:
    masters, _ = await started(node_factory, etcd_server, etcd_root, fresh_db, masters=3, workers=1, ttl=2)
    code = await save(fresh_db, "cron-ha", [shell("a", "true")])
    sids = [await _schedule(fresh_db, code, "* * * * * ?") for _ in range(6)]

    async def fired(n: int) -> bool:
        rows = await query(fresh_db, "SELECT count(*) AS n FROM schedule_fire")
        return rows[0]["n"] >= n

    await eventually(lambda: fired(12), 30, "schedules firing")
    assert masters[0].proc.record is not None
    masters[0].proc.record.signal(signal.SIGKILL)
    before = (await query(fresh_db, "SELECT count(*) AS n FROM schedule_fire"))[0]["n"]
    await eventually(lambda: fired(before + 6 * 8), 60, "schedules firing after the kill")
    await query(fresh_db, f"UPDATE schedule SET release_state = {int(ReleaseState.OFFLINE)}")

    async def settled() -> bool:
        rows = await query(fresh_db, "SELECT count(*) AS n FROM command")
        running = await query(
            fresh_db, f"SELECT count(*) AS n FROM workflow_instance WHERE state NOT IN {sql_codes(_ENDED)}"
        )
        return rows[0]["n"] == 0 and running[0]["n"] == 0

    await eventually(settled, 60, "every fired command claimed and finished")
    for sid in sids:
        fires = [r["fire_time"] for r in await query(
            fresh_db, "SELECT fire_time FROM schedule_fire WHERE schedule_id = $1 ORDER BY 1", sid
        )]  # fmt: skip
        assert len(fires) >= 10
        # no fire time was missed while the killed master's schedules moved to the survivors
        assert all((b - a) == dt.timedelta(seconds=1) for a, b in itertools.pairwise(fires)), sid
        per_time = await query(
            fresh_db,
            "SELECT schedule_time, count(*) AS n, min(state) AS state FROM workflow_instance"
            " WHERE command_id IN (SELECT command_id FROM schedule_fire WHERE schedule_id = $1) GROUP BY 1",
            sid,
        )
        assert sorted(r["schedule_time"] for r in per_time) == fires
        assert all(r["n"] == 1 and r["state"] == WorkflowState.SUCCESS for r in per_time)
    errors = await query(fresh_db, "SELECT count(*) AS n FROM error_command")
    assert errors[0]["n"] == 0


async def test_a_schedule_put_online_before_its_start_time_fires_nothing_before_it(fresh_db: str) -> None:
    code = await save(fresh_db, "cron-start", [shell("a", "true")])
    sid = await _schedule(fresh_db, code, "0 * * * * ?")
    now = dt.datetime.now(UTC)
    start = (now + _minutes(30)).replace(second=10, microsecond=0)
    await query(fresh_db, "UPDATE schedule SET start_time = $1", start)
    pool = await asyncpg.create_pool(fresh_db, min_size=1, max_size=4, init=register_json)
    try:
        scheduler = Scheduler(pool, lambda: (0, 1), 1, 3600, 1000, clock=lambda: now + _minutes(10))
        nxt = await scheduler.tick()  # online now, start in 30 min: nothing is due 10 min later
        assert nxt is not None and nxt >= start
        assert await query(fresh_db, "SELECT id FROM command WHERE schedule_id = $1", sid) == []
        scheduler.clock = lambda: start + dt.timedelta(seconds=150)
        await scheduler.tick()
        rows = await query(fresh_db, "SELECT schedule_time FROM command WHERE schedule_id = $1 ORDER BY 1", sid)
        assert [r["schedule_time"] for r in rows] == [
            start.replace(second=0, microsecond=0) + _minutes(i) for i in (1, 2)
        ]
    finally:
        await pool.close()


class _AheadDatetime(dt.datetime):
    """datetime whose now() reads 10 minutes ahead: this master's wall clock stepped forward."""

    @classmethod
    def now(cls, tz: dt.tzinfo | None = None) -> _AheadDatetime:  # type: ignore[override]
        return super().now(tz) + _minutes(10)


async def test_a_master_whose_clock_runs_ahead_fires_nothing_before_the_database_time(
    fresh_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = await save(fresh_db, "cron-ahead", [shell("a", "true")])
    sid = await _schedule(fresh_db, code, "0 * * * * ?")
    await query(fresh_db, "UPDATE schedule SET fired_until = now() - interval '5 minutes'")
    ahead = type("dt", (), {"datetime": _AheadDatetime, "timedelta": dt.timedelta, "UTC": dt.UTC})
    monkeypatch.setattr(scheduler_module, "dt", ahead)  # the master's clock, 10 minutes fast
    pool = await asyncpg.create_pool(fresh_db, min_size=1, max_size=4, init=register_json)
    try:
        await Scheduler(pool, lambda: (0, 1), 1, 3600, 1000).tick()
    finally:
        await pool.close()
    rows = await query(
        fresh_db, "SELECT schedule_time, schedule_time <= now() AS come FROM command WHERE schedule_id = $1", sid
    )
    assert len(rows) in (4, 5, 6) and all(r["come"] for r in rows)  # the 5 missed minutes, none of the 10 ahead
    watermark = await query(fresh_db, "SELECT fired_until <= now() AS ok FROM schedule WHERE id = $1", sid)
    assert watermark[0]["ok"]


async def test_a_crontab_failing_after_it_was_saved_skips_only_its_schedule(fresh_db: str) -> None:
    code = await save(fresh_db, "cron-bad", [shell("a", "true")])
    bad = await _schedule(fresh_db, code, "0 0 0 1 1 ? 2099")  # fires in 2099, then no more
    good = await _schedule(fresh_db, code, "0 * * * * ?")
    await query(fresh_db, "UPDATE schedule SET crontab = '0 0 0 1 1 ? 9999' WHERE id = $1", bad)  # an old row
    now = dt.datetime.now(UTC)
    await query(fresh_db, "UPDATE schedule SET fired_until = $1", now - _minutes(5))
    pool = await asyncpg.create_pool(fresh_db, min_size=1, max_size=4, init=register_json)
    try:
        await Scheduler(pool, lambda: (0, 1), 1, 3600, 1000, clock=lambda: now).tick()
    finally:
        await pool.close()
    rows = await query(fresh_db, "SELECT schedule_id, count(*) AS n FROM command GROUP BY 1")
    assert {r["schedule_id"]: r["n"] for r in rows} == {good: 5}


async def test_a_daily_new_york_schedule_fires_once_on_the_fall_back_night(fresh_db: str) -> None:
    code = await save(fresh_db, "cron-dst", [shell("a", "true")])
    sid = await _schedule(fresh_db, code, "30 1 * * *")
    await query(fresh_db, "UPDATE schedule SET timezone_id = 'America/New_York'")
    night = dt.datetime(2026, 11, 1, 4, tzinfo=UTC)  # 00:00 EDT; the clocks go back at 02:00 EDT
    await query(fresh_db, "UPDATE schedule SET start_time = $1, fired_until = $1", night)
    pool = await asyncpg.create_pool(fresh_db, min_size=1, max_size=4, init=register_json)
    try:
        scheduler = Scheduler(pool, lambda: (0, 1), 1, 10**9, 1000, clock=lambda: night)
        for minutes in range(0, 4 * 60, 10):  # a tick every 10 minutes through the night
            scheduler.clock = lambda m=minutes: night + _minutes(m)
            await scheduler.tick()
    finally:
        await pool.close()
    rows = await query(fresh_db, "SELECT schedule_time FROM command WHERE schedule_id = $1 ORDER BY 1", sid)
    assert [r["schedule_time"] for r in rows] == [dt.datetime(2026, 11, 1, 5, 30, tzinfo=UTC)]  # 01:30 EDT


async def test_a_schedule_in_a_zone_that_shifts_twice_fires_each_wall_clock_time_once(
    fresh_db: str, tmp_path: Path
) -> None:
    # the chaos round's zone (tests/chaos_dst.py): clocks forward 3 fire times, then back; its expectation
    # is worked out step by step, independently of engine/scheduling/cron.py
    from tests import chaos_dst

    code = await save(fresh_db, "cron-shift", [shell("a", "true")])
    sid = await _schedule(fresh_db, code, chaos_dst.CRON)
    start = dt.datetime(2026, 11, 27, 1, 0, tzinfo=UTC)
    end = start + dt.timedelta(seconds=chaos_dst.LENGTH)
    zone = chaos_dst.write_zone(
        tmp_path,
        start + dt.timedelta(seconds=chaos_dst.FORWARD_AT),
        start + dt.timedelta(seconds=chaos_dst.BACK_AT),
    )
    chaos_dst.use_zones(tmp_path)
    await query(
        fresh_db,
        "UPDATE schedule SET timezone_id = $1, start_time = $2, end_time = $3, fired_until = NULL",
        zone,
        start,
        end,
    )
    pool = await asyncpg.create_pool(fresh_db, min_size=1, max_size=4)
    try:
        scheduler = Scheduler(pool, lambda: (0, 1), 1, 10**9, 1000, clock=lambda: start)
        for tenths in range(0, (chaos_dst.LENGTH + 2 * chaos_dst.STEP) * 10, 15):  # 1.5 s: several per fire
            scheduler.clock = lambda t=tenths: start + dt.timedelta(seconds=t / 10)
            await scheduler.tick()
    finally:
        await pool.close()
    rows = await query(fresh_db, "SELECT schedule_time FROM command WHERE schedule_id = $1 ORDER BY 1", sid)
    fired = [r["schedule_time"] for r in rows]
    want = chaos_dst.expected_fires(zone, start, end)
    assert fired == want, (fired, want)
    # three fire times skipped going forward, three repeated going back: neither fires
    shifted = int(chaos_dst.SHIFT.total_seconds()) // chaos_dst.STEP
    assert shifted == 3 and len(want) == chaos_dst.LENGTH // chaos_dst.STEP + 1 - shifted
