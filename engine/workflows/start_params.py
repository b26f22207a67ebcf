"""Global parameters of a new instance: the start's overrides, then placeholders resolved at the run's
business time. Used where an instance is made (the master's claim) and before a start is accepted (the
API refuses what the master could not resolve, naming the parameter).

A start sets only the workflow's declared global parameters and never a built-in (``system.*``); a parent
workflow's values handed to a SUB_PROCESS child may add names the child does not declare (as
DolphinScheduler's ``fatherParams`` do), never built-ins. Each global whose value came from outside the
definition (a start or a parent) is marked ``"source": "start"``: ``!{name}``, the one raw text
substitution (engine.tasks.placing), takes only values the workflow's writers wrote."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from engine.params import BUILTIN_PREFIX, builtins, is_builtin, properties, substitute
from engine.tasks.base import ParamError

#: the mark of a global parameter whose value a start (or a parent workflow) gave
FROM_START = "start"


def check_start_params(declared: Iterable[str], start_params: Mapping[str, Any], undeclared: bool = False) -> None:
    """ParamError(``StartParams.<name>``) for a start parameter naming a built-in, or (unless ``undeclared``)
    one the workflow does not declare as a global parameter."""
    names = sorted(set(declared))
    for name in start_params:
        if is_builtin(name):
            raise ParamError(
                f"StartParams.{name}", f"{BUILTIN_PREFIX}* parameters are built-in: a start cannot set them"
            )
        if not undeclared and name not in names:
            known = ", ".join(names) if names else "none"
            raise ParamError(
                f"StartParams.{name}",
                f"is not a global parameter of this workflow (a start may set only those: {known})",
            )


def resolve_globals(
    global_params: Iterable[Mapping[str, Any]],
    start_params: dict[str, Any],
    when: dt.datetime,
    undeclared: bool = False,
) -> list[dict[str, Any]]:
    """Global params at instance creation: start-time overrides, then placeholders against built-ins.
    ParamError names the parameter that cannot be resolved or set (``StartParams.<name>`` when a start
    parameter gave its value, else ``global_params.<name>``); ``undeclared`` lets start parameters add names
    the definition does not declare (a SUB_PROCESS child's values from its parent)."""
    declared = properties(global_params)
    check_start_params((p.prop for p in declared), start_params, undeclared)
    system = builtins(when)

    def resolved(name: str, value: str) -> str:
        try:
            return substitute(value, system, when)
        except ValueError as exc:
            field = f"StartParams.{name}" if name in start_params else f"global_params.{name}"
            raise ParamError(field, f"{exc} (business time {when.isoformat()})") from None

    out = []
    seen = set()
    for p in declared:
        entry: dict[str, Any] = p.to_dict()
        if p.prop in start_params:
            entry |= {"value": resolved(p.prop, str(start_params[p.prop])), "source": FROM_START}
        else:
            entry["value"] = resolved(p.prop, p.value)
        out.append(entry)
        seen.add(p.prop)
    for name, value in start_params.items():
        if name not in seen:
            out.append(
                {
                    "prop": name,
                    "direct": "IN",
                    "type": "VARCHAR",
                    "value": resolved(name, str(value)),
                    "source": FROM_START,
                }
            )
    return out
