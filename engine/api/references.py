"""What a workflow document may point at outside its own project, checked when it is saved (created,
updated or imported) by a general user:

- a SUB_PROCESS task runs another workflow: EXECUTE on that workflow's project;
- a DEPENDENT item reads the runs of another workflow: READ on its project;
- a SQL or PROCEDURE task connects with a data source: granted to the user or to the document's project (access.py);
- a SQL or PROCEDURE task's data source exists, of a type the task runs on (and the ``type`` the task gives),
  for admins too: 400 at ``tasks[i].params.datasource`` (check_source_names, after the document's own checks);
- a task's alerts go to its ``alert_group``: it exists, and is granted to the user or to the project (access.py);
- an environment the workflow or a task names: granted to the user or to the document's project
  (environments.py), admins any;
- the workflow's tenant (the OS user its tasks run as): ``default`` or granted to its project (tenants.py),
  for admins too;
- no SUB_PROCESS runs the saved workflow again, directly or through others (sub_workflows.py), for admins too.

Without these a WRITE grant on one project would start, or reveal the state of, another project's workflows.
A target that does not exist, or that the user may not see, answers 404 naming the field, as elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import asyncpg

from engine.api.access import EXECUTE, READ, Principal, check_alert_groups, check_datasources, project_rights
from engine.api.environments import check_environments
from engine.api.routing import ApiError
from engine.api.sub_workflows import check_cycles
from engine.api.tenants import DEFAULT as DEFAULT_TENANT
from engine.api.tenants import check_tenant
from engine.tasks.sql_dialects import PROCEDURE_TYPES, SOURCE_TYPES

#: task types that name a data source, and the data-source types each runs on
_SOURCE_TASKS = {"SQL": SOURCE_TYPES, "PROCEDURE": PROCEDURE_TYPES}


def _refs(doc: Mapping[str, Any]) -> Iterator[tuple[Mapping[str, Any], int, str]]:
    """(reference, right needed, field) of every SUB_PROCESS and DEPENDENT target of a document."""
    tasks = doc.get("tasks")
    for i, task in enumerate(tasks if isinstance(tasks, list) else []):
        params = task.get("params") if isinstance(task, Mapping) else None
        if not isinstance(params, Mapping):
            continue
        where = f"tasks[{i}].params"
        if task.get("type") == "SUB_PROCESS":
            yield params, EXECUTE, where
        elif task.get("type") == "DEPENDENT":
            groups = params.get("groups") if isinstance(params.get("groups"), list) else [params]
            for g, group in enumerate(groups):
                items = group.get("items") if isinstance(group, Mapping) else None
                for j, item in enumerate(items if isinstance(items, list) else []):
                    if isinstance(item, Mapping):
                        prefix = f"{where}.groups[{g}]" if "groups" in params else where
                        yield item, READ, f"{prefix}.items[{j}]"


def _alert_groups(doc: Mapping[str, Any]) -> list[tuple[str, int | str]]:
    tasks = doc.get("tasks")
    return [
        (f"tasks[{i}].alert_group", t["alert_group"])
        for i, t in enumerate(tasks if isinstance(tasks, list) else [])
        if isinstance(t, Mapping)
        and isinstance(t.get("alert_group"), int | str)
        and not isinstance(t.get("alert_group"), bool)
    ]


def _sql_sources(doc: Mapping[str, Any]) -> list[str]:
    tasks = doc.get("tasks")
    params = (
        [t.get("params") for t in tasks if isinstance(t, Mapping) and t.get("type") in _SOURCE_TASKS]
        if isinstance(tasks, list)
        else []
    )
    return [p["datasource"] for p in params if isinstance(p, Mapping) and isinstance(p.get("datasource"), str)]


async def check_source_names(db: asyncpg.Pool | asyncpg.Connection, doc: Mapping[str, Any]) -> None:
    """400 at ``tasks[i].params.datasource`` for a SQL or PROCEDURE task naming a data source that does not
    exist, or one of a type the task does not run on (PROCEDURE: PROCEDURE_TYPES; the task's own ``type``)."""
    tasks = doc.get("tasks")
    named = [
        (i, t["type"], t["params"])
        for i, t in enumerate(tasks if isinstance(tasks, list) else [])
        if isinstance(t, Mapping) and t.get("type") in _SOURCE_TASKS and isinstance(t.get("params"), Mapping)
        and isinstance(t["params"].get("datasource"), str)
    ]  # fmt: skip
    if not named:
        return
    rows = await db.fetch(
        "SELECT name, type FROM datasource WHERE name = ANY($1::text[])", sorted({p["datasource"] for _, _, p in named})
    )
    kinds = {r["name"]: str(r["type"]).upper() for r in rows}
    for i, task_type, params in named:
        name, field = params["datasource"], f"tasks[{i}].params.datasource"
        kind = kinds.get(name)
        if kind is None:
            raise ApiError(400, f"data source {name!r} does not exist", field)
        if kind not in _SOURCE_TASKS[task_type]:
            raise ApiError(
                400, f"data source {name!r} is {kind}: {task_type} runs on {', '.join(_SOURCE_TASKS[task_type])}", field
            )
        wanted = params.get("type")
        if isinstance(wanted, str) and wanted and wanted.upper() != kind:
            raise ApiError(400, f"data source {name!r} is {kind}, not {wanted}", field)


async def check_document(db: asyncpg.Pool | asyncpg.Connection, who: Principal, doc: Any) -> None:
    """Raise the 403 / 404 a general user gets for a document naming what they may not use."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("project"), str):
        return  # the schema check answers 400
    own = doc["project"]
    await check_tenant(db, doc.get("tenant", DEFAULT_TENANT), own)
    await check_datasources(db, who, _sql_sources(doc), own)
    await check_alert_groups(db, who, _alert_groups(doc), own)
    await check_environments(db, who, doc, own)
    if not who.admin:
        await _check_targets(db, who, doc, own)
    await check_cycles(db, doc)


async def _check_targets(db: asyncpg.Pool | asyncpg.Connection, who: Principal, doc: Any, own: str) -> None:
    own_code = await db.fetchval("SELECT code FROM project WHERE name = $1", own)
    for ref, need, field in _refs(doc):
        if isinstance(ref.get("workflow_code"), int) and not isinstance(ref.get("workflow_code"), bool):
            code = await db.fetchval(
                "SELECT project_code FROM workflow_definition WHERE code = $1", ref["workflow_code"]
            )
            what = f"workflow {ref['workflow_code']}"
        else:
            name = ref.get("project") if isinstance(ref.get("project"), str) else own
            if name == own:
                continue
            code = await db.fetchval("SELECT code FROM project WHERE name = $1", name)
            what = f"project {name!r}"
        if code is not None and code == own_code:
            continue
        held, usable = (0, 0) if code is None else await project_rights(db, who, int(code))
        if not held:
            raise ApiError(404, f"{what} does not exist", field)
        if not usable & need:
            right = "EXECUTE" if need == EXECUTE else "READ"
            raise ApiError(403, f"you need the {right} right on the project of {what}", field)
