"""Parameters and DolphinScheduler time placeholders (table cases + property tests)."""

from __future__ import annotations

import calendar
import datetime as dt
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.params import (
    Property,
    add_months,
    builtins,
    java_format,
    out_params,
    parse_set_values,
    resolve,
    substitute,
    time_placeholder,
)

T = dt.datetime(2026, 3, 1, 10, 30, 45)

times = st.datetimes(min_value=dt.datetime(1971, 1, 1), max_value=dt.datetime(2200, 12, 31))


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("yyyyMMdd", "20260301"),
        ("yyyy-MM-dd", "2026-03-01"),
        ("yyyy-MM-dd HH:mm:ss", "2026-03-01 10:30:45"),
        ("yyyyMMdd-1", "20260228"),
        ("yyyyMMdd+1", "20260302"),
        ("yyyyMMdd+7*2", "20260315"),
        ("yyyy-MM-dd-1", "2026-02-28"),
        ("HHmmss+1/24", "113045"),
        ("HHmmss-1/24/60", "102945"),
        ("HH:mm-30/24/60", "10:00"),
        ("add_months(yyyyMMdd,-1)", "20260201"),
        ("add_months(yyyyMM,12)", "202703"),
        ("month_begin(yyyyMMdd,0)", "20260301"),
        ("month_end(yyyyMMdd,-1)", "20260228"),
        ("week_begin(yyyyMMdd,0)", "20260223"),
        ("week_end(yyyyMMdd,0)", "20260301"),
        ("this_day(yyyy-MM-dd)", "2026-03-01"),
        ("last_day(yyyy-MM-dd)", "2026-02-28"),
        ("yyyyMMdd'T'HH", "20260301T10"),
    ],
)
def test_time_placeholders(expr: str, expected: str) -> None:
    assert time_placeholder(expr, T) == expected


def test_unknown_function_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown time function 'tomorrow'"):
        time_placeholder("tomorrow(yyyyMMdd)", T)


@pytest.mark.parametrize(
    ("expr", "reason"),
    [
        ("yyyyMMdd+99999999", "is out of the date range"),
        ("yyyyMMdd-99999999", "is out of the date range"),
        ("week_begin(yyyyMMdd,999999999)", "is out of the date range"),
        ("HHmmss+1/0", "divides by zero"),
        ("timestamp(yyyyMMdd+1/0)", "divides by zero"),
    ],
)
def test_arithmetic_that_cannot_be_done_is_a_value_error_naming_the_expression(expr: str, reason: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"$[{expr}] {reason}")):
        time_placeholder(expr, T)


@given(times, st.integers(0, 4000))
def test_day_arithmetic_matches_timedelta(when: dt.datetime, n: int) -> None:
    assert time_placeholder(f"yyyyMMdd-{n}", when) == (when - dt.timedelta(days=n)).strftime("%Y%m%d")
    assert time_placeholder(f"yyyyMMdd+{n}", when) == (when + dt.timedelta(days=n)).strftime("%Y%m%d")


@given(times, st.integers(0, 500))
def test_hour_and_minute_fractions(when: dt.datetime, n: int) -> None:
    assert time_placeholder(f"yyyyMMddHHmm-{n}/24", when) == (when - dt.timedelta(hours=n)).strftime("%Y%m%d%H%M")
    assert time_placeholder(f"yyyyMMddHHmm+{n}/24/60", when) == (when + dt.timedelta(minutes=n)).strftime("%Y%m%d%H%M")


@given(times, st.integers(-600, 600))
def test_add_months_clamps_and_inverts_on_the_first(when: dt.datetime, n: int) -> None:
    moved = add_months(when, n)
    assert (moved.year * 12 + moved.month) - (when.year * 12 + when.month) == n
    assert moved.day == min(when.day, calendar.monthrange(moved.year, moved.month)[1])
    first = when.replace(day=1)
    assert add_months(add_months(first, n), -n) == first


@given(times, st.integers(-24, 24))
def test_month_and_week_bounds(when: dt.datetime, n: int) -> None:
    begin = dt.datetime.strptime(time_placeholder(f"month_begin(yyyyMMdd,{n})", when), "%Y%m%d")
    end = dt.datetime.strptime(time_placeholder(f"month_end(yyyyMMdd,{n})", when), "%Y%m%d")
    assert begin.day == 1 and (end + dt.timedelta(days=1)).day == 1 and begin.month == end.month
    wb = dt.datetime.strptime(time_placeholder(f"week_begin(yyyyMMdd,{n % 5})", when), "%Y%m%d")
    we = dt.datetime.strptime(time_placeholder(f"week_end(yyyyMMdd,{n % 5})", when), "%Y%m%d")
    assert wb.weekday() == 0 and we.weekday() == 6 and (we - wb).days == 6


@given(times)
def test_java_format_matches_strftime(when: dt.datetime) -> None:
    assert java_format(when, "yyyy-MM-dd HH:mm:ss") == when.strftime("%Y-%m-%d %H:%M:%S")


def test_builtins_follow_the_schedule_time() -> None:
    values = builtins(T, task_instance_id=9)
    assert values == {
        "system.biz.date": "20260228",
        "system.biz.curdate": "20260301",
        "system.datetime": "20260301103045",
        "system.task.instance.id": "9",
    }


def test_precedence_globals_var_pool_locals() -> None:
    values = resolve(
        [Property("a", value="global"), Property("b", value="global"), Property("day", value="$[yyyyMMdd]")],
        [Property("b", value="upstream"), Property("c", value="upstream"), Property("e", value="")],
        [Property("c", value="local ${system.biz.date}"), Property("o", direct="OUT")],
        T,
        builtins(T),
    )
    assert values["a"] == "global" and values["b"] == "upstream" and values["c"] == "local 20260228"
    assert values["day"] == "20260301" and values["e"] == ""


def test_substitute_leaves_unknown_names() -> None:
    assert substitute("${x} ${unknown} $[yyyy]", {"x": "1"}, T) == "1 ${unknown} 2026"


def test_set_value_lines_and_out_params() -> None:
    assert parse_set_values("${setValue(a=1)} and #{setValue( b = two words )}") == [
        ("a", "1"),
        ("b", "two words"),
    ]
    assert parse_set_values("no marker here") == []
    local = [Property("a", "OUT"), Property("x", "IN", value="1"), Property("missing", "OUT", value="dflt")]
    assert out_params(local, {"a": "1", "zzz": "2"}) == [
        Property("a", "OUT", value="1"),
        Property("missing", "OUT", value="dflt"),
    ]


@pytest.mark.parametrize("bad", [{"prop": ""}, {"value": "1"}, {"prop": "a", "direct": "SIDEWAYS"}])
def test_bad_properties_are_refused(bad: dict) -> None:
    with pytest.raises(ValueError):
        Property.from_dict(bad)
