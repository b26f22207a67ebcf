"""DEPENDENT tasks: which runs of other workflows (or of one of their tasks) a task waits for, over
date cycles relative to its instance's business date, and how the answers combine.

Parameters: ``{"relation": "AND"|"OR", "items": [item, ...]}`` or, nested as DolphinScheduler's
models, ``{"relation": ..., "groups": [{"relation": ..., "items": [...]}, ...]}``; an item is
``{"workflow": <name> | "workflow_code": <code>, "project": <name>, "task": <name, optional>,
"cycle": "hour"|"day"|"week"|"month", "date_value": <below>}``. Also ``check_interval`` (seconds
between checks, default 10), ``failure_policy`` (FAIL: a failed dependency fails the task; WAIT: keep
waiting ``failure_waiting_time`` minutes for a rerun to succeed, then fail) and ``timeout_seconds``
(give up waiting: the task fails; the task's own timeout with the FAILED strategy does the same in
minutes).

``last24Hours`` is not the 24 hours before the base: as DolphinScheduler's
DependentDateUtils.getSpecialLastDayInterval it is the 24 whole hours from yesterday 01:00 to today
01:00, whatever the base's hour.

The base date is the instance's business time (:func:`base_date`): its schedule time, or for a
manual run the time the run started, so a check after midnight still looks at the run's own day.

Intervals are half-open ``[start, end)`` in the base date's zone (DolphinScheduler's day ends at
23:59:59.999; the same set of instants). For each interval the newest matching run decides: none ->
WAITING, unfinished -> WAITING, SUCCESS -> SUCCESS, else FAILED; an item is the first non-SUCCESS
interval's result. AND: WAITING beats FAILED beats SUCCESS. OR: SUCCESS beats WAITING beats FAILED.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from engine.tasks.base import ParamError

SUCCESS, WAITING, FAILED = "SUCCESS", "WAITING", "FAILED"
HOUR, DAY = dt.timedelta(hours=1), dt.timedelta(days=1)
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

DATE_VALUES: dict[str, str] = {
    "currentHour": "hour", "last1Hour": "hour", "last2Hours": "hour", "last3Hours": "hour", "last24Hours": "hour",
    "today": "day", "last1Days": "day", "last2Days": "day", "last3Days": "day", "last7Days": "day",
    "thisWeek": "week", "lastWeek": "week", **{f"last{d}": "week" for d in _WEEKDAYS},
    "thisMonth": "month", "thisMonthBegin": "month", "thisMonthEnd": "month",
    "lastMonth": "month", "lastMonthBegin": "month", "lastMonthEnd": "month",
}  # fmt: skip
Interval = tuple[dt.datetime, dt.datetime]

#: the shortest wait between two checks of a DEPENDENT task (a shorter one would poll the database for nothing)
MIN_CHECK_INTERVAL = 1.0


def base_date(schedule_time: dt.datetime | None, start_time: dt.datetime | None, now: dt.datetime) -> dt.datetime:
    """The business time a DEPENDENT task's date cycles count from: the schedule time (scheduled runs,
    backfill dates, reruns of them), else the start of the run (the time its built-ins were taken
    from), else ``now``."""
    return schedule_time or start_time or now


def _day(when: dt.datetime) -> dt.datetime:
    return when.replace(hour=0, minute=0, second=0, microsecond=0)


def _days(first: dt.datetime, last: dt.datetime) -> list[Interval]:
    """One interval per calendar day from ``first``'s day to ``last``'s day, both included."""
    out, day = [], _day(first)
    while day <= last:
        nxt = _day(day + DAY + dt.timedelta(hours=3))  # robust across a DST change
        out.append((day, nxt))
        day = nxt
    return out


def _month_start(when: dt.datetime) -> dt.datetime:
    return _day(when).replace(day=1)


def _prev_month_start(when: dt.datetime) -> dt.datetime:
    return _month_start(_month_start(when) - DAY)


def _month_end_day(when: dt.datetime) -> dt.datetime:
    """Start of the last day of ``when``'s month."""
    return _day(_month_start(_month_start(when) + dt.timedelta(days=32)) - DAY)


def intervals(date_value: str, base: dt.datetime) -> list[Interval]:
    """The intervals ``date_value`` means for business date ``base``, oldest first."""
    if date_value not in DATE_VALUES:
        raise ValueError(f"unknown date_value {date_value!r}")
    hour = base.replace(minute=0, second=0, microsecond=0)
    if date_value == "currentHour":
        return [(hour, hour + HOUR)]
    if date_value == "last24Hours":  # DolphinScheduler: yesterday 01:00 to today 01:00, whatever the hour
        one = _day(base) + HOUR
        return [(one - i * HOUR, one - (i - 1) * HOUR) for i in range(24, 0, -1)]
    if date_value.endswith(("Hour", "Hours")):
        n = int(date_value.removeprefix("last").removesuffix("Hours").removesuffix("Hour"))
        return [(hour - i * HOUR, hour - (i - 1) * HOUR) for i in range(n, 0, -1)]
    today = _day(base)
    if date_value == "today":
        return _days(today, today)
    if date_value.endswith("Days"):
        n = int(date_value.removeprefix("last").removesuffix("Days"))
        return _days(today - n * DAY, today - DAY)
    monday = today - today.weekday() * DAY
    if date_value == "thisWeek":
        return _days(monday, today)
    if date_value == "lastWeek":
        return _days(monday - 7 * DAY, monday - DAY)
    if date_value.removeprefix("last") in _WEEKDAYS:
        day = monday - 7 * DAY + _WEEKDAYS.index(date_value.removeprefix("last")) * DAY
        return _days(day, day)
    if date_value == "thisMonth":
        return _days(_month_start(base), today)
    if date_value == "thisMonthBegin":
        return _days(_month_start(base), _month_start(base))
    if date_value == "thisMonthEnd":
        return _days(_month_end_day(base), _month_end_day(base))
    last_month = _prev_month_start(base)
    if date_value == "lastMonth":
        return _days(last_month, _month_end_day(last_month))
    if date_value == "lastMonthBegin":
        return _days(last_month, last_month)
    return _days(_month_end_day(last_month), _month_end_day(last_month))  # lastMonthEnd


def item_result(per_interval: Iterable[str]) -> str:
    for result in per_interval:
        if result != SUCCESS:
            return result
    return SUCCESS


def combine(relation: str, results: Iterable[str]) -> str:
    found = set(results)
    if relation == "OR":
        return SUCCESS if SUCCESS in found else WAITING if WAITING in found else FAILED
    return WAITING if WAITING in found else FAILED if FAILED in found else SUCCESS


def groups(params: Mapping[str, Any]) -> list[tuple[str, list[Mapping[str, Any]]]]:
    """(relation, items) per group; flat ``items`` are one group."""
    if "groups" in params:
        return [(g.get("relation", "AND"), list(g["items"])) for g in params["groups"]]
    return [("AND", list(params["items"]))]


def check_params(params: Mapping[str, Any]) -> None:
    if params.get("relation", "AND") not in ("AND", "OR"):
        raise ParamError("relation", "must be AND or OR")
    if ("items" in params) == ("groups" in params):
        raise ParamError("items", "give items, or groups of items")
    if "groups" in params:
        if not isinstance(params["groups"], list) or not params["groups"]:
            raise ParamError("groups", "needs at least one group")
        for i, g in enumerate(params["groups"]):
            if not isinstance(g, Mapping) or g.get("relation", "AND") not in ("AND", "OR"):
                raise ParamError(f"groups[{i}].relation", "must be AND or OR")
            _items(g.get("items"), f"groups[{i}].items")
    else:
        _items(params["items"], "items")
    interval = params.get("check_interval", 10)
    if not isinstance(interval, int | float) or isinstance(interval, bool) or interval < MIN_CHECK_INTERVAL:
        raise ParamError("check_interval", f"must be a number of seconds >= {MIN_CHECK_INTERVAL:g}")
    if params.get("failure_policy", "FAIL") not in ("FAIL", "WAIT"):
        raise ParamError("failure_policy", "must be FAIL or WAIT")
    limit = params.get("timeout_seconds", 0)
    if not isinstance(limit, int | float) or limit < 0:
        raise ParamError("timeout_seconds", "must be seconds >= 0 (0 = wait without limit)")
    waiting = params.get("failure_waiting_time", 0)
    if not isinstance(waiting, int | float) or waiting < 0:
        raise ParamError("failure_waiting_time", "must be minutes >= 0")


def _items(items: Any, where: str) -> None:
    if not isinstance(items, list) or not items:
        raise ParamError(where, "needs at least one item")
    for i, item in enumerate(items):
        at = f"{where}[{i}]"
        if not isinstance(item, Mapping):
            raise ParamError(at, "must be an object")
        if not isinstance(item.get("workflow"), str) and not isinstance(item.get("workflow_code"), int):
            raise ParamError(f"{at}.workflow", "needs workflow (a name) or workflow_code")
        value = item.get("date_value")
        if value not in DATE_VALUES:
            raise ParamError(f"{at}.date_value", f"must be one of {', '.join(DATE_VALUES)}")
        if item.get("cycle", DATE_VALUES[value]) != DATE_VALUES[value]:
            raise ParamError(f"{at}.cycle", f"{value} belongs to the {DATE_VALUES[value]} cycle")
