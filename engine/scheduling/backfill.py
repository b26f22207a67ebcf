"""Backfill (COMPLEMENT_DATA) date lists, as DolphinScheduler builds them.

A range's dates are the fire times of the workflow's online schedules within [start, end] (daily at
midnight when it has none; start == end is that one date). A list is taken as given, deduplicated.
SERIAL runs all dates as one chain; PARALLEL splits them into ``min(#dates, parallelism)``
contiguous chunks whose sizes differ by at most one, each chunk a serial chain of its own — so at
most ``parallelism`` instances of the backfill run at once.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from engine.scheduling.cron import between, parse

DEFAULT_CRON = "0 0 0 * * ? *"
#: more dates than this in one backfill is refused (a typo in a range would queue years of runs)
MAX_DATES = 10_000


class BackfillError(ValueError):
    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def range_dates(
    start: dt.datetime, end: dt.datetime, crontabs: Iterable[tuple[str, str]], limit: int = MAX_DATES
) -> list[dt.datetime]:
    if end < start:
        raise BackfillError("end", "must not be before start")
    if start == end:
        return [start]
    found: set[dt.datetime] = set()
    for crontab, tz in list(crontabs) or [(DEFAULT_CRON, "UTC")]:
        found.update(between(parse(crontab), tz, start - dt.timedelta(microseconds=1), end, limit + 1))
    dates = sorted(found)
    if len(dates) > limit:
        raise BackfillError("end", f"the range holds more than {limit} dates; split the backfill")
    return dates


def list_dates(values: Iterable[dt.datetime], limit: int = MAX_DATES) -> list[dt.datetime]:
    dates = sorted(set(values))
    if not dates:
        raise BackfillError("dates", "needs at least one date")
    if len(dates) > limit:
        raise BackfillError("dates", f"more than {limit} dates; split the backfill")
    return dates


def chunks(dates: list[dt.datetime], parallelism: int | None) -> list[list[dt.datetime]]:
    """Contiguous chunks, as many as the parallelism allows (all dates when it is None or larger)."""
    if not dates:
        return []
    n = len(dates) if not parallelism else min(len(dates), parallelism)
    size, extra = divmod(len(dates), n)
    out, i = [], 0
    for k in range(n):
        step = size + (1 if k < extra else 0)
        out.append(dates[i : i + step])
        i += step
    return out
