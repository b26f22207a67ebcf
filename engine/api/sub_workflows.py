"""SUB_PROCESS cycles, refused when a workflow is saved: a SUB_PROCESS naming its own workflow, or one
whose child runs (through its own SUB_PROCESS tasks, transitively) the saved workflow again, would start
instances without end. The graph is the current versions of every workflow, with the saved document in
place of its own workflow's current version; nodes are (project, name), so a workflow saved for the first
time is found by the name others already use for it. The run-time bound on nesting depth is
``master.max_sub_workflow_depth`` (engine/master/logic_runner.py)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import asyncpg

from engine.api.routing import ApiError

Key = tuple[str, str]

_SUB_TASKS = (
    "SELECT p.name AS project, d.name, t.task_params FROM task_definition t"
    " JOIN workflow_task_relation r ON r.post_task_code = t.code JOIN workflow_definition d"
    " ON d.code = r.workflow_definition_code JOIN project p ON p.code = d.project_code"
    " WHERE t.task_type = 'SUB_PROCESS'"
)
_NAMES = "SELECT d.code, p.name AS project, d.name FROM workflow_definition d JOIN project p ON p.code = d.project_code"


def _target(params: Any, own_project: str, names: Mapping[int, Key]) -> Key | None:
    """The workflow a SUB_PROCESS task's parameters name, as (project, name); None when unresolvable."""
    if not isinstance(params, Mapping):
        return None
    code = params.get("workflow_code")
    if isinstance(code, int) and not isinstance(code, bool):
        return names.get(code)
    name, project = params.get("workflow"), params.get("project")
    if not isinstance(name, str):
        return None
    return (project if isinstance(project, str) else own_project, name)


def _doc_subs(doc: Mapping[str, Any]) -> Iterator[tuple[int, Any]]:
    tasks = doc.get("tasks")
    for i, task in enumerate(tasks if isinstance(tasks, list) else []):
        if isinstance(task, Mapping) and task.get("type") == "SUB_PROCESS":
            yield i, task.get("params")


async def check_cycles(db: asyncpg.Pool | asyncpg.Connection, doc: Any) -> None:
    """400 naming the SUB_PROCESS task's field when the document would run itself, directly or not."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("project"), str) or not isinstance(doc.get("name"), str):
        return  # the schema check answers 400
    own: Key = (doc["project"], doc["name"])
    subs = list(_doc_subs(doc))
    if not subs:
        return
    names = {int(r["code"]): (r["project"], r["name"]) for r in await db.fetch(_NAMES)}
    edges: dict[Key, set[Key]] = {}
    for row in await db.fetch(_SUB_TASKS):
        key = (row["project"], row["name"])
        if key == own:
            continue  # the document replaces its own workflow's current version
        target = _target(row["task_params"], row["project"], names)
        if target is not None:
            edges.setdefault(key, set()).add(target)
    for i, params in subs:
        target = _target(params, own[0], names)
        if target is None:
            continue
        field = f"tasks[{i}].params.{'workflow_code' if isinstance(params.get('workflow_code'), int) else 'workflow'}"
        if target == own:
            raise ApiError(400, "a SUB_PROCESS may not run its own workflow", field)
        seen, todo = {target}, [target]
        while todo:
            for nxt in edges.get(todo.pop(), ()):
                if nxt == own:
                    raise ApiError(
                        400,
                        f"workflow {target[0]}/{target[1]} runs this workflow again (a cycle of SUB_PROCESS tasks)",
                        field,
                    )
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
