"""The workflows a backfill with ``dependent_mode: ALL_DEPENDENT`` also backfills: those whose DEPENDENT
tasks (current versions) name the workflow, transitively, upstream ones first
(:mod:`engine.scheduling.downstream`)."""

from __future__ import annotations

import json
from typing import Any

from engine.scheduling.downstream import downstream_order, references

_DEPENDENT_TASKS = (
    "SELECT r.workflow_definition_code AS code, p.name AS project, t.task_params FROM task_definition t"
    " JOIN workflow_task_relation r ON r.post_task_code = t.code JOIN workflow_definition d"
    " ON d.code = r.workflow_definition_code JOIN project p ON p.code = d.project_code"
    " WHERE t.task_type = 'DEPENDENT' AND t.flag = 1"
)
_WORKFLOWS = (
    "SELECT d.code, d.name, d.version, d.release_state, p.name AS project FROM workflow_definition d"
    " JOIN project p ON p.code = d.project_code"
)


async def downstream(db: Any, root: int) -> list[Any]:
    """The rows (code, name, release_state, project) of the workflows downstream of ``root``, in order."""
    workflows = {int(r["code"]): r for r in await db.fetch(_WORKFLOWS)}
    by_name = {(r["project"], r["name"]): code for code, r in workflows.items()}
    edges: dict[int, set[int]] = {}
    for task in await db.fetch(_DEPENDENT_TASKS):
        raw = task["task_params"]
        params = json.loads(raw) if isinstance(raw, str) else dict(raw or {})
        for name, code, project in references(params):
            upstream = code if code is not None else by_name.get((project or task["project"], name or ""))
            if upstream is not None and upstream != int(task["code"]):
                edges.setdefault(int(upstream), set()).add(int(task["code"]))
    return [workflows[c] for c in downstream_order(root, edges) if c in workflows]
