"""``$[...]`` time placeholders, with DolphinScheduler 3.1.9 / 3.2.2's meaning.

The inside of ``$[...]`` is evaluated against the business time T (the schedule time):

* ``$[pattern]``: T formatted with a Java ``DateTimeFormatter`` pattern (``yyyyMMdd``, ``HH:mm:ss``,
  ``'T'`` quoted text). A pattern letter Porpoise does not render is refused, never echoed.
* ``$[pattern+expr]`` / ``$[pattern-expr]``: T moved by ``expr`` **days** before formatting; the sign
  is the last ``+`` (else the last ``-``) followed by a digit, so ``$[yyyy-MM-dd]`` has no offset.
  ``expr`` is integer arithmetic on minutes: ``N`` is ``60*24*(N)`` minutes and a ``/`` divides that
  (``$[HHmmss-1/24]`` one hour, ``$[HHmmss+1/24/60]`` one minute), truncating as Java's ``int``.
* functions (``N`` is an integer expression such as ``12*2`` or ``-3*4``):

  ============================= ==================================================================
  ``add_months(fmt,N)``         T + N calendar months (day clamped to the month's length)
  ``month_begin(fmt,N)``        first day of T's month, **plus N days**
  ``month_end(fmt,N)``          last day of T's month, **plus N days**
  ``week_begin(fmt,N)``         Monday of T's week (Monday..Sunday), **plus N days**
  ``week_end(fmt,N)``           Sunday of T's week, **plus N days**
  ``month_first_day(fmt[,N])``  first day of the month N months from T's
  ``month_last_day(fmt[,N])``   last day of the month of T + N months
  ``week_first_day(fmt[,N])``   Monday of T's week, plus N weeks
  ``week_last_day(fmt[,N])``    Sunday of T's week, plus N weeks
  ``this_day(fmt)``             T;  ``last_day(fmt)``: T - 1 day
  ``year_week(fmt[,D])``        ``yyyy-ww`` (``fmt`` holds a ``-``) or ``yyyyww``: week of the year,
                                weeks starting on day D (1 Monday .. 7 Sunday, default 1), week 1
                                the first with 4 days in the year; the year is T's calendar year
  ``timestamp(expr)``           ``expr`` (a pattern with an offset, or a function above) rendered,
                                read back as ``yyyyMMddHHmmss``, as epoch seconds
  ============================= ==================================================================

A placeholder whose content starts with a digit (bash arithmetic: ``$[3+4]``) or holds ``$`` is
left as it is. Anything else that cannot be evaluated raises :class:`PlaceholderError` naming it
(quoting at most :data:`MAX_QUOTE` characters of it).

Every evaluation does bounded work, as the SWITCH grammar (engine/workflows/expressions.py): the
inside of one ``$[...]`` is at most :data:`MAX_LENGTH` characters, an integer expression nests at
most :data:`MAX_NESTING` parentheses and its literals have at most :data:`MAX_DIGITS` digits, and no
value (literal or computed) may exceed :data:`MAX_VALUE` in magnitude, checked before each operation:
so every operation is on machine-sized integers and the parse is linear in a short text.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re

from core.errors import InvalidInput

__all__ = ["TIME", "PlaceholderError", "add_months", "evaluate", "int_expr", "java_format", "render"]

#: characters inside one ``$[...]``
MAX_LENGTH = 256
#: parentheses nesting of an integer expression
MAX_NESTING = 32
#: digits of an integer literal
MAX_DIGITS = 12
#: magnitude of any integer, literal or computed (minutes: far beyond any calendar)
MAX_VALUE = 10**15
#: characters of an expression an error message quotes
MAX_QUOTE = 80


def quote(text: str, limit: int = MAX_QUOTE) -> str:
    """``text`` for an error message: whole when short, else its start and its length."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


class PlaceholderError(InvalidInput):
    """A ``$[...]`` expression that cannot be evaluated; the message names it (shortened) and the reason."""

    def __init__(self, expr: str, reason: str) -> None:
        super().__init__(f"bad time placeholder $[{quote(expr)}]: {reason}")
        self.expr = expr
        self.reason = reason


class _Bad(Exception):
    """A reason, raised deep inside and turned into a PlaceholderError with the whole expression."""


# -- integer expressions (DolphinScheduler's TimePlaceholderUtils.calculate) -----------------------


def _bounded(value: int) -> int:
    if abs(value) > MAX_VALUE:
        raise _Bad(f"a number beyond {MAX_VALUE:.0e} in the offset")
    return value


def int_expr(text: str) -> int:
    """``12*2``, ``-3*4``, ``60*24*(1)/24``: + - * / and parentheses on integers, unary signs,
    division truncating toward zero (Java ``int``). Bounded: see the module's notes."""
    if len(text) > 2 * MAX_LENGTH:  # the inside of a $[...] (MAX_LENGTH) with DolphinScheduler's 60*24*(...)
        raise _Bad(f"the integer expression is longer than {2 * MAX_LENGTH} characters")
    tokens = re.findall(r"\d+|[-+*/()]|\S", text)
    depth = 0
    for tok in tokens:
        depth += (tok == "(") - (tok == ")")
        if depth > MAX_NESTING:
            raise _Bad(f"more than {MAX_NESTING} nested parentheses")
        if tok.isdigit() and len(tok.lstrip("0")) > MAX_DIGITS:
            raise _Bad(f"a number with more than {MAX_DIGITS} digits")
    pos = 0

    def peek() -> str:
        return tokens[pos] if pos < len(tokens) else ""

    def take() -> str:
        nonlocal pos
        pos += 1
        return tokens[pos - 1]

    def expr() -> int:
        value = term()
        while peek() in ("+", "-"):
            value = _bounded(value + term() if take() == "+" else value - term())
        return value

    def term() -> int:
        value = factor()
        while peek() in ("*", "/"):
            op, right = take(), factor()
            if op == "*":
                value = _bounded(value * right)
            elif right == 0:
                raise _Bad("division by zero")
            else:
                value = abs(value) // abs(right) * (1 if (value < 0) == (right < 0) else -1)
        return value

    def factor() -> int:
        tok = take() if pos < len(tokens) else ""
        if tok in ("+", "-"):
            value = factor()
            return value if tok == "+" else -value
        if tok == "(":
            value = expr()
            if peek() != ")":
                raise _Bad(f"unbalanced parentheses in {quote(text)!r}")
            take()
            return value
        if tok.isdigit():
            return _bounded(int(tok))
        raise _Bad(f"{quote(text)!r} is not an integer expression")

    if not tokens:
        raise _Bad("an integer expression is missing")
    result = expr()
    if pos != len(tokens):
        raise _Bad(f"{quote(text)!r} is not an integer expression")
    return result


# -- Java DateTimeFormatter patterns -------------------------------------------------------------

_MONTHS = [calendar.month_name[i] for i in range(13)]
_DAYS = list(calendar.day_name)
#: letter -> most letters DateTimeFormatter accepts (more is an error there too)
_MAX_RUN = {"M": 5, "L": 5, "d": 2, "H": 2, "h": 2, "k": 2, "K": 2, "m": 2, "s": 2, "a": 1, "E": 5, "D": 3}


def _field(when: dt.datetime, ch: str, n: int) -> str:
    if ch in "yu":
        year = when.year
        return f"{year % 100:02d}" if n == 2 else str(year).zfill(n)
    if n > _MAX_RUN.get(ch, 9):
        raise _Bad(f"too many pattern letters {ch * n!r}")
    if ch in "ML":
        return str(when.month).zfill(n) if n <= 2 else _MONTHS[when.month][: 3 if n == 3 else None if n == 4 else 1]
    if ch == "E":
        name = _DAYS[when.weekday()]
        return name if n == 4 else name[0] if n == 5 else name[:3]
    if ch == "S":
        return f"{when.microsecond:06d}000"[:n]
    if ch == "a":
        return "AM" if when.hour < 12 else "PM"
    number = {
        "d": when.day,
        "D": when.timetuple().tm_yday,
        "H": when.hour,
        "k": when.hour or 24,
        "K": when.hour % 12,
        "h": when.hour % 12 or 12,
        "m": when.minute,
        "s": when.second,
    }.get(ch)
    if number is None:
        raise _Bad(f"pattern letter {ch!r} is not supported")
    return str(number).zfill(n)


def _java_format(when: dt.datetime, pattern: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "'":  # quoted text; '' is one quote
            end = pattern.find("'", i + 1)
            if end < 0:
                raise _Bad("unclosed quote in the pattern")
            out.append(pattern[i + 1 : end] or "'")
            i = end + 1
            continue
        if ch in "[]{}#":
            raise _Bad(f"{ch!r} is reserved in a date pattern")
        j = i
        while j < len(pattern) and pattern[j] == ch:
            j += 1
        out.append(_field(when, ch, j - i) if ch.isascii() and ch.isalpha() else pattern[i:j])
        i = j
    return "".join(out)


def java_format(when: dt.datetime, pattern: str) -> str:
    """``when`` formatted with a Java DateTimeFormatter pattern; PlaceholderError if it is invalid."""
    try:
        return _java_format(when, pattern)
    except _Bad as exc:
        raise PlaceholderError(pattern, str(exc)) from None


# -- calendar moves (DolphinScheduler's DateUtils, on Calendar semantics) --------------------------


def add_months(when: dt.datetime, months: int) -> dt.datetime:
    """Calendar month arithmetic; the day is clamped to the target month's length (Java semantics)."""
    index = when.year * 12 + (when.month - 1) + months
    year, month = divmod(index, 12)
    day = min(when.day, calendar.monthrange(year, month + 1)[1])
    return when.replace(year=year, month=month + 1, day=day)


def _days(when: dt.datetime, n: int) -> dt.datetime:
    return when + dt.timedelta(days=n)


def _first_of_month(when: dt.datetime) -> dt.datetime:
    return when.replace(day=1)


def _last_of_month(when: dt.datetime) -> dt.datetime:
    return when.replace(day=calendar.monthrange(when.year, when.month)[1])


def _monday(when: dt.datetime) -> dt.datetime:
    return when - dt.timedelta(days=when.weekday())


def _sunday(when: dt.datetime) -> dt.datetime:
    return _monday(when) + dt.timedelta(days=6)


def _year_week(when: dt.datetime, fmt: str, first_day: int) -> str:
    """Calendar.WEEK_OF_YEAR with minimalDaysInFirstWeek 4 and the given first day, and Calendar.YEAR."""
    first = first_day - 1 if 1 <= first_day <= 7 else 0  # Python weekday of the week's first day
    day = when.date()
    start = day - dt.timedelta(days=(day.weekday() - first) % 7)
    week_year = (start + dt.timedelta(days=3)).year  # a week belongs to the year holding 4 of its days
    jan4 = dt.date(week_year, 1, 4)
    week1 = jan4 - dt.timedelta(days=(jan4.weekday() - first) % 7)
    week = (start - week1).days // 7 + 1
    return f"{when.year}-{week:02d}" if "-" in fmt else f"{when.year}{week:02d}"


# -- expressions --------------------------------------------------------------------------------

_CALL = re.compile(r"^(?P<name>[a-z_]+)\((?P<args>.*)\)$", re.S)


def _args(name: str, raw: str, least: int, most: int) -> tuple[str, int | None]:
    parts = raw.split(",")
    if not least <= len(parts) <= most or not parts[0]:
        need = f"{least}" if least == most else f"{least} or {most}"
        raise _Bad(f"{name}() takes {need} argument(s): a date pattern" + (" and a number" if most > 1 else ""))
    return parts[0], (int_expr(parts[1]) if len(parts) > 1 else None)


def _minutes(expr: str) -> int:
    """DolphinScheduler's calcMinutes: days as minutes, a ``/`` dividing the minutes."""
    cut = expr.find("/")
    return int_expr(f"60*24*({expr})" if cut < 0 else f"60*24*({expr[:cut]}){expr[cut:]}")


def _offset(expr: str, when: dt.datetime) -> tuple[dt.datetime, str]:
    """``pattern±days``: the moved time and the bare pattern (calcMinutes)."""
    for sign in "+-":
        if sign in expr:
            cut = expr.rindex(sign)
            rest = expr[cut + 1 :]
            if not rest:
                raise _Bad(f"a number must follow the last {sign!r}")
            if not rest[0].isdigit():
                return when, expr
            if cut == 0:
                raise _Bad("a date pattern must come before the offset")
            minutes = _minutes(rest)
            return when + dt.timedelta(minutes=minutes if sign == "+" else -minutes), expr[:cut]
    return when, expr


def _time_and_pattern(expr: str, when: dt.datetime) -> tuple[dt.datetime, str]:
    """What DolphinScheduler's calcTimeExpression computes: the moved time and the pattern to render."""
    call = _CALL.match(expr)
    if call is None:
        return _offset(expr, when)
    name, raw = call.group("name"), call.group("args")
    if name in ("add_months", "month_begin", "month_end", "week_begin", "week_end"):
        fmt, n = _args(name, raw, 2, 2)
        assert n is not None
        if name == "add_months":
            return add_months(when, n), fmt
        base = {"month_begin": _first_of_month, "month_end": _last_of_month, "week_begin": _monday}.get(name, _sunday)
        return _days(base(when), n), fmt
    if name in ("this_day", "last_day"):
        fmt, _ = _args(name, raw, 1, 1)
        return _days(when, 0 if name == "this_day" else -1), fmt
    if name in ("month_first_day", "month_last_day", "week_first_day", "week_last_day"):
        fmt, n = _args(name, raw, 1, 2)
        n = n or 0
        if name == "month_first_day":
            return add_months(_first_of_month(when), n), fmt
        if name == "month_last_day":
            return _last_of_month(add_months(when, n)), fmt
        base = _monday(when) if name == "week_first_day" else _sunday(when)
        return _days(base, 7 * n), fmt
    if name in ("timestamp", "year_week"):
        raise _Bad(f"{name}() cannot be nested")
    try:  # not a function DolphinScheduler knows: a pattern such as yyyy(MM)
        _java_format(when, expr)
    except _Bad as exc:
        raise _Bad(f"unknown time function {name!r} (or, as a date pattern: {exc})") from None
    return _offset(expr, when)


def _evaluate(expr: str, when: dt.datetime) -> str:
    call = _CALL.match(expr)
    if call and call.group("name") == "timestamp":
        moved, fmt = _time_and_pattern(call.group("args"), when)
        text = _java_format(moved, fmt)
        try:
            parsed = dt.datetime.strptime(text, "%Y%m%d%H%M%S")
        except ValueError:
            raise _Bad(
                f"timestamp() renders {text!r}, which is not yyyyMMddHHmmss (e.g. timestamp(yyyyMMdd000000))"
            ) from None
        if len(text) != 14:
            raise _Bad(f"timestamp() renders {text!r}, which is not yyyyMMddHHmmss")
        return str(int(parsed.replace(tzinfo=when.tzinfo).timestamp()))
    if call and call.group("name") == "year_week":
        fmt, first_day = _args("year_week", call.group("args"), 1, 2)
        return _year_week(when, fmt, 1 if first_day is None else first_day)
    moved, fmt = _time_and_pattern(expr, when)
    return _java_format(moved, fmt)


def evaluate(expr: str, when: dt.datetime) -> str:
    """The text of ``$[expr]`` at business time ``when``; PlaceholderError names what is wrong."""
    if not expr:
        raise PlaceholderError(expr, "empty")
    if len(expr) > MAX_LENGTH:
        raise PlaceholderError(expr, f"longer than {MAX_LENGTH} characters")
    try:
        return _evaluate(expr, when)
    except _Bad as exc:
        raise PlaceholderError(expr, str(exc)) from None
    except (OverflowError, ValueError) as exc:  # a date out of range
        raise PlaceholderError(expr, f"the date is out of range ({exc})") from None


#: ``$[...]`` as DolphinScheduler's ParameterUtils finds it: no ``$`` and no ``]`` inside
TIME = re.compile(r"\$\[([^$\]]+)\]")


def _replace(match: re.Match[str], when: dt.datetime) -> str:
    inner = match.group(1)
    if inner[0].isdigit():  # bash arithmetic ($[3+4]), not a time placeholder
        return match.group(0)
    return evaluate(inner, when)


def render(text: str, when: dt.datetime) -> str:
    """Every ``$[...]`` of ``text`` evaluated; the first bad one raises PlaceholderError (nothing is
    half-substituted: the caller gets the error, not a partly rendered text)."""
    return TIME.sub(lambda m: _replace(m, when), text)
