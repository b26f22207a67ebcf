"""Pure rules of the logic tasks and control commands: dependent date cycles (property tests), the
AND / OR combination, branch skipping and start-from-task scopes in the WorkflowRun, backfill
chunking. SWITCH conditions: tests/test_switch_expressions.py."""

from __future__ import annotations

import calendar
import datetime as dt
import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.master.workflow import TASK_ONLY, TASK_POST, TASK_PRE, WorkflowRun, scope_for
from engine.master.workflow_messages import TaskResultEvent
from engine.scheduling import backfill, dependent
from engine.scheduling.backfill import backfill_param, chunks, next_param, position, range_dates
from engine.states import TaskState, WorkflowState
from engine.workflows.definitions import TaskSpec, WorkflowSpec
from engine.workflows.model import Dag
from tests.test_workflow_run import Sim, final_state

UTC = dt.UTC
DAY, HOUR = dt.timedelta(days=1), dt.timedelta(hours=1)
bases = st.datetimes(min_value=dt.datetime(2000, 1, 1), max_value=dt.datetime(2100, 1, 1), timezones=st.just(UTC))
RESULTS = st.lists(st.sampled_from([dependent.SUCCESS, dependent.WAITING, dependent.FAILED]), min_size=1)


def _midnight(when: dt.datetime) -> dt.datetime:
    return when.replace(hour=0, minute=0, second=0, microsecond=0)


@given(bases, st.sampled_from(sorted(dependent.DATE_VALUES)))
def test_date_cycle_intervals_are_whole_ordered_contiguous_units(base: dt.datetime, value: str) -> None:
    ivs = dependent.intervals(value, base)
    assert ivs
    unit = HOUR if dependent.DATE_VALUES[value] == "hour" else DAY
    for lo, hi in ivs:
        assert hi - lo == unit
        assert lo == (lo.replace(minute=0, second=0, microsecond=0) if unit == HOUR else _midnight(lo))
    for (_, hi), (lo, _) in itertools.pairwise(ivs):
        assert hi == lo  # contiguous, oldest first
    hour, today = base.replace(minute=0, second=0, microsecond=0), _midnight(base)
    if value in ("currentHour", "today", "thisWeek", "thisMonth"):
        assert ivs[-1][0] <= base < ivs[-1][1]  # ends with the base's own hour / day
    elif value == "last24Hours":
        assert ivs[-1][1] == today + HOUR and len(ivs) == 24  # yesterday 01:00 .. today 01:00
    elif dependent.DATE_VALUES[value] == "hour":
        assert ivs[-1][1] == hour  # the last N whole hours before the base's hour
    elif value.endswith("Days"):
        assert ivs[-1][1] == today and len(ivs) == int(value[4:-4])
    elif value not in ("thisMonthBegin", "thisMonthEnd"):
        assert ivs[-1][1] <= today  # entirely in the past


def _utc(*parts: int) -> dt.datetime:
    return dt.datetime(*parts, tzinfo=UTC)


@pytest.mark.parametrize(
    ("base", "first", "last"),
    [
        # DolphinScheduler 3.1.9 task-api utils/DependentDateUtils.getSpecialLastDayInterval: the hour index
        # runs from hour+23 down to hour, each set as HOUR_OF_DAY = hour - index: yesterday 01:00 .. today 00:00
        (_utc(2019, 2, 5, 11, 20), _utc(2019, 2, 4, 1), _utc(2019, 2, 5, 0)),
        (_utc(2019, 2, 5, 0, 5), _utc(2019, 2, 4, 1), _utc(2019, 2, 5, 0)),
        (_utc(2019, 3, 1, 23, 59), _utc(2019, 2, 28, 1), _utc(2019, 3, 1, 0)),
    ],
)
def test_last24hours_is_yesterday_one_to_today_one(base: dt.datetime, first: dt.datetime, last: dt.datetime) -> None:
    ivs = dependent.intervals("last24Hours", base)
    assert len(ivs) == 24 and ivs[0] == (first, first + HOUR) and ivs[-1] == (last, last + HOUR)


@given(bases)
def test_week_and_month_cycles(base: dt.datetime) -> None:
    today = _midnight(base)
    monday = today - today.weekday() * DAY
    this_week = dependent.intervals("thisWeek", base)
    assert this_week[0][0] == monday and len(this_week) == base.weekday() + 1
    last_week = dependent.intervals("lastWeek", base)
    assert len(last_week) == 7 and last_week[0][0] == monday - 7 * DAY and last_week[-1][1] == monday
    for i, name in enumerate(("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")):
        ((lo, _),) = dependent.intervals(f"last{name}", base)
        assert lo.weekday() == i and monday - 7 * DAY <= lo < monday
    prev = (today.replace(day=1) - DAY).replace(day=1)
    last_month = dependent.intervals("lastMonth", base)
    assert last_month[0][0] == prev and len(last_month) == calendar.monthrange(prev.year, prev.month)[1]
    assert last_month[-1][1] == today.replace(day=1)
    assert dependent.intervals("lastMonthBegin", base) == [last_month[0]]
    assert dependent.intervals("lastMonthEnd", base) == [last_month[-1]]
    this_month = dependent.intervals("thisMonth", base)
    assert this_month[0][0] == today.replace(day=1) and len(this_month) == base.day
    ((end_lo, _),) = dependent.intervals("thisMonthEnd", base)
    assert end_lo.day == calendar.monthrange(base.year, base.month)[1] and end_lo.month == base.month


@given(RESULTS)
def test_and_or_combination(results: list[str]) -> None:
    anded, ored = dependent.combine("AND", results), dependent.combine("OR", results)
    assert (anded == dependent.WAITING) == (dependent.WAITING in results)
    assert (anded == dependent.SUCCESS) == all(r == dependent.SUCCESS for r in results)
    assert (ored == dependent.SUCCESS) == (dependent.SUCCESS in results)
    assert (ored == dependent.FAILED) == all(r == dependent.FAILED for r in results)
    first_bad = next((r for r in results if r != dependent.SUCCESS), dependent.SUCCESS)
    assert dependent.item_result(results) == first_bad


def logic_spec(edges: dict[str, list[str]], types: dict[str, tuple[str, dict[str, Any]]]) -> WorkflowSpec:
    names = list(edges)
    codes = {n: i + 1 for i, n in enumerate(names)}
    tasks = {}
    for n in names:
        kind, params = types.get(n, ("SHELL", {"rawScript": "true"}))
        tasks[codes[n]] = TaskSpec(
            code=codes[n], version=1, name=n, task_type=kind, params=params, priority=2, worker_group="default",
            retries=0, retry_interval=0, timeout_flag=0, timeout_strategy=None, timeout=0, delay_time=0,
            environment_code=-1,
        )  # fmt: skip
    dag = Dag.build(list(codes.values()), [(codes[u], codes[n]) for n in names for u in edges[n]])
    return WorkflowSpec(1, 1, "wf", 1, [], 0, 1, "default", 0, tasks, dag)


def test_a_skipped_branch_and_what_only_it_leads_to_never_run() -> None:
    cond = ("CONDITIONS", {"conditions": [{"task": "a", "status": "SUCCESS"}], "success": ["b"], "failure": ["c"]})
    sp = logic_spec({"a": [], "cond": ["a"], "b": ["cond"], "c": ["cond"], "c2": ["c"], "join": ["b", "c2"]},
                    {"cond": cond})  # fmt: skip
    sim = Sim(sp)
    sim.finish("a", TaskState.FAILURE)  # the CONDITIONS task decides: no workflow failure
    assert "cond" in [sim.name[a.code] for a in sim.run.attempts()]
    c = sim.attempt("cond")
    codes = {t.name: t.code for t in sp.tasks.values()}
    skip_b = (codes["b"],)  # conditions do not hold (a failed): the success branch is skipped
    sim.apply(sim.run.handle(TaskResultEvent(c.id, c.attempt, TaskState.SUCCESS, 0, 1, 2, "m", skip=skip_b)))
    assert sorted(sim.name[a.code] for a in sim.run.attempts()) == ["a", "c", "cond"]
    sim.finish("c")
    actions = sim.finish("c2")
    created = sim.created(sim.actions)
    assert "b" not in created and "join" in created  # join: one upstream skipped, the other succeeded
    actions = sim.finish("join")
    assert final_state(actions) is WorkflowState.SUCCESS


def test_a_failure_without_a_conditions_task_downstream_still_fails_the_workflow() -> None:
    sim = Sim(logic_spec({"a": [], "b": ["a"]}, {}))
    assert final_state(sim.finish("a", TaskState.FAILURE)) is WorkflowState.FAILURE


@pytest.mark.parametrize(
    ("depend", "expected"),
    [(TASK_ONLY, {"b"}), (TASK_PRE, {"a", "b"}), (TASK_POST, {"b", "c", "d"})],
)
def test_start_from_task_scopes(depend: int, expected: set[str]) -> None:
    sp = logic_spec({"a": [], "b": ["a"], "c": ["b"], "d": ["c"], "x": []}, {})
    names = {t.code: t.name for t in sp.tasks.values()}
    scope = scope_for(sp.dag, [2], depend)
    assert {names[c] for c in scope} == expected
    run = WorkflowRun(1, sp, scope=scope)
    created = [names[a.code] for x in run.start() for a in getattr(x, "attempts", ())]
    assert created == (["a"] if depend == TASK_PRE else ["b"])  # roots of the scope first


@given(st.integers(1, 200), st.integers(1, 20))
def test_backfill_chunks_are_contiguous_and_balanced(n: int, parallelism: int) -> None:
    dates = [dt.datetime(2026, 1, 1, tzinfo=UTC) + i * DAY for i in range(n)]
    parts = chunks(dates, parallelism)
    assert len(parts) == min(n, parallelism)
    assert [d for part in parts for d in part] == dates
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1


def test_backfill_range_uses_the_schedules_fire_times() -> None:
    start, end = dt.datetime(2026, 1, 1, tzinfo=UTC), dt.datetime(2026, 1, 3, tzinfo=UTC)
    assert len(range_dates(start, end, [])) == 3  # daily at midnight, both ends included
    hourly = range_dates(start, end, [("0 0 */12 * * ?", "UTC")])
    assert hourly[0] == start and hourly[-1] == end and len(hourly) == 5
    assert range_dates(start, start, [("0 0 */12 * * ?", "UTC")]) == [start]


def test_a_backfill_chain_walks_its_indexes_with_a_param_of_constant_size() -> None:
    param = {"StartParams": {"x": "1"}, "complementOnFailure": "STOP", **backfill_param(7, 0, 9_999)}
    sizes, indexes = set(), []
    at = position(param)
    while True:
        indexes.append(at.index)
        sizes.add(len(str(sorted(param.items()))) - len(str(at.index)))
        if not at.remaining:
            break
        param = next_param(param, at)
        at = position(param)
    assert indexes == list(range(10_000)) and len(sizes) == 1 and at.backfill_id == 7


def test_a_backfill_command_of_the_older_format_moves_its_remaining_dates_out() -> None:
    dates = ["2026-01-03T00:00:00+00:00", "2026-01-01T00:00:00+00:00", "2026-01-02T00:00:00+00:00"]
    param = {"StartParams": {}, "complementScheduleDateList": dates}
    at = position(param)
    assert (at.backfill_id, at.index, at.remaining, at.legacy_dates[1:]) == (None, 0, 2, tuple(dates[1:]))
    following = next_param(param, at)  # the caller keeps dates[1:] in a row and sets its id
    assert "complementScheduleDateList" not in following
    assert (following["backfillIndex"], following["backfillLast"]) == (0, 1)
    assert position({**following, "backfillId": 3}).remaining == 1


@pytest.mark.parametrize(
    "param",
    [{}, {"complementScheduleDateList": []}, {"backfillId": 1, "backfillIndex": 2, "backfillLast": 1},
     {"backfillId": 1, "backfillIndex": "0", "backfillLast": 1}, {"backfillId": True, "backfillIndex": 0,
                                                                 "backfillLast": 0}],
)  # fmt: skip
def test_a_backfill_command_that_names_no_valid_position_is_refused(param: dict) -> None:
    with pytest.raises(ValueError, match="COMPLEMENT_DATA needs"):
        position(param)


_NIGHT = dt.datetime(2026, 7, 1, 23, 59, 50, tzinfo=dt.UTC)
_AFTER_MIDNIGHT = dt.datetime(2026, 7, 2, 0, 0, 10, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("schedule_time", "start_time", "today"),
    [
        (None, _NIGHT, dt.datetime(2026, 7, 1, tzinfo=dt.UTC)),  # a manual run started before midnight
        (dt.datetime(2026, 6, 30, 2, tzinfo=dt.UTC), _NIGHT, dt.datetime(2026, 6, 30, tzinfo=dt.UTC)),  # backfill
        (None, None, dt.datetime(2026, 7, 2, tzinfo=dt.UTC)),  # no start recorded yet: now
    ],
)
def test_a_dependent_counts_its_dates_from_the_runs_business_time_not_the_check_time(
    schedule_time: dt.datetime | None, start_time: dt.datetime | None, today: dt.datetime
) -> None:
    base = dependent.base_date(schedule_time, start_time, _AFTER_MIDNIGHT)
    assert dependent.intervals("today", base) == [(today, today + DAY)]


def test_a_backfill_over_a_schedule_refused_since_it_was_saved_is_a_backfill_error() -> None:
    start, end = dt.datetime(2026, 1, 1, tzinfo=dt.UTC), dt.datetime(2026, 1, 5, tzinfo=dt.UTC)
    with pytest.raises(backfill.BackfillError) as info:
        backfill.range_dates(start, end, [("0 0 0 1 1 ? 9999", "UTC")])
    assert info.value.field == "start" and "1970-2099" in info.value.reason
