"""Step marks: the wall-clock time at named points of a task's way through the nodes (the API's start call,
the master's claim, write and dispatch, the worker's set-up, spawn, exit and report), so that
``python -m bench.steps`` can say where a chain step's or a start's milliseconds go, hop by hop.

Off unless a node turned them on (``debug.step_marks``: a directory; test and benchmark setups only): then
:func:`mark` costs one global test. On, a mark is a tuple appended to memory (from the loop thread or any
other), written to ``<directory>/<pid>.marks`` by :func:`flush` when the node stops, so nothing is written to
disk on the way being measured."""

from __future__ import annotations

import os
import time

#: the directory marks go to, once started (one item at most)
_into: list[str] = []
_marks: list[tuple[int, str]] = []
#: a node's marks are kept up to this many (a long benchmark keeps the first ones)
LIMIT = 1_000_000


def start(directory: str) -> None:
    """Record marks from now on, for :func:`flush` to write into ``directory``."""
    os.makedirs(directory, exist_ok=True)
    _into[:] = [directory]


def mark(name: str) -> None:
    """Note that the way reached ``name`` now (nothing when marks are off)."""
    if _into and len(_marks) < LIMIT:
        _marks.append((time.time_ns(), name))


def flush() -> None:
    """Write the marks recorded so far (one ``<ns> <name>`` line each) and forget them."""
    if not _into or not _marks:
        return
    lines, _marks[:] = [f"{ns} {name}\n" for ns, name in _marks], []
    with open(os.path.join(_into[0], f"{os.getpid()}.marks"), "a") as out:
        out.writelines(lines)
