"""Parameters and DolphinScheduler time placeholders (table cases + property tests)."""

from __future__ import annotations

import calendar
import datetime as dt
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.params import (
    Property,
    builtins,
    check_placeholders,
    out_params,
    parse_set_values,
    resolve,
    substitute,
    time_placeholder,
)
from engine.time_placeholders import PlaceholderError, add_months, int_expr, java_format
from engine.workflows import document
from engine.workflows.model import DefinitionError

T = dt.datetime(2026, 3, 1, 10, 30, 45)  # a Sunday

times = st.datetimes(min_value=dt.datetime(1971, 1, 1), max_value=dt.datetime(2200, 12, 31))

# Rows cite where DolphinScheduler (3.1.9 and 3.2.2, dolphinscheduler-task-plugin/dolphinscheduler-task-api
# .../plugin/task/api/parser/TimePlaceholderUtils.java, "TPU" below; dates via spi/utils/DateUtils.java,
# formatting with java.time DateTimeFormatter) defines the result.
DS_TABLE = [
    # TPU.calcMinutes(expression, date): no +/- -> the whole text is the pattern
    ("yyyyMMdd", "20260301"),
    ("yyyy-MM-dd", "2026-03-01"),
    ("yyyy-MM-dd HH:mm:ss", "2026-03-01 10:30:45"),
    ("yyyyMMdd'T'HH", "20260301T10"),
    ("EEE MMM d", "Sun Mar 1"),
    # TPU.calcMinutes: last '+' (else last '-') followed by a digit: days as 60*24*(N) minutes
    ("yyyyMMdd-1", "20260228"),
    ("yyyyMMdd+1", "20260302"),
    ("yyyyMMdd+7*2", "20260315"),
    ("yyyy-MM-dd-1", "2026-02-28"),
    # TPU.calcMinutes(String): '/' divides the minutes: 60*24*(1)/24 = 60
    ("HHmmss+1/24", "113045"),
    ("HHmmss-1/24/60", "102945"),
    ("HH:mm-30/24/60", "10:00"),
    # ... in Java int arithmetic: 60*24*(1)/7 = 205 minutes, not 205.71
    ("HHmmss+1/7", "135545"),
    # '-' followed by a non-digit: no offset, the text is the pattern (literal " - 1" kept)
    ("yyyyMMdd - 1", "20260301 - 1"),
    # TPU.calcMonths: DateUtils.addMonths(date, calculate(N)); N an integer expression
    ("add_months(yyyyMMdd,-1)", "20260201"),
    ("add_months(yyyyMM,12)", "202703"),
    ("add_months(yyyyMMdd,12*2)", "20280301"),
    ("add_months(yyyyMMdd,-3*4)", "20250301"),
    ("add_months(yyyyMMdd,(1+2)*-2)", "20250901"),
    # TPU.calcMonthBegin / calcMonthEnd: getFirstDayOfMonth / getLastDayOfMonth, then addDays(N): N is days
    ("month_begin(yyyyMMdd,0)", "20260301"),
    ("month_begin(yyyyMMdd,1)", "20260302"),
    ("month_begin(yyyyMMdd,-1)", "20260228"),
    ("month_end(yyyyMMdd,0)", "20260331"),
    ("month_end(yyyyMMdd,-1)", "20260330"),
    ("month_end(yyyyMMdd,1)", "20260401"),
    # TPU.calcWeekStart / calcWeekEnd: getMonday / getSunday of the Monday-first week, then addDays(N)
    ("week_begin(yyyyMMdd,0)", "20260223"),
    ("week_begin(yyyyMMdd,2)", "20260225"),
    ("week_begin(yyyyMMdd,-7)", "20260216"),
    ("week_end(yyyyMMdd,0)", "20260301"),
    ("week_end(yyyyMMdd,-1)", "20260228"),
    # TPU.calcCustomDay THIS_DAY / LAST_DAY (3.1.1+ "business attribute" functions)
    ("this_day(yyyy-MM-dd)", "2026-03-01"),
    ("last_day(yyyy-MM-dd)", "2026-02-28"),
    # TPU.calcCustomDay MONTH_FIRST_DAY: addMonths(getFirstDayOfMonth(date), N)
    ("month_first_day(yyyy-MM-dd)", "2026-03-01"),
    ("month_first_day(yyyy-MM-dd,-1)", "2026-02-01"),
    ("month_first_day(yyyyMMdd,2*6)", "20270301"),
    # TPU.calcCustomDay MONTH_LAST_DAY: getLastDayOfMonth(addMonths(date, N))
    ("month_last_day(yyyy-MM-dd)", "2026-03-31"),
    ("month_last_day(yyyy-MM-dd,-1)", "2026-02-28"),
    # TPU.calcCustomDay WEEK_FIRST_DAY / WEEK_LAST_DAY: addWeeks(getMonday / getSunday, N)
    ("week_first_day(yyyy-MM-dd)", "2026-02-23"),
    ("week_first_day(yyyy-MM-dd,-1)", "2026-02-16"),
    ("week_last_day(yyyy-MM-dd)", "2026-03-01"),
    ("week_last_day(yyyy-MM-dd,1)", "2026-03-08"),
    # TPU.calculateYearWeek / transformYearWeek: Calendar WEEK_OF_YEAR, minimalDaysInFirstWeek 4, first day
    # of week N (1 Monday .. 7 Sunday), "yyyy-ww" when the pattern holds '-' else "yyyyww"
    ("year_week(yyyy-MM-dd)", "2026-09"),
    ("year_week(yyyyMMdd)", "202609"),
    ("year_week(yyyy-MM-dd,7)", "2026-09"),
    # TPU.calculateTime TIMESTAMP: format with the inner pattern, parse as yyyyMMddHHmmss, epoch seconds
    ("timestamp(yyyyMMddHHmmss)", str(int(T.timestamp()))),
    ("timestamp(yyyyMMdd000000)", str(int(dt.datetime(2026, 3, 1).timestamp()))),
    ("timestamp(yyyyMMddHH0000-1)", str(int(dt.datetime(2026, 2, 28, 10).timestamp()))),
    ("timestamp(month_begin(yyyyMMdd000000,0))", str(int(dt.datetime(2026, 3, 1).timestamp()))),
    ("timestamp(add_months(yyyyMMddHHmmss,-1))", str(int(dt.datetime(2026, 2, 1, 10, 30, 45).timestamp()))),
]


@pytest.mark.parametrize(("expr", "expected"), DS_TABLE)
def test_time_placeholders(expr: str, expected: str) -> None:
    assert time_placeholder(expr, T) == expected


@pytest.mark.parametrize(
    ("when", "expr", "expected"),
    [
        # the docs' examples for 3.1.1+ (docs/docs/en/guide/parameter/built-in.md), 2022-08-26 a Friday
        (dt.datetime(2022, 8, 26), "year_week(yyyy-MM-dd)", "2022-34"),
        (dt.datetime(2022, 8, 26), "year_week(yyyy-MM-dd,5)", "2022-35"),
        (dt.datetime(2022, 8, 26), "week_first_day(yyyy-MM-dd,-1)", "2022-08-15"),
        (dt.datetime(2022, 8, 26), "week_last_day(yyyy-MM-dd,-1)", "2022-08-21"),
        (dt.datetime(2022, 8, 28), "month_last_day(yyyy-MM-dd,-1)", "2022-07-31"),
        # transformYearWeek prints Calendar.YEAR, the calendar year, beside the week number
        (dt.datetime(2021, 1, 1), "year_week(yyyy-MM-dd)", "2021-53"),
        (dt.datetime(2024, 12, 30), "year_week(yyyyMMdd)", "202401"),
        # DateUtils.addMonths on Calendar: the day is clamped to the month's length
        (dt.datetime(2024, 1, 31), "add_months(yyyyMMdd,1)", "20240229"),
        (dt.datetime(2024, 3, 31), "month_last_day(yyyyMMdd,-1)", "20240229"),
        (dt.datetime(2024, 3, 31), "month_first_day(yyyyMMdd,-1)", "20240201"),
    ],
)
def test_time_placeholders_at_other_dates(when: dt.datetime, expr: str, expected: str) -> None:
    assert time_placeholder(expr, when) == expected


@pytest.mark.parametrize(
    ("text", "value"),
    # TPU.calculate: integer + - * / with parentheses and unary signs; Java int division truncates to zero
    [("12*2", 24), ("-3*4", -12), ("-7/2", -3), ("7/-2", -3), ("1+2*3", 7), ("(1+2)*3", 9), ("--1", 1), (" 5 ", 5)],
)
def test_integer_expressions(text: str, value: int) -> None:
    assert int_expr(text) == value


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # ParameterUtils.DATE_PARSE_PATTERN \$\[([^\$\]]+)] : content holding '$' is not a time placeholder
        ("x=$[${n}-1]", "x=$[${n}-1]"),
        # bash arithmetic, content starting with a digit, is left as it is. DolphinScheduler 3.1.9 skips only
        # a single digit (ParameterUtils.dateTemplateParse: Pattern.matches("^[0-9]", key)) and renders
        # $[3+4] as "3" (pattern "3", plus 4 days); Porpoise keeps the whole of it
        ("echo $[3+4] $[1] $[10-2*3]", "echo $[3+4] $[1] $[10-2*3]"),
        ("a=$[yyyy] b=$[3*2] c=$[MM]", "a=2026 b=$[3*2] c=03"),
        ("no placeholder $[] here", "no placeholder $[] here"),
    ],
)
def test_what_is_not_a_time_placeholder_stays(text: str, expected: str) -> None:
    assert substitute(text, {}, T) == expected


@pytest.mark.parametrize(
    ("expr", "reason"),
    [
        ("i+1", "pattern letter 'i' is not supported"),  # DateTimeFormatter: Unknown pattern letter
        ("yyyyMMdd{", "reserved"),
        ("ddd", "too many pattern letters"),
        ("yyyy'T", "unclosed quote"),
        ("yyyy+", "a number must follow"),
        ("+1", "a date pattern must come before"),
        ("add_months(yyyyMMdd)", "takes 2 argument"),  # TPU.calcMonths: params.length == 2 else "not valid"
        ("month_begin(yyyyMMdd)", "takes 2 argument"),
        ("week_end(yyyyMMdd,1,2)", "takes 2 argument"),
        ("month_first_day(yyyyMMdd,1,2)", "takes 1 or 2 argument"),
        ("this_day(yyyyMMdd,1)", "takes 1 argument"),
        ("add_months(yyyyMMdd,x)", "not an integer expression"),
        ("add_months(yyyyMMdd,1/0)", "division by zero"),
        ("add_months(yyyyMMdd,(1)", "unbalanced"),
        ("tomorrow(yyyyMMdd)", "unknown time function 'tomorrow'"),
        ("timestamp(yyyyMMdd)", "not yyyyMMddHHmmss"),  # DateUtils.parse(.., yyyyMMddHHmmss) -> null -> error
        ("timestamp(timestamp(yyyyMMddHHmmss))", "cannot be nested"),
        ("add_months(yyyyMMdd,99999999)", "out of range"),
    ],
)
def test_a_malformed_expression_is_refused_with_its_reason(expr: str, reason: str) -> None:
    with pytest.raises(PlaceholderError, match="bad time placeholder") as caught:
        time_placeholder(expr, T)
    assert reason in caught.value.reason and caught.value.expr == expr
    with pytest.raises(PlaceholderError):  # the save-time check refuses the same text
        check_placeholders(f"echo $[yyyy] $[{expr}]")


def test_a_bad_expression_never_half_renders_a_text() -> None:
    with pytest.raises(PlaceholderError, match=r"\$\[i\+1\]"):
        substitute("a=$[yyyy] b=$[i+1] c=${x}", {"x": "1"}, T)


def test_a_definition_with_a_bad_placeholder_is_refused_at_save_time() -> None:
    doc: dict[str, Any] = {
        "name": "w",
        "project": "p",
        "tasks": [{"name": "a", "type": "SHELL", "params": {"rawScript": "echo $[3+4] $[yyyyMMdd-1]"}}],
    }
    document.parse(doc)  # bash arithmetic and a good expression pass
    doc["tasks"][0]["params"]["rawScript"] += " $[add_months(yyyyMMdd)]"
    with pytest.raises(DefinitionError) as caught:
        document.parse(doc)
    assert caught.value.field == "tasks[0].params.rawScript"
    assert "$[add_months(yyyyMMdd)]: add_months() takes 2 argument(s)" in caught.value.reason
    doc["tasks"][0]["params"] = {"rawScript": "echo", "localParams": [{"prop": "d", "value": "$[week_begin(yyyy)]"}]}
    with pytest.raises(DefinitionError, match=r"tasks\[0\]\.params\.localParams\[0\]\.value"):
        document.parse(doc)


def test_unknown_function_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown time function 'tomorrow'"):
        time_placeholder("tomorrow(yyyyMMdd)", T)


@pytest.mark.parametrize(
    ("expr", "reason"),
    [
        ("yyyyMMdd+99999999", "the date is out of range"),
        ("yyyyMMdd-99999999", "the date is out of range"),
        ("week_begin(yyyyMMdd,999999999)", "the date is out of range"),
        ("HHmmss+1/0", "division by zero"),
        ("timestamp(yyyyMMdd+1/0)", "division by zero"),
    ],
)
def test_arithmetic_that_cannot_be_done_is_a_value_error_naming_the_expression(expr: str, reason: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"$[{expr}]: {reason}")):
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


@given(times, st.integers(-400, 400))
def test_month_and_week_offsets_count_days_and_the_32_functions_count_months_and_weeks(
    when: dt.datetime, n: int
) -> None:
    def day(expr: str) -> dt.date:
        return dt.datetime.strptime(time_placeholder(expr, when), "%Y%m%d").date()

    today = when.date()
    first = today.replace(day=1)
    last = today.replace(day=calendar.monthrange(today.year, today.month)[1])
    monday = today - dt.timedelta(days=today.weekday())
    # TPU.calcMonthBegin / calcMonthEnd / calcWeekStart / calcWeekEnd: the bound, then addDays(N)
    assert day(f"month_begin(yyyyMMdd,{n})") == first + dt.timedelta(days=n)
    assert day(f"month_end(yyyyMMdd,{n})") == last + dt.timedelta(days=n)
    assert day(f"week_begin(yyyyMMdd,{n})") == monday + dt.timedelta(days=n)
    assert day(f"week_end(yyyyMMdd,{n})") == monday + dt.timedelta(days=6 + n)
    # TPU.calcCustomDay: months for month_first_day / month_last_day, weeks for week_first_day / week_last_day
    m = n % 48 - 24
    moved = add_months(when, m).date()
    assert day(f"month_first_day(yyyyMMdd,{m})") == moved.replace(day=1)
    assert day(f"month_last_day(yyyyMMdd,{m})") + dt.timedelta(days=1) == add_months(moved.replace(day=1), 1)
    assert day(f"week_first_day(yyyyMMdd,{m})") == monday + dt.timedelta(weeks=m)
    assert day(f"week_last_day(yyyyMMdd,{m})") == monday + dt.timedelta(weeks=m, days=6)


@given(times, st.integers(1, 7))
def test_year_week_matches_iso_weeks_for_monday(when: dt.datetime, first_day: int) -> None:
    week = time_placeholder(f"year_week(yyyyMMdd,{first_day})", when)
    assert week[:4] == f"{when.year:04d}" and 1 <= int(week[4:]) <= 53
    if first_day == 1:  # Monday-first with 4 days in week 1 is ISO 8601's week number
        assert int(week[4:]) == when.isocalendar().week


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


@given(times)
def test_builtins_are_the_java_formats_dolphinscheduler_uses(when: dt.datetime) -> None:
    values = builtins(when)
    assert values["system.biz.date"] == java_format(when - dt.timedelta(days=1), "yyyyMMdd")
    assert values["system.biz.curdate"] == java_format(when, "yyyyMMdd")
    assert values["system.datetime"] == java_format(when, "yyyyMMddHHmmss")


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


def test_project_params_are_below_globals_and_above_nothing_but_cannot_take_a_builtin() -> None:
    values = resolve(
        [Property("shared", value="global"), Property("from_project", value="${home}/x")],
        [Property("pool", value="upstream")],
        [Property("pool", value="local")],
        T,
        builtins(T),
        [Property("home", value="/opt"), Property("shared", value="project"), Property("pool", value="project"),
         Property("system.biz.date", value="forged")],
    )  # fmt: skip
    assert values["home"] == "/opt" and values["shared"] == "global" and values["pool"] == "local"
    assert values["from_project"] == "/opt/x"  # a global's placeholder reaches a project parameter
    assert values["system.biz.date"] == "20260228"


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
