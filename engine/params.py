"""Task parameters and placeholders, with DolphinScheduler's meaning.

* ``${name}`` is replaced by the parameter's value; an unknown name is left as it is.
* ``$[...]`` is the business time formatted with a Java date pattern, moved by day arithmetic or a
  date function (``$[yyyyMMdd-1]``, ``$[add_months(yyyyMMdd,-12*2)]``); engine.time_placeholders
  has the full table. Bash arithmetic (``$[3+4]``: content starting with a digit) is left alone; a bad
  expression raises PlaceholderError, at save time (check_placeholders) and at run time.
* built-ins from the schedule time T (now when unscheduled): ``system.biz.date`` = T-1 day
  (yyyyMMdd), ``system.biz.curdate`` = T (yyyyMMdd), ``system.datetime`` = T (yyyyMMddHHmmss), plus
  task/workflow ids.
* precedence, lowest first: project params (engine/api/project_params.py) < global params (a start
  parameter sets one) < upstream OUT values (var pool) < the task's local params <
  built-ins: no parameter may be named ``system.*`` (refused when a definition is saved) and a start sets
  only declared globals (engine.workflows.start_params); a value that itself holds placeholders is
  expanded against built-ins and globals.
* how a value reaches a task's text depends on the task type (engine.tasks.placing): a SHELL script reads
  it from an environment variable, a PYTHON script gets a literal, SQL binds it; a value is never code.
* a task sets OUT params by printing ``${setValue(key=value)}`` (or ``#{setValue(key=value)}``).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.time_placeholders import evaluate, render


def time_placeholder(expr: str, when: dt.datetime) -> str:
    """Evaluate the inside of ``$[...]`` (see engine.time_placeholders); a PlaceholderError (a
    ValueError) names one that cannot be (a date past the calendar's range, a division by zero, an
    unknown function)."""
    return evaluate(expr, when)


#: ``${name}``: a name holds no ``$``, ``{`` or ``}``, so each match attempt stops at the next ``$``
#: (``[^}]+`` made ``"${" * n`` quadratic: 56 s for a 64 KiB value)
_VAR = re.compile(r"\$\{([^${}]+)\}")

#: built-in parameters (builtins()) are named ``system.<...>``: nothing else may take such a name
BUILTIN_PREFIX = "system."


def is_builtin(name: str) -> bool:
    return name.strip().startswith(BUILTIN_PREFIX)


def substitute(text: str, values: Mapping[str, str], when: dt.datetime) -> str:
    """Replace ``${name}`` with known values (unknown ones stay), then every ``$[...]``.

    A bad ``$[...]`` raises PlaceholderError (a ValueError naming it): the text is never half rendered."""
    text = _VAR.sub(lambda m: values.get(m.group(1).strip(), m.group(0)), text)
    return render(text, when)


def check_placeholders(text: str) -> None:
    """Raise PlaceholderError if a ``$[...]`` of ``text`` cannot be evaluated (a save-time check)."""
    render(text, _CHECK_TIME)


#: any business time will do to check an expression; this one has a 31-day month and a leap year
_CHECK_TIME = dt.datetime(2024, 1, 31, 12, 0, 0)


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
        if is_builtin(prop):
            raise ValueError(
                f"parameter {prop!r}: {BUILTIN_PREFIX}* names are built-in parameters, which cannot be set"
            )
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
    # java_format(d, "yyyyMMdd") and (t, "yyyyMMddHHmmss"), spelt out: computed for every task a worker starts
    day = t - dt.timedelta(days=1)
    values = {
        "system.biz.date": f"{day.year:04d}{day.month:02d}{day.day:02d}",
        "system.biz.curdate": f"{t.year:04d}{t.month:02d}{t.day:02d}",
        "system.datetime": f"{t.year:04d}{t.month:02d}{t.day:02d}{t.hour:02d}{t.minute:02d}{t.second:02d}",
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
    project_params: Iterable[Property] = (),
) -> dict[str, str]:
    """The parameter map a task sees: project params < globals (start params set globals) < var pool <
    local params < built-ins (no other value may take a built-in's name: Property refuses them; a stray
    one is overwritten here all the same).

    Values holding placeholders are expanded against built-ins, project params and globals.
    """
    base: dict[str, str] = dict(system)
    for p in project_params:
        base[p.prop] = substitute(p.value, base, when)
    base.update(system)
    for p in global_params:
        base[p.prop] = substitute(p.value, base, when)
    base.update(system)
    values = dict(base)
    for p in var_pool:
        if p.value != "" or p.prop not in values:
            values[p.prop] = p.value
    for p in local_params:
        if p.direct == "OUT":
            values.setdefault(p.prop, p.value)
            continue
        values[p.prop] = substitute(p.value, base, when)
    values.update(system)
    return values


def trusted_names(
    global_params: Iterable[Mapping[str, Any]],
    var_pool: Iterable[Property],
    local_params: Iterable[Property],
    system: Mapping[str, str],
) -> frozenset[str]:
    """The names whose value (as resolve() gives it) the workflow's writers wrote: built-ins, declared
    globals no start or parent set (engine.workflows.start_params marks those ``"source": "start"``) and
    the task's own IN params, each built only from such names (a value's ``${...}`` is expanded by
    resolve()). ``!{name}`` takes only these."""
    trusted = set(system)

    def writers(name: str, value: str, own: bool) -> None:
        refs = {m.group(1).strip() for m in _VAR.finditer(value)}
        if own and refs <= trusted:
            trusted.add(name)
        else:
            trusted.discard(name)

    for g in global_params:
        writers(str(g.get("prop", "")), str(g.get("value", "")), not g.get("source"))
    for p in var_pool:
        trusted.discard(p.prop)
    for p in local_params:
        if p.direct == "IN":
            writers(p.prop, p.value, True)
    trusted.update(system)
    return frozenset(trusted)


_SET_VALUE_START = re.compile(r"[$#]\{setValue\(\s*([^=()\s]+)\s*=")


def parse_set_values(line: str) -> list[tuple[str, str]]:
    """``${setValue(key=value)}`` occurrences in one output line (the value ends at the first ``)}``).

    Linear in the line: once no ``)}`` follows a start, none follows a later one either (a lazy
    ``(.*?)`` regex rescanned the rest of the line from every start: 35 s for a 100 KB line)."""
    out: list[tuple[str, str]] = []
    pos = 0
    while (start := _SET_VALUE_START.search(line, pos)) is not None:
        end = line.find(")}", start.end())
        if end < 0:
            break
        out.append((start.group(1).strip(), line[start.end() : end].strip()))
        pos = end + 2
    return out


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
