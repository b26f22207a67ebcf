"""Import DolphinScheduler's export JSON and export workflows in that format.

The translation is engine/migrate (pure); this module looks up what it needs (workflows outside the
file that SUB_PROCESS / DEPENDENT tasks name, data sources) and saves the result through the same
definition and schedule code the workflow and schedule APIs use, all in one transaction: an import
creates every workflow and schedule of the file, or nothing.
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

from engine.api import access, environments, references, schedules
from engine.api.routing import ApiError, Call, Route
from engine.api.sub_workflows import check_cycles
from engine.migrate import dolphinscheduler as ds
from engine.migrate.dolphinscheduler_export import Codes, ExportError, export
from engine.workflows import document
from engine.workflows.definitions import load_spec, save_workflow
from engine.workflows.model import DefinitionError

_NAME = {"type": "string", "minLength": 1, "maxLength": 255}
_IMPORT = {
    "type": "object",
    "required": ["export"],
    "additionalProperties": False,
    "properties": {
        "export": {
            "type": ["array", "object"],
            "description": "DolphinScheduler 3.0 - 3.2 export: a list of {processDefinition, processTaskRelationList,"
            " taskDefinitionList, schedule}",
        },
        "project": {**_NAME, "description": "project to create the workflows in (default: the export's, else default)"},
        "skip_unsupported": {
            "type": "boolean",
            "description": "import the rest when tasks are unsupported (they become failing placeholders, marked)",
        },
        "datasources": {
            "type": "object",
            "additionalProperties": {"type": "string", "minLength": 1},
            "description": "DolphinScheduler data-source id -> Porpoise data-source name (default: the id)",
        },
        "release": {"type": "boolean", "description": "put the imported workflows online (schedules stay offline)"},
    },
}
_IMPORTED = {
    "type": "object",
    "properties": {
        "project": {"type": "string"},
        "workflows": {"type": "array", "items": {"type": "object"}},
        "gaps": {"type": "array", "items": {"type": "object"}},
        "datasources": {"type": "object"},
    },
}
_EXPORT = {
    "type": "object",
    "required": ["project"],
    "additionalProperties": False,
    "properties": {
        "project": _NAME,
        "workflows": {"type": "array", "items": _NAME, "description": "names (default: every workflow of the project)"},
    },
}
_EXPORTED = {"type": "array", "items": {"type": "object"}, "description": "DolphinScheduler's export format"}

_CURRENT = (
    "SELECT d.code, d.name, d.version, d.project_code, p.name AS project FROM workflow_definition d"
    " JOIN project p ON p.code = d.project_code"
)


async def _tasks(conn: asyncpg.Connection, code: int, version: int) -> dict[int, str]:
    """task code -> name of a stored workflow version."""
    rows = await conn.fetch(
        "SELECT t.code, t.name FROM task_definition_log t JOIN workflow_task_relation_log r"
        " ON r.post_task_code = t.code AND r.post_task_version = t.version"
        " WHERE r.workflow_definition_code = $1 AND r.workflow_definition_version = $2",
        code,
        version,
    )
    return {int(r["code"]): r["name"] for r in rows}


async def _known(conn: asyncpg.Connection, who: access.Principal, codes: set[int]) -> dict[int, ds.WorkflowRef]:
    """The workflows the export names by code, among those the caller sees (the others answer as missing)."""
    if who.is_admin:
        rows = await conn.fetch(_CURRENT + " WHERE d.code = ANY($1::bigint[])", list(codes))
    else:
        rows = await conn.fetch(
            _CURRENT + f" WHERE d.code = ANY($1::bigint[]) AND d.project_code IN {access.visible_projects_sql(2)}",
            list(codes),
            who.user_id,
        )
    return {
        int(r["code"]): ds.WorkflowRef(r["project"], r["name"], await _tasks(conn, r["code"], r["version"]))
        for r in rows
    }


def _default_project(data: Any) -> str:
    first = data[0] if isinstance(data, list) and data else data
    definition = first.get("processDefinition") or first.get("workflowDefinition") if isinstance(first, dict) else None
    name = definition.get("projectName") if isinstance(definition, dict) else None
    return name if isinstance(name, str) and name.strip() else "default"


async def import_dolphinscheduler(api: Any, call: Call) -> dict[str, Any]:
    body = call.body
    data = body["export"]
    project = body.get("project") or _default_project(data)
    async with api.db.acquire() as conn:
        try:
            known = await _known(conn, call.principal, ds.referenced_codes(data))
            # pure but CPU-bound for a large export (every document is checked): off the event loop
            tr = await asyncio.to_thread(
                ds.translate, data, project, skip_unsupported=body.get("skip_unsupported", False),
                datasources=body.get("datasources") or {}, known=known,
            )  # fmt: skip
        except DefinitionError as exc:
            raise ApiError(400, exc.reason, f"export: {exc.field}") from exc
        except ds.Unsupported as exc:
            raise ApiError(
                400,
                f"{exc}. Nothing was imported; pass skip_unsupported to import the rest",
                "export",
                [g.as_dict() for g in exc.gaps],
            ) from exc
        await _check_sources(conn, call.principal, tr.datasources)
        for doc in tr.documents:
            await references.check_document(conn, call.principal, doc)
            try:  # each SQL / PROCEDURE task's source exists and is of the type the task runs on
                await references.check_source_names(conn, doc)
            except ApiError as exc:
                raise ApiError(400, exc.message, f"export: workflow {doc['name']!r}: {exc.field}") from exc
        names = [d["name"] for d in tr.documents]
        taken = await conn.fetch(_CURRENT + " WHERE p.name = $1 AND d.name = ANY($2::text[])", project, names)
        if taken:
            listed = ", ".join(sorted(r["name"] for r in taken))
            raise ApiError(
                409, f"project {project!r} already has workflow(s) {listed}; nothing was imported", "project"
            )
        saved = []
        try:
            async with conn.transaction():
                for doc in tr.documents:
                    wf = await environments.with_codes(conn, document.parse(doc))
                    code, version = await save_workflow(conn, wf, release=body.get("release", False),
                                                        user_id=call.user_id,
                                                        missing_resources_ok=True)  # fmt: skip
                    entry: dict[str, Any] = {"name": wf.name, "code": code, "version": version, "schedule_id": None}
                    if wf.name in tr.schedules:
                        try:
                            values = schedules.checked(tr.schedules[wf.name])
                        except ApiError as exc:
                            raise ApiError(
                                400, exc.message, f"export: workflow {wf.name!r}: schedule.{exc.field}"
                            ) from exc
                        entry["schedule_id"] = await schedules.insert(conn, code, values, call.user_id)
                    saved.append(entry)
                for doc in tr.documents:  # a SUB_PROCESS cycle among the file's own workflows
                    await check_cycles(conn, doc)
        except asyncpg.UniqueViolationError as exc:
            raise ApiError(
                409, f"a workflow of the file was created meanwhile in {project!r}; retry", "project"
            ) from exc
        except DefinitionError as exc:  # a malformed resourceList entry
            raise ApiError(400, exc.reason, f"export: {exc.field}") from exc
    for entry in saved:
        await api.expire_caches(entry["code"])
    return {
        "project": project,
        "workflows": saved,
        "gaps": [g.as_dict() for g in tr.gaps],
        "datasources": tr.datasources,
    }


async def _check_sources(conn: asyncpg.Connection, who: access.Principal, used: dict[str, list[str]]) -> None:
    """400 listing the data sources the file uses that are missing; for a general user, one not granted to
    them (or to a project they see) counts as missing, so the answer does not tell whether it exists."""
    if not used:
        return
    sql, args = "SELECT name FROM datasource WHERE name = ANY($1::text[])", [list(used)]
    if not who.is_admin:
        sql, args = sql + f" AND id IN {access.visible_granted_sql('datasource', 2)}", [*args, who.user_id]
    found = {r["name"] for r in await conn.fetch(sql, *args)}
    missing = {name: tasks for name, tasks in used.items() if name not in found}
    if missing:
        text = "; ".join(f"{name!r} (used by {', '.join(tasks)})" for name, tasks in sorted(missing.items()))
        raise ApiError(
            400,
            f"missing data source(s): {text}. Create them (PUT /api/v1/datasources/NAME) or map the"
            ' DolphinScheduler ids to existing ones with datasources {"<id>": "<name>"}; nothing was imported',
            "datasources",
            [{"datasource": name, "tasks": tasks} for name, tasks in sorted(missing.items())],
        )


async def _document(conn: asyncpg.Connection, row: Any) -> tuple[dict[str, Any], Codes]:
    spec = await load_spec(conn, row["code"], row["version"])
    description = await conn.fetchval(
        "SELECT description FROM workflow_definition_log WHERE code = $1 AND version = $2", row["code"], row["version"]
    )
    doc = document.to_document(spec, row["project"], description or "")
    notes = {
        r["code"]: r["description"]
        for r in await conn.fetch(
            "SELECT code, description FROM task_definition_log WHERE (code, version) IN"
            " (SELECT * FROM unnest($1::bigint[], $2::int[]))",
            [t.code for t in spec.tasks.values()],
            [t.version for t in spec.tasks.values()],
        )
    }
    by_name = {t.name: t.code for t in spec.tasks.values()}
    for task in doc["tasks"]:
        if notes.get(by_name[task["name"]]):
            task["description"] = notes[by_name[task["name"]]]
    return doc, Codes(int(row["code"]), int(row["project_code"]), by_name, int(row["version"]))


def _referenced(doc: dict[str, Any]) -> tuple[set[tuple[str, str]], set[int]]:
    names, codes = set(), set()
    for task in doc["tasks"]:
        p = task.get("params") or {}
        items = [p] if task["type"] == "SUB_PROCESS" else []
        if task["type"] == "DEPENDENT":
            items = [i for g in p.get("groups", [{"items": p.get("items", [])}]) for i in g.get("items", [])]
        for item in items:
            if isinstance(item.get("workflow_code"), int):
                codes.add(item["workflow_code"])
            elif isinstance(item.get("workflow"), str):
                names.add((item.get("project") or doc["project"], item["workflow"]))
    return names, codes


async def export_dolphinscheduler(api: Any, call: Call) -> list[dict[str, Any]]:
    project, wanted = call.body["project"], call.body.get("workflows")
    async with api.db.acquire() as conn:
        if wanted:
            rows = await conn.fetch(
                _CURRENT + " WHERE p.name = $1 AND d.name = ANY($2::text[]) ORDER BY d.id", project, wanted
            )
            missing = sorted(set(wanted) - {r["name"] for r in rows})
            if missing:
                raise ApiError(404, f"project {project!r} has no workflow {', '.join(missing)}", "workflows")
        else:
            rows = await conn.fetch(_CURRENT + " WHERE p.name = $1 ORDER BY d.id", project)
            if not rows:
                raise ApiError(404, f"project {project!r} has no workflows", "project")
        docs = [await _document(conn, r) for r in rows]
        refs = {(doc["project"], doc["name"]): codes for doc, codes in docs}
        names, codes = set(), set()
        for doc, _ in docs:
            n, c = _referenced(doc)
            names |= n
            codes |= c
        for r in await conn.fetch(_CURRENT + " WHERE d.code = ANY($1::bigint[])", list(codes)):
            names.add((r["project"], r["name"]))
        for proj, name in names - set(refs):
            row = await conn.fetchrow(_CURRENT + " WHERE p.name = $1 AND d.name = $2", proj, name)
            if row is not None:
                tasks = await _tasks(conn, row["code"], row["version"])
                refs[(proj, name)] = Codes(int(row["code"]), int(row["project_code"]), {v: k for k, v in tasks.items()})
        out = []
        for doc, wf_codes in docs:
            row = await conn.fetchrow(
                "SELECT * FROM schedule WHERE workflow_definition_code = $1 ORDER BY id LIMIT 1", wf_codes.code
            )
            sched = await asyncio.to_thread(schedules.schedule_json, row) if row is not None else None
            try:
                out.append(export(doc, wf_codes, refs, sched))
            except ExportError as exc:
                raise ApiError(409, f"workflow {doc['name']!r}: {exc}", "workflows") from exc
    return out


def _project_in_file(body: Any) -> str | None:
    return _default_project(body.get("export")) if isinstance(body, dict) else None


#: WRITE on the target project (named in the body, else in the file); a new project is the caller's own
_IMPORT_RULE = access.Rule(access.Need.WRITE, access.Find("project", "body.project", _project_in_file), create=True)
ROUTES = [
    Route("POST", "/api/v1/import/dolphinscheduler", import_dolphinscheduler,
          "Create the workflows (and schedules) of a DolphinScheduler export, all or none", "migration",
          body=_IMPORT, response=_IMPORTED, status=201, rule=_IMPORT_RULE),
    Route("POST", "/api/v1/export/dolphinscheduler", export_dolphinscheduler,
          "Workflows of a project in DolphinScheduler's export format", "migration",
          body=_EXPORT, response=_EXPORTED, rule=access.read("project", "body.project")),
]  # fmt: skip
