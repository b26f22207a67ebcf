"""Step marks: the wall-clock time at named points of a task's way through the nodes (the API's start call,
the master's claim, write and dispatch, the worker's set-up, spawn, exit and report), so that
``python -m bench.steps`` can say where a chain step's or a start's milliseconds go, hop by hop.

Off unless a node turned them on (``debug.step_marks``: a directory; benchmark setups only): then
:func:`mark` costs one test of a list. On, a mark is a tuple appended to memory (from the loop thread or any
other; at most LIMIT, then counted as dropped), written to ``<directory>/<pid>.marks`` (created for the node's
user alone, never through a symbolic link) by :func:`flush` when the node stops, so nothing is written to disk
on the way being measured."""

from __future__ import annotations

import os
import time

from core import logs
from core.errors import ConfigError

log = logs.get(__name__)

#: the directory marks go to, once started (one item at most)
_into: list[str] = []
_marks: list[tuple[int, str]] = []
_dropped = [0]
#: a node's marks are kept up to this many (a long benchmark keeps the first ones)
LIMIT = 1_000_000


def start(directory: str) -> None:
    """Record marks from now on, for :func:`flush` to write into ``directory`` (made if missing)."""
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"debug.step_marks: cannot make {directory}: {exc.strerror}") from None
    _into[:] = [directory]


def now() -> int:
    """The time a mark would note now (0 when marks are off), for a mark decided later (``mark(name, at)``)."""
    return time.time_ns() if _into else 0


def mark(name: str, at: int = 0) -> None:
    """Note that the way reached ``name`` now, or at ``at`` (from :func:`now`); nothing when marks are off."""
    if not _into:
        return
    if len(_marks) < LIMIT:
        _marks.append((at or time.time_ns(), name))
    else:
        _dropped[0] += 1


def flush() -> None:
    """Write the marks recorded so far (one ``<ns> <name>`` line each) and forget them; a failure is logged."""
    if not _into or not _marks:
        return
    lines, _marks[:] = [f"{ns} {name}\n" for ns, name in _marks], []
    path = os.path.join(_into[0], f"{os.getpid()}.marks")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "a") as out:
            out.writelines(lines)
    except OSError as exc:
        log.warning("step marks not written", path=path, error=str(exc))
    if _dropped[0]:
        log.warning("step marks dropped past the limit", limit=LIMIT, dropped=_dropped[0])
