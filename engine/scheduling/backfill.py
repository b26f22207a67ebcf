"""Backfill (COMPLEMENT_DATA) date lists, as DolphinScheduler builds them.

A range's dates are the fire times of the workflow's online schedules within [start, end] (daily at
midnight when it has none; start == end is that one date). A list is taken as given, deduplicated.
SERIAL runs all dates as one chain; PARALLEL splits them into ``min(#dates, parallelism)``
contiguous chunks whose sizes differ by at most one, each chunk a serial chain of its own — so at
most ``parallelism`` instances of the backfill run at once.

The dates are stored once, in run order, in a ``backfill`` row. A chain's COMPLEMENT_DATA command
carries only the row's id and indexes (:func:`backfill_param`): the date it runs is its
``schedule_time``, and when its instance ends the actor's final write inserts the command of the
next index (:func:`next_param`), whose schedule time the database reads from the row. Commands
written before this format carry the remaining dates themselves (``complementScheduleDateList``);
their next command moves those dates into a row (:func:`position` tells the two apart).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from core.errors import FieldError
from engine.scheduling.cron import CronError, between, parse

DEFAULT_CRON = "0 0 0 * * ? *"
#: more dates than this in one backfill is refused (a typo in a range would queue years of runs)
MAX_DATES = 10_000


class BackfillError(FieldError):
    """A backfill request is invalid; ``field`` names the part (``end``, ``dates``)."""


def range_dates(
    start: dt.datetime, end: dt.datetime, crontabs: Iterable[tuple[str, str]], limit: int = MAX_DATES
) -> list[dt.datetime]:
    if end < start:
        raise BackfillError("end", "must not be before start")
    if start == end:
        return [start]
    found: set[dt.datetime] = set()
    for crontab, tz in list(crontabs) or [(DEFAULT_CRON, "UTC")]:
        try:  # each fire time costs bounded work (engine/scheduling/cron.py): at most limit + 1 of them
            found.update(between(parse(crontab), tz, start - dt.timedelta(microseconds=1), end, limit + 1))
        except CronError as exc:  # a schedule saved before its crontab was refused
            raise BackfillError("start", f"the workflow's schedule cannot be evaluated: {exc}") from None
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


#: the keys of a COMPLEMENT_DATA command_param that place it in its backfill
BACKFILL_ID, INDEX, LAST = "backfillId", "backfillIndex", "backfillLast"
#: the older format: the chain's remaining dates, this command's first
LEGACY_DATES = "complementScheduleDateList"


def backfill_param(backfill_id: int, index: int, last: int) -> dict[str, int]:
    """The command_param keys of the command that runs date ``index`` (0-based) of backfill row
    ``backfill_id``, in a chain that ends at index ``last`` (inclusive)."""
    return {BACKFILL_ID: backfill_id, INDEX: index, LAST: last}


@dataclass(frozen=True)
class Position:
    """Where a COMPLEMENT_DATA command stands in its chain."""

    #: the backfill row, or None for a command of the older format
    backfill_id: int | None
    index: int
    last: int
    #: the older format's remaining dates (ISO strings), this command's first
    legacy_dates: tuple[str, ...] = ()

    @property
    def remaining(self) -> int:
        """Dates of the chain after this command's."""
        return self.last - self.index


def position(param: dict[str, Any]) -> Position:
    """The chain position a COMPLEMENT_DATA command_param states; ValueError says what is wrong."""
    if BACKFILL_ID in param:
        values = [param.get(k) for k in (BACKFILL_ID, INDEX, LAST)]
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            raise ValueError(f"COMPLEMENT_DATA needs integer command_param.{BACKFILL_ID}, {INDEX} and {LAST}")
        backfill_id, index, last = values
        if not 0 <= index <= last:
            raise ValueError(f"COMPLEMENT_DATA needs 0 <= command_param.{INDEX} <= {LAST}, got {index} and {last}")
        return Position(backfill_id, index, last)
    dates = param.get(LEGACY_DATES)
    if not dates or not isinstance(dates, list) or not all(isinstance(d, str) for d in dates):
        raise ValueError(f"COMPLEMENT_DATA needs command_param.{BACKFILL_ID} (or {LEGACY_DATES})")
    return Position(None, 0, len(dates) - 1, tuple(dates))


def next_param(param: dict[str, Any], at: Position) -> dict[str, Any]:
    """The command_param of the chain's next command (when ``at.remaining``). For the older format
    the caller stores ``at.legacy_dates[1:]`` as a backfill row and sets its id."""
    rest = {k: v for k, v in param.items() if k != LEGACY_DATES}
    if at.backfill_id is None:
        return {**rest, **backfill_param(0, 0, at.remaining - 1)}
    return {**rest, **backfill_param(at.backfill_id, at.index + 1, at.last)}
