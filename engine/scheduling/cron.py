"""Cron expressions: standard 5-field cron and DolphinScheduler's Quartz style, evaluated by croniter.

Quartz expressions (6 or 7 fields: ``sec min hour day-of-month month day-of-week [year]``) are
translated before croniter sees them: ``?`` becomes ``*``; day-of-week numbers move from Quartz's
1 = SUN .. 7 = SAT to cron's 0 = SUN .. 6 = SAT (in lists, ranges, ``N#k`` and ``NL``); ``NL`` (last
N-day of the month) becomes croniter's ``L<N>``; the year field is applied as a filter. ``L`` and
``W`` in day-of-month are croniter's own. What croniter cannot express (``LW``, ``L-n``) is refused
with a :class:`CronError` naming the field and the part. Years are Quartz's 1970-2099.

Every fire time costs a bounded amount of work, whatever the expression, so fire times may be
computed anywhere (callers with many of them still run them in a thread). The unit of work is one
croniter step (one ``get_next``, itself bounded by croniter's search of at most 50 years, about a
millisecond at worst) or one jump. The iteration never walks through times it cannot fire:

* a fire in a year outside the year field jumps to the 1st of January of the next allowed year
  (``* * * * * ? 2025,2099`` costs two steps to reach 2099, not 74 years of seconds);
* the second occurrence of a wall-clock time when the clocks go back (DST fall-back) is not a fire
  (Quartz and DolphinScheduler fire a daily ``30 1 * * *`` once on that day): it jumps to the end of
  the repeated hour;
* a wall-clock time skipped when the clocks go forward fires once, at the first valid time after
  the gap (``30 2 * * *`` fires at 03:00 on that day).

One fire time may take at most :data:`MAX_STEPS` steps; past that the iteration raises
:class:`CronError` (its ``limit`` is true): the API refuses such a schedule when it is saved. The
property tests in tests/test_cron_bounds.py check the meter against random expressions.
"""

from __future__ import annotations

import bisect
import datetime as dt
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter

from core.errors import InvalidInput

FIELDS_QUARTZ = ("second", "minute", "hour", "day-of-month", "month", "day-of-week", "year")
FIELDS_CRON = ("minute", "hour", "day-of-month", "month", "day-of-week")
_DOW_NAMES = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}
#: the years a Quartz year field may name
MIN_YEAR, MAX_YEAR = 1970, 2099
#: units of work (croniter steps and jumps) one fire time may cost
MAX_STEPS = 16
_TICK = dt.timedelta(microseconds=1)


class CronError(InvalidInput):
    """An expression that cannot be scheduled; the message names the field and the part. ``limit``:
    refused because a fire time would cost more than :data:`MAX_STEPS` units of work."""

    def __init__(self, message: str, limit: bool = False) -> None:
        super().__init__(message)
        self.limit = limit


class Meter:
    """Counts the work of an iteration: ``total`` units, and raises past ``per_fire`` units between two
    fire times."""

    def __init__(self, per_fire: int = MAX_STEPS) -> None:
        self.per_fire = per_fire
        self.total = 0
        self.since_fire = 0
        #: the most units one fire time cost
        self.peak = 0

    def step(self, source: str) -> None:
        self.total += 1
        self.since_fire += 1
        self.peak = max(self.peak, self.since_fire)
        if self.since_fire > self.per_fire:
            raise CronError(
                f"cron {source!r}: no fire time found within {self.per_fire} steps (the year list leaves too"
                " many years without a fire)",
                limit=True,
            )

    def fired(self) -> None:
        self.since_fire = 0


@dataclass(frozen=True)
class Cron:
    """A parsed expression: the croniter form, whether it has a seconds field, and the allowed years."""

    source: str
    expr: str
    seconds: bool
    years: frozenset[int] | None = None

    def iter(self, after: dt.datetime, meter: Meter | None = None) -> Iterator[dt.datetime]:
        """Fire times strictly after ``after`` (aware datetime, in the schedule's zone), ascending in
        time; each costs at most ``meter.per_fire`` units of work (else :class:`CronError`)."""
        meter = meter if meter is not None else Meter()
        years = sorted(self.years) if self.years is not None else None
        base: dt.datetime | None = after
        it: croniter | None = None
        while True:
            meter.step(self.source)
            if it is None:
                assert base is not None
                if years is not None:
                    base = _into_years(years, base)
                    if base is None:
                        return  # no allowed year left
                it = croniter(self.expr, base, second_at_beginning=self.seconds)
            try:
                when: dt.datetime = it.get_next(dt.datetime)
            except CroniterError:
                return  # no further match (e.g. 30 February)
            except (ValueError, OverflowError):
                return  # past the year 9999
            if years is not None and when.year not in self.years:  # type: ignore[operator]
                base, it = when, None  # jump to the next allowed year
                continue
            if _repeated(when):
                base, it = _after_repeated(when), None  # the clocks went back: jump to the end of the repeat
                continue
            meter.fired()
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


def _into_years(years: list[int], base: dt.datetime) -> dt.datetime | None:
    """``base``, or the instant before the 1st of January of the first allowed year after it."""
    i = bisect.bisect_left(years, base.year)
    if i == len(years):
        return None
    if years[i] == base.year:
        return base
    return dt.datetime(years[i], 1, 1, tzinfo=base.tzinfo) - _TICK


def _repeated(when: dt.datetime) -> bool:
    """The second occurrence of a wall-clock time the clocks went back over."""
    return when.fold == 1 and when.utcoffset() != when.replace(fold=0).utcoffset()


def _after_repeated(when: dt.datetime) -> dt.datetime:
    """The last instant of the repeated wall-clock span holding ``when`` (a later occurrence): the
    iteration goes on from there. Found by halving the span (about 33 probes for 2 hours)."""
    tz = when.tzinfo
    lo = when.astimezone(dt.UTC)  # in the repeat
    hi = lo + (when.replace(fold=0).utcoffset() - when.utcoffset())  # type: ignore[operator]  # past it
    while hi - lo > _TICK:
        mid = lo + (hi - lo) / 2
        if _repeated(mid.astimezone(tz)):
            lo = mid
        else:
            hi = mid
    return lo.astimezone(tz)


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
        hi = int(m.group(2) or (lo if not m.group(3) else MAX_YEAR))
        step = int(m.group(3) or 1)
        if not (MIN_YEAR <= lo <= MAX_YEAR and MIN_YEAR <= hi <= MAX_YEAR):
            raise CronError(f"year {value!r}: years are {MIN_YEAR}-{MAX_YEAR} (as in Quartz)")
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
    cron: Cron, tz: str, after: dt.datetime, count: int, end: dt.datetime | None = None, meter: Meter | None = None
) -> list[dt.datetime]:
    """The next ``count`` fire times after ``after`` in zone ``tz`` (returned in UTC), before ``end``."""
    out: list[dt.datetime] = []
    if count <= 0:
        return out
    for when in cron.iter(after.astimezone(zone(tz)), meter):
        utc = when.astimezone(dt.UTC)
        if end is not None and utc > end:
            break
        out.append(utc)
        if len(out) >= count:
            break
    return out


def between(
    cron: Cron, tz: str, after: dt.datetime, until: dt.datetime, limit: int, meter: Meter | None = None
) -> list[dt.datetime]:
    """Fire times in (after, until], ascending, at most ``limit`` (the oldest ones)."""
    out: list[dt.datetime] = []
    if limit <= 0:
        return out
    for when in cron.iter(after.astimezone(zone(tz)), meter):
        utc = when.astimezone(dt.UTC)
        if utc > until:
            break
        out.append(utc)
        if len(out) >= limit:
            break
    return out
