"""Backfill of downstream workflows (DolphinScheduler's ALL_DEPENDENT complement mode), the pure part:
which workflows a DEPENDENT task waits for, and the order in which to backfill everything downstream of
a workflow.

A workflow W is downstream of U when a DEPENDENT task of W names U (by ``workflow`` name, in
``project`` or W's own project, or by ``workflow_code``; see engine/scheduling/dependent.py). Backfilling
U with ALL_DEPENDENT also backfills, for the same dates, every workflow downstream of U, transitively,
upstream ones first (their commands are queued first; each downstream run's DEPENDENT task still waits
for its upstream run of the date, so the order holds at run time too). A cycle among the downstream
workflows (legal: each DEPENDENT waits on an earlier date or another task) does not stop the walk: what
is left once no workflow without a pending upstream remains goes in the order it was found.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any


def references(params: Mapping[str, Any]) -> Iterator[tuple[str | None, int | None, str | None]]:
    """(workflow name, workflow code, project name) of each item of a DEPENDENT task's parameters."""
    groups = params.get("groups")
    items: list[Any] = []
    if isinstance(groups, list):
        for g in groups:
            if isinstance(g, Mapping) and isinstance(g.get("items"), list):
                items += g["items"]
    if isinstance(params.get("items"), list):
        items += params["items"]
    for item in items:
        if not isinstance(item, Mapping):
            continue
        code = item.get("workflow_code")
        name = item.get("workflow")
        project = item.get("project")
        yield (
            name if isinstance(name, str) else None,
            code if isinstance(code, int) and not isinstance(code, bool) else None,
            project if isinstance(project, str) else None,
        )


def downstream_order(root: int, edges: Mapping[int, set[int]]) -> list[int]:
    """Every workflow reachable from ``root`` along ``edges`` (upstream -> its downstream workflows), but
    ``root`` itself, upstream ones first."""
    reach: list[int] = []
    seen = {root}
    todo = [root]
    while todo:  # breadth first: the order things were found breaks cycles
        cur = todo.pop(0)
        for nxt in sorted(edges.get(cur, ())):
            if nxt not in seen:
                seen.add(nxt)
                reach.append(nxt)
                todo.append(nxt)
    inside = set(reach)
    pending = {w: {u for u in inside if w in edges.get(u, ())} for w in reach}
    out: list[int] = []
    while len(out) < len(reach):
        ready = [w for w in reach if w not in out and not (pending[w] - set(out))]
        if not ready:  # a cycle: take the first found, the rest follows
            ready = [next(w for w in reach if w not in out)]
        for w in ready[:1]:
            out.append(w)
    return out
