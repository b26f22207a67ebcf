"""The rendered script of an attempt: its code fields (a SHELL or PYTHON ``rawScript``, a ``sql``) with the
``${name}`` and ``$[...]`` placeholders replaced by the values the attempt was given, secrets masked, written
at the head of its log (docs/WORKFLOWS.md, "The rendered script").

It is what a DolphinScheduler user reads first in a task's log: the text as it ran, with this run's values.
The process itself still reads each value as data (engine/tasks/placing.py: an environment variable, a
Python literal, a bind parameter), so the block shows the values where they land, not the references.

The block is part of the log's first write (no other file, no database write): the log page, its archive and
the instance page (which reads it from the log's first lines) all see it. Its first line says how many lines
follow, so a reader takes exactly those, whatever the script holds.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

from engine.params import substitute

#: ``[porpoise] rendered <field> (<n> lines):`` then the n lines, then END
BEGIN = "[porpoise] rendered {field} ({lines} lines):\n"
END = "[porpoise] end of rendered {field}\n"
#: characters of one field shown at most (a longer one is cut, and says so)
MAX_SHOWN = 65_536
MASK = "***"


def code_fields(schema: Mapping[str, Any]) -> list[str]:
    """The parameters of a task type's schema that are code (``contentMediaType``: scripts, SQL)."""
    props = schema.get("properties") or {}
    return [name for name, prop in props.items() if isinstance(prop, Mapping) and "contentMediaType" in prop]


def mask(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret value replaced by ``***``, the longest first (one holding another)."""
    for value in sorted({s for s in secrets if s}, key=len, reverse=True):
        text = text.replace(value, MASK)
    return text


def datasource_secrets(sources: Mapping[str, Mapping[str, Any]], fields: Iterable[str]) -> list[str]:
    """The opened secret values (a password, a DSN) of the data sources an attempt was given."""
    keys = frozenset(fields)
    return [str(v) for params in sources.values() for k, v in params.items() if k in keys and v]


def rendered_block(
    params: Mapping[str, Any],
    fields: Iterable[str],
    values: Mapping[str, str],
    when: dt.datetime,
    secrets: Iterable[str],
) -> str:
    """The log's rendered-script block of each code field ``params`` holds ("" when it holds none)."""
    secrets = list(secrets)
    out: list[str] = []
    for name in fields:
        text = params.get(name)
        if not isinstance(text, str) or not text.strip():
            continue
        try:
            shown = substitute(text, values, when)
        except ValueError as exc:  # a bad $[...]: the launch refuses it too; show the text as written
            shown = f"{text}\n(placeholders not rendered: {exc})"
        shown = mask(shown, secrets)
        if len(shown) > MAX_SHOWN:
            shown = shown[:MAX_SHOWN] + f"\n(cut: {len(shown)} characters, the first {MAX_SHOWN} shown)"
        lines = shown.rstrip("\n").split("\n")
        out.append(BEGIN.format(field=name, lines=len(lines)))
        out.extend(line + "\n" for line in lines)
        out.append(END.format(field=name))
    return "".join(out)
