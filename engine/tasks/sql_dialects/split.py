"""Splitting SQL text into statements for servers that take one statement per request (MySQL without
multi-statements, ClickHouse, HiveServer2): ``;`` ends a statement unless it is inside quotes ('...', "...",
`...`) or a comment (``-- ...``, ``# ...`` is not a comment here, ``/* ... */``). Empty statements are dropped."""

from __future__ import annotations


def split_statements(text: str) -> list[str]:
    out: list[str] = []
    start, i, n = 0, 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "'\"`":
            i += 1
            while i < n and text[i] != ch:
                i += 2 if text[i] == "\\" else 1
            i += 1
        elif text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif ch == ";":
            out.append(text[start:i])
            i += 1
            start = i
        else:
            i += 1
    out.append(text[start:])
    return [s.strip() for s in out if _has_code(s)]


def _has_code(stmt: str) -> bool:
    """Whether ``stmt`` holds more than blanks and comments."""
    rest = stmt.strip()
    while rest:
        if rest.startswith("--"):
            end = rest.find("\n")
            rest = "" if end < 0 else rest[end + 1 :].strip()
        elif rest.startswith("/*"):
            end = rest.find("*/")
            rest = "" if end < 0 else rest[end + 2 :].strip()
        else:
            return True
    return False
