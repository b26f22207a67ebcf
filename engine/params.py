"""Task parameters and placeholders, with DolphinScheduler's meaning.

* ``${name}`` is replaced by the parameter's value; an unknown name is left as it is.
* ``$[pattern]`` is the business time formatted with a Java date pattern (``yyyyMMdd``, ``HH:mm:ss``);
  arithmetic after the pattern counts **days**: ``$[yyyyMMdd-1]``, ``$[yyyyMMdd+7*2]``, hours and
  minutes as fractions ``$[HHmmss+1/24]``, ``$[HHmmss-1/24/60]``. A ``-`` followed by a non-digit is
  part of the pattern (``$[yyyy-MM-dd]``).
* functions: ``add_months(fmt,N)``, ``month_begin(fmt,N)``, ``month_end(fmt,N)``, ``week_begin(fmt,N)``,
  ``week_end(fmt,N)``, ``this_day(fmt)``, ``last_day(fmt)``, ``timestamp(expr)`` (epoch seconds).
* built-ins from the schedule time T (now when unscheduled): ``system.biz.date`` = T-1 day
  (yyyyMMdd), ``system.biz.curdate`` = T (yyyyMMdd), ``system.datetime`` = T (yyyyMMddHHmmss), plus
  task/workflow ids.
* precedence, lowest first: global params < upstream OUT values (var pool) < the task's local params;
  a value that itself holds placeholders is expanded against built-ins and globals.
* a task sets OUT params by printing ``${setValue(key=value)}`` (or ``#{setValue(key=value)}``).
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

_JAVA_TOKENS = {
    "yyyy": "%Y",
    "yy": "%y",
    "MM": "%m",
    "dd": "%d",
    "HH": "%H",
    "mm": "%M",
    "ss": "%S",
}


def java_format(when: dt.datetime, pattern: str) -> str:
    """Format ``when`` with a Java SimpleDateFormat-style pattern (the common letters)."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "'":  # quoted literal
            end = pattern.find("'", i + 1)
            end = len(pattern) if end < 0 else end
            out.append(pattern[i + 1 : end] or "'")
            i = end + 1
            continue
        j = i
        while j < len(pattern) and pattern[j] == ch:
            j += 1
        run = pattern[i:j]
        if ch == "S":
            out.append(f"{when.microsecond // 1000:03d}"[: len(run)] if len(run) <= 3 else f"{when.microsecond:06d}")
        elif run in _JAVA_TOKENS:
            out.append(when.strftime(_JAVA_TOKENS[run]))
        elif ch == "y" and len(run) > 4:
            out.append(when.strftime("%Y").zfill(len(run)))
        elif ch in "MdHms" and len(run) == 1:
            out.append(str(int(when.strftime(_JAVA_TOKENS[ch * 2]))))
        else:
            out.append(run)
        i = j
    return "".join(out)


def add_months(when: dt.datetime, months: int) -> dt.datetime:
    """Calendar month arithmetic; the day is clamped to the target month's length (Java semantics)."""
    index = when.year * 12 + (when.month - 1) + months
    year, month = divmod(index, 12)
    day = min(when.day, calendar.monthrange(year, month + 1)[1])
    return when.replace(year=year, month=month + 1, day=day)


def _days_expr(expr: str) -> Fraction:
    """``7*2``, ``1/24``, ``1/24/60`` -> a number of days (left to right)."""
    tokens = re.findall(r"\d+|[*/]", expr)
    value = Fraction(int(tokens[0]))
    for op, num in zip(tokens[1::2], tokens[2::2], strict=True):
        value = value * int(num) if op == "*" else value / int(num)
    return value


_ARITH = re.compile(r"^(?P<fmt>.*?)(?P<sign>[+-])(?P<expr>\d+(?:[*/]\d+)*)$")
_FUNC = re.compile(r"^(?P<name>\w+)\((?P<args>.*)\)$")


def _shift(when: dt.datetime, spec: str) -> tuple[dt.datetime, str]:
    """Split ``pattern±expr`` into the shifted time and the bare pattern."""
    m = _ARITH.match(spec)
    if not m or not m.group("fmt"):
        return when, spec
    days = _days_expr(m.group("expr"))
    minutes = days * 24 * 60
    delta = dt.timedelta(minutes=float(minutes))
    return (when - delta if m.group("sign") == "-" else when + delta), m.group("fmt")


def time_placeholder(expr: str, when: dt.datetime) -> str:
    """Evaluate the inside of ``$[...]``; ValueError explains one that cannot be (a time past the
    calendar's range, a division by zero, an unknown function)."""
    expr = expr.strip()
    try:
        return _time_placeholder(expr, when)
    except OverflowError:
        raise ValueError(f"$[{expr}] is out of the date range") from None
    except ZeroDivisionError:
        raise ValueError(f"$[{expr}] divides by zero") from None


def _time_placeholder(expr: str, when: dt.datetime) -> str:
    fm = _FUNC.match(expr)
    if fm:
        name, args = fm.group("name"), [a.strip() for a in fm.group("args").split(",")]
        fmt = args[0]
        n = int(args[1]) if len(args) > 1 and args[1] else 0
        if name == "add_months":
            return java_format(add_months(when, n), fmt)
        if name == "month_begin":
            return java_format(add_months(when, n).replace(day=1), fmt)
        if name == "month_end":
            target = add_months(when, n)
            return java_format(target.replace(day=calendar.monthrange(target.year, target.month)[1]), fmt)
        if name == "week_begin":
            target = when + dt.timedelta(weeks=n)
            return java_format(target - dt.timedelta(days=target.weekday()), fmt)
        if name == "week_end":
            target = when + dt.timedelta(weeks=n)
            return java_format(target + dt.timedelta(days=6 - target.weekday()), fmt)
        if name == "this_day":
            return java_format(when, fmt)
        if name == "last_day":
            return java_format(when - dt.timedelta(days=1), fmt)
        if name == "timestamp":
            shifted, _ = _shift(when, fm.group("args").strip())
            return str(int(shifted.timestamp()))
        raise ValueError(f"unknown time function {name!r} in $[{expr}]")
    shifted, fmt = _shift(when, expr)
    return java_format(shifted, fmt)


_TIME = re.compile(r"\$\[([^\]]*)\]")
_VAR = re.compile(r"\$\{([^}]+)\}")


def substitute(text: str, values: Mapping[str, str], when: dt.datetime) -> str:
    """Replace ``${name}`` with known values (unknown ones stay) and every ``$[...]``."""
    text = _VAR.sub(lambda m: values.get(m.group(1).strip(), m.group(0)), text)
    return _TIME.sub(lambda m: time_placeholder(m.group(1), when), text)


@dataclass(frozen=True)
class Property:
    """A parameter entry (DolphinScheduler's Property): IN or OUT, typed, with a value."""

    prop: str
    direct: str = "IN"
    type: str = "VARCHAR"
    value: str = ""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Property:
        prop = str(data.get("prop", "")).strip()
        if not prop:
            raise ValueError("a parameter needs a non-empty 'prop' name")
        direct = str(data.get("direct", "IN")).upper()
        if direct not in ("IN", "OUT"):
            raise ValueError(f"parameter {prop!r}: direct must be IN or OUT, got {direct!r}")
        value = data.get("value", "")
        return cls(prop, direct, str(data.get("type", "VARCHAR")).upper(), "" if value is None else str(value))

    def to_dict(self) -> dict[str, str]:
        return {"prop": self.prop, "direct": self.direct, "type": self.type, "value": self.value}


def properties(items: Iterable[Mapping[str, Any]] | None) -> list[Property]:
    return [Property.from_dict(i) for i in (items or [])]


def builtins(
    schedule_time: dt.datetime | None,
    now: dt.datetime | None = None,
    **ids: Any,
) -> dict[str, str]:
    """system.* parameters from the business time (schedule time, or now)."""
    t = schedule_time or now or dt.datetime.now()
    values = {
        "system.biz.date": java_format(t - dt.timedelta(days=1), "yyyyMMdd"),
        "system.biz.curdate": java_format(t, "yyyyMMdd"),
        "system.datetime": java_format(t, "yyyyMMddHHmmss"),
    }
    for key, value in ids.items():
        if value is not None:
            values[f"system.{key.replace('_', '.')}"] = str(value)
    return values


def resolve(
    global_params: Iterable[Property],
    var_pool: Iterable[Property],
    local_params: Iterable[Property],
    when: dt.datetime,
    system: Mapping[str, str],
) -> dict[str, str]:
    """The parameter map a task sees: built-ins < globals < var pool < local params.

    Values holding placeholders are expanded against built-ins and globals.
    """
    base: dict[str, str] = dict(system)
    for p in global_params:
        base[p.prop] = substitute(p.value, base, when)
    values = dict(base)
    for p in var_pool:
        if p.value != "" or p.prop not in values:
            values[p.prop] = p.value
    for p in local_params:
        if p.direct == "OUT":
            values.setdefault(p.prop, p.value)
            continue
        values[p.prop] = substitute(p.value, base, when)
    return values


_SET_VALUE = re.compile(r"[$#]\{setValue\(\s*([^=()\s]+)\s*=(.*?)\)\}")


def parse_set_values(line: str) -> list[tuple[str, str]]:
    """``${setValue(key=value)}`` occurrences in one output line."""
    return [(k.strip(), v.strip()) for k, v in _SET_VALUE.findall(line)]


def out_params(local_params: Iterable[Property], emitted: Mapping[str, str]) -> list[Property]:
    """The task's OUT params with the values it emitted (declared OUT params only)."""
    result = []
    for p in local_params:
        if p.direct == "OUT":
            result.append(Property(p.prop, "OUT", p.type, emitted.get(p.prop, p.value)))
    return result


def parse_time(value: str | None) -> dt.datetime | None:
    if not value:
        return None
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
