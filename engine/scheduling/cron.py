"""Cron expressions: standard 5-field cron and DolphinScheduler's Quartz style, evaluated by croniter.

Quartz expressions (6 or 7 fields: ``sec min hour day-of-month month day-of-week [year]``) are
translated before croniter sees them: ``?`` becomes ``*``; day-of-week numbers move from Quartz's
1 = SUN .. 7 = SAT to cron's 0 = SUN .. 6 = SAT (in lists, ranges, ``N#k`` and ``NL``); ``NL`` (last
N-day of the month) becomes croniter's ``L<N>``; the year field is applied as a filter. ``L`` and
``W`` in day-of-month are croniter's own. What croniter cannot express (``LW``, ``L-n``) is refused
with a :class:`CronError` naming the field and the part.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

FIELDS_QUARTZ = ("second", "minute", "hour", "day-of-month", "month", "day-of-week", "year")
FIELDS_CRON = ("minute", "hour", "day-of-month", "month", "day-of-week")
_DOW_NAMES = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}
#: fire times further apart than this many years are not looked for (croniter's own bound)
_YEAR_SPAN = 200


class CronError(ValueError):
    """An expression that cannot be scheduled; the message names the field and the part."""


@dataclass(frozen=True)
class Cron:
    """A parsed expression: the croniter form, whether it has a seconds field, and the allowed years."""

    source: str
    expr: str
    seconds: bool
    years: frozenset[int] | None = None

    def iter(self, after: dt.datetime) -> Iterator[dt.datetime]:
        """Fire times strictly after ``after`` (aware datetime, in the schedule's zone), ascending."""
        if self.years is not None and not self.years:
            return
        base = after
        if self.years is not None and base.year < min(self.years):
            base = base.replace(year=min(self.years), month=1, day=1, hour=0, minute=0, second=0, microsecond=0)
            base -= dt.timedelta(microseconds=1)
        it = croniter(self.expr, base, second_at_beginning=self.seconds)
        while True:
            try:
                when: dt.datetime = it.get_next(dt.datetime)
            except CroniterError:
                return  # no further match (e.g. 30 February)
            if self.years is not None:
                if when.year > max(self.years):
                    return
                if when.year not in self.years:
                    continue
            yield when


@functools.lru_cache(maxsize=4096)
def parse(expression: str) -> Cron:
    """Parse (and check) an expression; cached: the scheduler reads every online crontab each tick."""
    text = " ".join(expression.split())
    fields = text.split(" ") if text else []
    if len(fields) == 5:
        out = _check(text, text, False, None)
        return out
    if len(fields) not in (6, 7):
        raise CronError(
            f"cron {expression!r}: expected 5 fields (minute hour day-of-month month day-of-week) or 6-7 Quartz"
            f" fields (second minute hour day-of-month month day-of-week [year]), got {len(fields)}"
        )
    sec, minute, hour, dom, month, dow = fields[:6]
    years = _years(fields[6]) if len(fields) == 7 else None
    if dom != "?" and dow != "?" and dom != "*" and dow != "*":
        raise CronError(f"cron {expression!r}: Quartz needs '?' in day-of-month or day-of-week (both are set)")
    for name, value in (("day-of-month", dom),):
        upper = value.upper()
        if "LW" in upper or re.search(r"L-\d", upper):
            raise CronError(f"cron {expression!r}: {name} {value!r} is not supported (no 'LW' or 'L-n')")
    dom_c = "*" if dom == "?" else dom
    dow_c = "*" if dow == "?" else _quartz_dow(expression, dow)
    expr = " ".join((sec, minute, hour, dom_c, month, dow_c))
    return _check(expression, expr, True, years)


def _check(source: str, expr: str, seconds: bool, years: frozenset[int] | None) -> Cron:
    try:
        croniter(expr, dt.datetime(2000, 1, 1), second_at_beginning=seconds)
    except (CroniterError, ValueError, KeyError) as exc:
        raise CronError(f"cron {source!r}: {_field_hint(expr, seconds)}{exc}") from None
    return Cron(source, expr, seconds, years)


def _field_hint(expr: str, seconds: bool) -> str:
    names = FIELDS_QUARTZ if seconds else FIELDS_CRON
    parts = expr.split(" ")
    for name, part in zip(names, parts, strict=False):
        try:
            croniter(_probe(names, name, part, seconds), dt.datetime(2000, 1, 1), second_at_beginning=seconds)
        except (CroniterError, ValueError, KeyError):
            return f"{name} {part!r} is invalid: "
    return ""


def _probe(names: tuple[str, ...], name: str, part: str, seconds: bool) -> str:
    fields = ["*"] * (6 if seconds else 5)
    fields[names.index(name)] = part
    return " ".join(fields)


def _years(value: str) -> frozenset[int] | None:
    if value in ("*", "?"):
        return None
    years: set[int] = set()
    for part in value.split(","):
        m = re.fullmatch(r"(\d{4})(?:-(\d{4}))?(?:/(\d+))?", part)
        if not m:
            raise CronError(f"year {value!r} is not supported (use YYYY, YYYY-YYYY, YYYY-YYYY/step or a list)")
        lo = int(m.group(1))
        hi = int(m.group(2) or (lo if not m.group(3) else lo + _YEAR_SPAN))
        step = int(m.group(3) or 1)
        if hi < lo or step < 1:
            raise CronError(f"year {value!r}: empty range")
        years.update(range(lo, hi + 1, step))
    return frozenset(years)


def _quartz_dow(expression: str, value: str) -> str:
    """Quartz day-of-week (1 = SUN .. 7 = SAT) to croniter's (0 = SUN .. 6 = SAT)."""

    def num(token: str) -> str:
        if token.upper() in _DOW_NAMES:
            return token.upper()
        if not token.isdigit() or not 1 <= int(token) <= 7:
            raise CronError(f"cron {expression!r}: day-of-week {value!r}: {token!r} is not 1-7 or SUN-SAT")
        return str(int(token) - 1)

    out = []
    for part in value.split(","):
        upper = part.upper()
        if upper == "L":
            out.append("6")  # Quartz: L alone in day-of-week = 7 = SAT
        elif m := re.fullmatch(r"(\w+)L", upper):
            out.append(f"L{num(m.group(1))}")
        elif m := re.fullmatch(r"(\w+)#([1-5])", upper):
            out.append(f"{num(m.group(1))}#{m.group(2)}")
        elif m := re.fullmatch(r"(\*|\w+)(?:-(\w+))?(?:/(\d+))?", upper):
            start = "*" if m.group(1) == "*" else num(m.group(1))
            text = start + (f"-{num(m.group(2))}" if m.group(2) else "") + (f"/{m.group(3)}" if m.group(3) else "")
            out.append(text)
        else:
            raise CronError(f"cron {expression!r}: day-of-week part {part!r} is not supported")
    return ",".join(out)


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise CronError(f"unknown time zone {name!r} (use an IANA name such as UTC or Europe/Paris)") from None


def next_times(
    cron: Cron, tz: str, after: dt.datetime, count: int, end: dt.datetime | None = None
) -> list[dt.datetime]:
    """The next ``count`` fire times after ``after`` in zone ``tz`` (returned in UTC), before ``end``."""
    out: list[dt.datetime] = []
    for when in cron.iter(after.astimezone(zone(tz))):
        utc = when.astimezone(dt.UTC)
        if (end is not None and utc > end) or len(out) >= count:
            break
        out.append(utc)
    return out


def between(cron: Cron, tz: str, after: dt.datetime, until: dt.datetime, limit: int) -> list[dt.datetime]:
    """Fire times in (after, until], ascending, at most ``limit`` (the oldest ones)."""
    out: list[dt.datetime] = []
    for when in cron.iter(after.astimezone(zone(tz))):
        utc = when.astimezone(dt.UTC)
        if utc > until or len(out) >= limit:
            break
        out.append(utc)
    return out
