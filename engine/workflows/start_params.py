"""Global parameters of a new instance: the start's overrides, then placeholders resolved at the run's
business time. Used where an instance is made (the master's claim) and before a start is accepted (the
API refuses what the master could not resolve, naming the parameter)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from engine.params import builtins, properties, substitute
from engine.tasks.base import ParamError


def resolve_globals(
    global_params: Iterable[Mapping[str, Any]], start_params: dict[str, Any], when: dt.datetime
) -> list[dict[str, Any]]:
    """Global params at instance creation: start-time overrides, then placeholders against built-ins.
    ParamError names the parameter that cannot be resolved (``StartParams.<name>`` when a start
    parameter gave its value, else ``global_params.<name>``)."""
    system = builtins(when)

    def resolved(name: str, value: str) -> str:
        try:
            return substitute(value, system, when)
        except ValueError as exc:
            field = f"StartParams.{name}" if name in start_params else f"global_params.{name}"
            raise ParamError(field, f"{exc} (business time {when.isoformat()})") from None

    out = []
    seen = set()
    for p in properties(global_params):
        out.append({**p.to_dict(), "value": resolved(p.prop, str(start_params.get(p.prop, p.value)))})
        seen.add(p.prop)
    for name, value in start_params.items():
        if name not in seen:
            out.append({"prop": name, "direct": "IN", "type": "VARCHAR", "value": resolved(name, str(value))})
    return out
