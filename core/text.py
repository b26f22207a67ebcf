"""Text as PostgreSQL stores it: ``text`` and ``jsonb`` refuse the NUL character, so a task's output that
carries one (a binary file cat'ed, ``/proc/self/environ``) would make every write of its report fail."""

from __future__ import annotations

from typing import Any

#: what a NUL character becomes (U+FFFD, the replacement character)
NUL_STANDS_FOR = "\ufffd"


def storable(text: str) -> str:
    """``text`` with each NUL character replaced (U+FFFD)."""
    return text.replace("\x00", NUL_STANDS_FOR) if "\x00" in text else text


def storable_json(value: Any) -> Any:
    """A JSON-shaped value with each NUL character in its strings (keys included) replaced."""
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, dict):
        return {storable(str(k)): storable_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable_json(v) for v in value]
    return value
