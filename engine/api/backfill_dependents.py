"""The workflows a backfill with ``dependent_mode: ALL_DEPENDENT`` also backfills: those whose DEPENDENT
tasks (current versions) name the workflow, transitively, upstream ones first
(:mod:`engine.scheduling.downstream`).

A downstream workflow is backfilled only when the caller may start it (EXECUTE on its project, within the
token's rights) and its project may use its tenant (engine/api/tenants.py), as a start of it would need.
The walk still goes through the others (a DEPENDENT chain may cross projects), but they are neither queued
nor named in the answer: only their number is (``skipped_not_permitted``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.api import access
from engine.api.access import Principal
from engine.api.tenants import tenant_usable
from engine.scheduling.downstream import downstream_order, references

_DEPENDENT_TASKS = (
    "SELECT r.workflow_definition_code AS code, p.name AS project, t.task_params FROM task_definition t"
    " JOIN workflow_task_relation r ON r.post_task_code = t.code JOIN workflow_definition d"
    " ON d.code = r.workflow_definition_code JOIN project p ON p.code = d.project_code"
    " WHERE t.task_type = 'DEPENDENT' AND t.flag = 1"
)
_WORKFLOWS = (
    "SELECT d.code, d.name, d.version, d.release_state, d.project_code, p.name AS project,"
    " (SELECT l.tenant_code FROM workflow_definition_log l WHERE l.code = d.code AND l.version = d.version)"
    " AS tenant_code FROM workflow_definition d JOIN project p ON p.code = d.project_code"
)


@dataclass
class Downstream:
    """What an ALL_DEPENDENT backfill may touch below its workflow."""

    #: (row, why it is skipped or None) of each workflow the caller may start, in backfill order
    allowed: list[tuple[Any, str | None]] = field(default_factory=list)
    #: how many downstream workflows the caller may not start (neither queued nor named)
    not_permitted: int = 0


async def downstream(db: Any, root: int, who: Principal) -> Downstream:
    """The workflows downstream of ``root``, in order, split by what ``who`` may start."""
    workflows = {int(r["code"]): r for r in await db.fetch(_WORKFLOWS)}
    by_name = {(r["project"], r["name"]): code for code, r in workflows.items()}
    edges: dict[int, set[int]] = {}
    for task in await db.fetch(_DEPENDENT_TASKS):
        params = dict(task["task_params"] or {})
        for name, code, project in references(params):
            upstream = code if code is not None else by_name.get((project or task["project"], name or ""))
            if upstream is not None and upstream != int(task["code"]):
                edges.setdefault(int(upstream), set()).add(int(task["code"]))
    out = Downstream()
    rights: dict[int, int] = {}
    for code in downstream_order(root, edges):
        row = workflows.get(code)
        if row is None:
            continue
        project = int(row["project_code"])
        if project not in rights:
            rights[project] = (await access.project_rights(db, who, project))[1]
        if not rights[project] & access.EXECUTE:
            out.not_permitted += 1
        elif row["release_state"] != 1:
            out.allowed.append((row, "offline"))
        elif row["tenant_code"] is not None and not await tenant_usable(db, row["tenant_code"], row["project"]):
            out.allowed.append((row, f"tenant {row['tenant_code']!r} is not granted to project {row['project']!r}"))
        else:
            out.allowed.append((row, None))
    return out
