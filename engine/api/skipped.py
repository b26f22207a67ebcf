"""Which tasks of a workflow instance a SWITCH or CONDITIONS task skipped: they have no task instance, so the
instance detail lists them with the state SKIPPED (distinct from a task not run yet, which is not listed).

The master skips the branches a logic task did not take and, downstream, whatever only skipped tasks lead to
(engine/master/workflow.py ``_skip``); it keeps that set in memory only, so the API finds it again from the
definition's edges and the attempts that exist: a task without an attempt right below a logic task that
succeeded is skipped when the instance has finished, or while it runs when a sibling branch of that logic
task has an attempt (the branch taken); a task without an attempt whose upstream tasks are all skipped is
skipped too.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

#: the task types whose success chooses branches
LOGIC_TYPES = frozenset({"SWITCH", "CONDITIONS"})
SKIPPED = "SKIPPED"


@dataclass(frozen=True)
class Edge:
    """One relation row of the definition version: ``pre`` 0 is the root."""

    pre: int
    post: int


def skipped_tasks(
    edges: Iterable[Edge],
    types: Mapping[int, str],
    states: Mapping[int, str],
    finished: bool,
) -> set[int]:
    """The codes of the skipped tasks. ``types``: task code -> type (every task of the version); ``states``:
    task code -> state name of its current attempt (tasks with one); ``finished``: the instance has ended."""
    ups: dict[int, list[int]] = defaultdict(list)
    downs: dict[int, list[int]] = defaultdict(list)
    for e in edges:
        if e.pre:
            ups[e.post].append(e.pre)
            downs[e.pre].append(e.post)
    skipped: set[int] = set()
    for code, kind in types.items():
        if kind not in LOGIC_TYPES or states.get(code) != "SUCCESS":
            continue
        branches = downs.get(code, [])
        taken = any(b in states for b in branches)
        if finished or taken:
            skipped.update(b for b in branches if b not in states)
    # downstream: in topological order, a task without an attempt whose upstream tasks are all skipped
    pending = {code: len(ups.get(code, [])) for code in types}
    ready = [code for code, n in pending.items() if n == 0]
    while ready:
        code = ready.pop()
        for down in downs.get(code, []):
            pending[down] -= 1
            if pending[down] == 0:
                ready.append(down)
                above = ups.get(down, [])
                if down not in states and above and all(u in skipped for u in above):
                    skipped.add(down)
    return skipped
