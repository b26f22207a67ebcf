"""Fire times (engine/scheduling/cron.py) cost bounded work whatever the expression: year lists with
gaps are jumped over, not walked through; clock changes fire each wall-clock time once."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest
from croniter import CroniterError, croniter
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.scheduling.cron import MAX_STEPS, MAX_YEAR, MIN_YEAR, CronError, Meter, next_times, parse

UTC = dt.UTC
NEW_YORK = "America/New_York"


def _iso(times: list[dt.datetime]) -> list[str]:
    return [t.strftime("%Y-%m-%dT%H:%M:%S") for t in times]


# (expression, zone, after (UTC), expected fire times (UTC)): year gaps and clock changes
EDGE_CASES = [
    # the review's crontabs: the skipped years cost one jump, not every fire time in them
    ("*/10 * * * * ? 2025,2027", "UTC", dt.datetime(2025, 12, 31, 23, 59, 45, tzinfo=UTC),
     ["2025-12-31T23:59:50", "2027-01-01T00:00:00", "2027-01-01T00:00:10"]),
    ("* * * * * ? 2025,2099", "UTC", dt.datetime(2025, 12, 31, 23, 59, 59, tzinfo=UTC),
     ["2099-01-01T00:00:00", "2099-01-01T00:00:01"]),
    ("0 0 12 ? * MON 2026-2027,2030/5", "UTC", dt.datetime(2027, 12, 27, 13, tzinfo=UTC),
     ["2030-01-07T12:00:00", "2030-01-14T12:00:00"]),
    # 29 February in allowed years without one: the iteration ends
    ("0 0 0 29 2 ? 2025-2027,2029-2031", "UTC", dt.datetime(2025, 1, 1, tzinfo=UTC), []),
    # fall-back in New York (2026-11-01 02:00 EDT -> 01:00 EST): 01:30 fires once, at its first occurrence
    ("30 1 * * *", NEW_YORK, dt.datetime(2026, 10, 31, tzinfo=UTC),
     ["2026-10-31T05:30:00", "2026-11-01T05:30:00", "2026-11-02T06:30:00"]),
    ("0 30 1 * * ?", NEW_YORK, dt.datetime(2026, 11, 1, 5, 45, tzinfo=UTC), ["2026-11-02T06:30:00"]),
    ("0 */30 * * * ?", NEW_YORK, dt.datetime(2026, 11, 1, 4, 50, tzinfo=UTC),
     ["2026-11-01T05:00:00", "2026-11-01T05:30:00", "2026-11-01T07:00:00", "2026-11-01T07:30:00"]),
    ("* * * * * ?", NEW_YORK, dt.datetime(2026, 11, 1, 5, 59, 58, tzinfo=UTC),
     ["2026-11-01T05:59:59", "2026-11-01T07:00:00"]),
    # spring-forward (2026-03-08 02:00 EST -> 03:00 EDT): 02:30 does not exist and fires once, at 03:00
    ("30 2 * * *", NEW_YORK, dt.datetime(2026, 3, 7, tzinfo=UTC),
     ["2026-03-07T07:30:00", "2026-03-08T07:00:00", "2026-03-09T06:30:00"]),
    # a 30-minute change (Lord Howe, 2026-04-05 02:00 -> 01:30)
    ("0 45 1 * * ?", "Australia/Lord_Howe", dt.datetime(2026, 4, 3, tzinfo=UTC),
     ["2026-04-03T14:45:00", "2026-04-04T14:45:00", "2026-04-05T15:15:00"]),
]  # fmt: skip


@pytest.mark.parametrize(("expr", "tz", "after", "expected"), EDGE_CASES)
def test_year_gaps_and_clock_changes_fire_as_quartz_within_bounded_work(
    expr: str, tz: str, after: dt.datetime, expected: list[str]
) -> None:
    meter = Meter()
    times = next_times(parse(expr), tz, after, len(expected) or 3, meter=meter)
    assert _iso(times) == expected
    assert meter.peak <= 4 and meter.total <= 4 * (len(expected) + 1)


def test_a_daily_time_fires_once_per_business_date_across_a_whole_year_of_clock_changes() -> None:
    zone = ZoneInfo(NEW_YORK)
    times = next_times(parse("30 1 * * *"), NEW_YORK, dt.datetime(2026, 1, 1, tzinfo=UTC), 400)
    local = [t.astimezone(zone) for t in times if t.year == 2026]
    assert len(local) == 365 and len({t.date() for t in local}) == 365
    assert all((t.hour, t.minute) == (1, 30) for t in local)


@pytest.mark.parametrize(
    ("expr", "part"),
    [("0 0 0 1 1 ? 9999", "1970-2099"), ("0 0 0 1 1 ? 1969", "1970-2099"), ("0 0 0 1 1 ? 2026-2100", "1970-2099")],
)
def test_years_outside_quartz_range_are_refused(expr: str, part: str) -> None:
    with pytest.raises(CronError, match=part):
        parse(expr)


def test_a_fire_time_past_the_step_bound_is_refused_with_a_limit_error() -> None:
    # 29 February in non-leap years only, with the one leap year far away: every year on the way is a jump
    leap_free = ",".join(str(y) for y in range(1970, 2099) if y % 4 != 0)
    cron = parse(f"0 0 0 29 2 ? {leap_free},2096")
    with pytest.raises(CronError) as info:
        next_times(cron, "UTC", dt.datetime(1970, 1, 1, tzinfo=UTC), 1)
    assert info.value.limit
    assert next_times(cron, "UTC", dt.datetime(2060, 1, 1, tzinfo=UTC), 1) == [dt.datetime(2096, 2, 29, tzinfo=UTC)]


# -- bounded work, whatever the expression ----------------------------------------------------------

_YEAR = st.integers(MIN_YEAR, MAX_YEAR)
_YEARS = st.one_of(
    st.just(""),
    st.just(" *"),
    st.lists(_YEAR, min_size=1, max_size=6).map(lambda ys: " " + ",".join(map(str, ys))),
    st.tuples(_YEAR, _YEAR, st.integers(1, 40)).map(lambda t: f" {min(t[:2])}-{max(t[:2])}/{t[2]}"),
)
_DAYS = st.one_of(
    st.tuples(st.sampled_from(["*", "1", "15", "29", "30", "31", "L", "15W", "1-10/3", "28-31"]), st.just("?")),
    st.tuples(st.just("?"), st.sampled_from(["*", "1", "2-6", "MON,FRI", "6#3", "5L", "7#5", "1/3"])),
)
QUARTZ = st.tuples(
    st.sampled_from(["0", "*", "*/10", "5,35", "59"]),
    st.sampled_from(["0", "*", "*/15", "30", "0-5"]),
    st.sampled_from(["0", "*", "1", "2", "1-3", "23", "*/6"]),
    _DAYS,
    st.sampled_from(["*", "2", "1-3", "2/6", "12", "FEB,AUG"]),
    _YEARS,
).map(lambda t: f"{t[0]} {t[1]} {t[2]} {t[3][0]} {t[4]} {t[3][1]}{t[5]}")
ZONES = st.sampled_from(["UTC", NEW_YORK, "Europe/Paris", "Australia/Lord_Howe", "Asia/Kolkata"])
AFTER = st.datetimes(dt.datetime(1971, 1, 1), dt.datetime(2098, 12, 31), timezones=st.just(UTC))


def _reference(expr: str, tz: str, after: dt.datetime, count: int) -> list[dt.datetime] | None:
    """The fire times by walking croniter through every candidate (None when that walk is long)."""
    cron = parse(expr)
    it = croniter(cron.expr, after.astimezone(ZoneInfo(tz)), second_at_beginning=cron.seconds)
    out: list[dt.datetime] = []
    for _ in range(3000):
        try:
            when: dt.datetime = it.get_next(dt.datetime)
        except (CroniterError, ValueError, OverflowError):
            return out
        if cron.years is not None and when.year > max(cron.years):
            return out
        ambiguous = when.fold == 1 and when.utcoffset() != when.replace(fold=0).utcoffset()
        if (cron.years is None or when.year in cron.years) and not ambiguous:
            out.append(when.astimezone(UTC))
            if len(out) == count:
                return out
    return None


@settings(max_examples=300, deadline=None)
@given(QUARTZ, ZONES, AFTER)
def test_random_crontabs_fire_within_bounded_work_and_as_the_exhaustive_walk(
    expr: str, tz: str, after: dt.datetime
) -> None:
    cron = parse(expr)
    meter = Meter()
    try:
        times = next_times(cron, tz, after, 5, meter=meter)
    except CronError as exc:
        assert exc.limit and meter.peak == MAX_STEPS + 1
        return
    assert meter.peak <= MAX_STEPS and meter.total <= 6 * MAX_STEPS
    assert times == sorted(set(times)) and all(t > after for t in times)
    for t in times:
        local = t.astimezone(ZoneInfo(tz))
        assert cron.years is None or local.year in cron.years
    expected = _reference(expr, tz, after, 5)
    if expected is not None:
        assert times == expected
