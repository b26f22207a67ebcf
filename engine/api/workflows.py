"""Workflow definitions: create, update (= a new version), versions, switch, release, delete, and the
list with each workflow's last runs. Starting one is workflow_start.py."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
from sqlalchemy import bindparam, func, select

from engine.api import access, environments, references
from engine.api.routing import PAGE, ApiError, Call, Param, Route, not_found, page
from engine.api.rows import RELEASE_NAMES
from engine.api.schedules import schedule_json
from engine.states import ReleaseState, WorkflowState
from engine.storage import sql
from engine.storage import tables as t
from engine.workflows import document
from engine.workflows.definitions import delete_workflow, load_spec, save_workflow, set_release, switch_version
from engine.workflows.model import DefinitionError

_UNFINISHED = [int(s) for s in WorkflowState if not s.finished]

wd = t.workflow_definition
_SUMMARY = {
    "type": "object",
    "required": ["code", "name", "project", "version", "release_state", "update_time"],
    "properties": {
        "code": {"type": "integer"},
        "name": {"type": "string"},
        "project": {"type": "string"},
        "version": {"type": "integer"},
        "release_state": {"enum": list(RELEASE_NAMES)},
        "description": {"type": ["string", "null"]},
        "update_time": {"type": "string", "format": "date-time"},
    },
}
LAST_RUNS = 10
_LISTED = {
    **_SUMMARY,
    "required": [*_SUMMARY["required"], "last_runs", "next_fire_time", "next_fire_timezone"],
    "properties": {
        **_SUMMARY["properties"],
        "last_runs": {
            "type": "array",
            "description": f"the latest {LAST_RUNS} instances, newest first",
            "items": {
                "type": "object",
                "required": ["id", "state"],
                "properties": {"id": {"type": "integer"}, "state": {"type": "string"}},
            },
        },
        "next_fire_time": {
            "type": ["string", "null"],
            "format": "date-time",
            "description": "the soonest fire of its online schedules",
        },
        "next_fire_timezone": {
            "type": ["string", "null"],
            "description": "the IANA zone of the schedule that fires next (its crontab's wall clock)",
        },
    },
}
_DETAIL = {
    **_SUMMARY,
    "required": [*_SUMMARY["required"], "document"],
    "properties": {**_SUMMARY["properties"], "document": {"$ref": "#/components/schemas/Workflow"}},
}
_SAVED = {
    "type": "object",
    "properties": {
        "code": {"type": "integer"},
        "version": {"type": "integer"},
        "created": {"type": "boolean"},
        "warning": {"type": "string", "description": "an admin saved into a project another user owns"},
    },
}


def _summary(row: Any) -> dict[str, Any]:
    return {
        "code": row["code"],
        "name": row["name"],
        "project": row["project"],
        "version": row["version"],
        "release_state": RELEASE_NAMES[row["release_state"]],
        "description": row["description"],
        "update_time": row["update_time"],
    }


def _select() -> Any:
    return select(
        wd.c.code, wd.c.name, wd.c.version, wd.c.release_state, wd.c.description, wd.c.update_time,
        t.project.c.name.label("project"),
    ).join(t.project, t.project.c.code == wd.c.project_code)  # fmt: skip


#: one workflow's row by code: compiled once (compiling the select took a tenth of a start call's CPU)
_BY_CODE, _ = sql.compile_sql(_select().where(wd.c.code == bindparam("code")))


#: a workflow's row (as _BY_CODE reads it) with the tenant and global parameters of its version $2 (0: its
#: current one) as ``run_tenant`` / ``run_global_params``, and whether that version exists (``run_found``)
RUNNABLE_BY_CODE = (
    "SELECT w.*, l.tenant_code AS run_tenant, l.global_params AS run_global_params, l.code IS NOT NULL AS run_found"
    f" FROM ({_BY_CODE}) w LEFT JOIN workflow_definition_log l ON l.code = w.code"
    " AND l.version = coalesce(nullif($2::int, 0), w.version)"
)


async def workflow_row(db: asyncpg.Pool | asyncpg.Connection, code: int) -> Any:
    row = await db.fetchrow(_BY_CODE, code)
    if row is None:
        raise not_found(f"workflow {code}")
    return row


def _definition_error(exc: DefinitionError) -> ApiError:
    return ApiError(400, exc.reason, exc.field)


async def list_workflows(api: Any, call: Call) -> dict[str, Any]:
    q = call.query
    where = access.project_clause(call, wd.c.project_code)
    if q["project"]:
        where.append(t.project.c.name == q["project"])
    if q["name"]:
        where.append(wd.c.name == q["name"])
    if q["search"]:
        where.append(wd.c.name.ilike(f"%{q['search']}%"))
    if q["release_state"]:
        where.append(wd.c.release_state == RELEASE_NAMES.index(q["release_state"]))
    base = _select().where(*where)
    total = await sql.fetchval(api.db, select(func.count()).select_from(base.subquery()))
    rows = await sql.fetch(api.db, base.order_by(t.project.c.name, wd.c.name).limit(q["size"]).offset(call.offset))
    items = [_summary(r) for r in rows]
    await _add_runs_and_fires(api.db, items)
    return page(items, total, call)


async def _add_runs_and_fires(db: asyncpg.Pool, items: list[dict[str, Any]]) -> None:
    """Each listed workflow's last runs (newest first) and next fire time: two queries for the page."""
    codes = [i["code"] for i in items]
    runs = await db.fetch(
        "SELECT c.code, r.id, r.state FROM unnest($1::bigint[]) AS c(code) CROSS JOIN LATERAL"
        " (SELECT id, state FROM workflow_instance WHERE workflow_definition_code = c.code"
        f" ORDER BY id DESC LIMIT {LAST_RUNS}) r ORDER BY c.code, r.id DESC",
        codes,
    )
    schedules = await db.fetch(
        "SELECT * FROM schedule"
        f" WHERE workflow_definition_code = ANY($1::bigint[]) AND release_state = {int(ReleaseState.ONLINE)}",
        codes,
    )
    by_code: dict[int, list[dict[str, Any]]] = {}
    for r in runs:
        by_code.setdefault(r["code"], []).append({"id": r["id"], "state": WorkflowState(r["state"]).name})
    fires: dict[int, tuple[Any, str]] = {}
    nexts = await asyncio.to_thread(lambda: [schedule_json(s, 1)["next_fire_times"] for s in schedules])
    for s, upcoming in zip(schedules, nexts, strict=True):
        code = s["workflow_definition_code"]
        if upcoming and (code not in fires or upcoming[0] < fires[code][0]):
            fires[code] = (upcoming[0], s["timezone_id"])
    for item in items:
        item["last_runs"] = by_code.get(item["code"], [])
        item["next_fire_time"], item["next_fire_timezone"] = fires.get(item["code"], (None, None))


async def _save(api: Any, doc: Any, release: bool, user_id: int | None, code: int | None = None) -> dict[str, Any]:
    try:
        # CPU work in proportion to the body (up to api.max_body_bytes): in a thread, so the loop
        # keeps serving meanwhile (no single step of it takes more than milliseconds)
        wf = await asyncio.to_thread(document.parse, doc)
    except DefinitionError as exc:
        raise _definition_error(exc) from exc
    async with api.db.acquire() as conn:
        await references.check_source_names(conn, doc)
        if code is not None:
            row = await workflow_row(conn, code)
            if (row["name"], row["project"]) != (wf.name, wf.project):
                raise ApiError(
                    400,
                    f"must stay {row['project']}/{row['name']} (renaming or moving a workflow is not supported)",
                    "name",
                )
        wf = await environments.with_codes(conn, wf)
        try:
            saved_code, version = await save_workflow(conn, wf, release=release, user_id=user_id)
        except DefinitionError as exc:
            raise _definition_error(exc) from exc
        if wf.description:
            await conn.execute(
                "UPDATE workflow_definition SET description = $2 WHERE code = $1", saved_code, wf.description
            )
    await api.expire_caches(saved_code)
    return {"code": saved_code, "version": version, "created": version == 1}


async def _owner_warning(api: Any, call: Call, answer: dict[str, Any]) -> dict[str, Any]:
    """An admin's save into a project another user owns (who created that name first) says so: the name
    may not be the project the admin meant."""
    owner = await api.db.fetchval(
        "SELECT u.user_name FROM project p JOIN users u ON u.id = p.user_id WHERE p.name = $1 AND p.user_id <> $2",
        call.body.get("project"),
        call.user_id,
    )
    if owner is not None and call.principal.is_admin:
        answer["warning"] = f"project {call.body['project']!r} belongs to user {owner!r}; saved there with admin rights"
    return answer


async def create_workflow(api: Any, call: Call) -> dict[str, Any]:
    await references.check_document(api.db, call.principal, call.body)
    return await _owner_warning(api, call, await _save(api, call.body, call.query["release"], call.user_id))


async def update_workflow(api: Any, call: Call) -> dict[str, Any]:
    await references.check_document(api.db, call.principal, call.body)
    saved = await _save(api, call.body, call.query["release"], call.user_id, call.path_int("code"))
    return await _owner_warning(api, call, saved)


async def _document(db: asyncpg.Pool, row: Any, version: int) -> dict[str, Any]:
    async with db.acquire() as conn:
        try:
            spec = await load_spec(conn, row["code"], version)
        except DefinitionError:
            raise not_found(f"version {version} of workflow {row['code']}") from None
        description = await conn.fetchval(
            "SELECT description FROM workflow_definition_log WHERE code = $1 AND version = $2", row["code"], version
        )
        names = await environments.names_of(conn, {t.environment_code for t in spec.tasks.values()})
    return document.to_document(spec, row["project"], description or "", names)


async def get_workflow(api: Any, call: Call) -> dict[str, Any]:
    row = await workflow_row(api.db, call.path_int("code"))
    return {**_summary(row), "document": await _document(api.db, row, row["version"])}


async def _running(db: asyncpg.Pool, code: int) -> int:
    return int(
        await db.fetchval(
            "SELECT (SELECT count(*) FROM workflow_instance WHERE workflow_definition_code = $1"
            " AND state = ANY($2::smallint[])) + (SELECT count(*) FROM command WHERE workflow_definition_code = $1)",
            code,
            _UNFINISHED,
        )
    )


async def delete(api: Any, call: Call) -> dict[str, Any]:
    row = await workflow_row(api.db, call.path_int("code"))
    if row["release_state"] == 1:
        raise ApiError(409, f"workflow {row['name']!r} is online; take it offline first")
    running = await _running(api.db, row["code"])
    if running:
        raise ApiError(409, f"workflow {row['name']!r} has {running} unfinished instance(s) or queued command(s)")
    async with api.db.acquire() as conn:
        await delete_workflow(conn, row["code"])
    await api.expire_caches(row["code"])
    return {"deleted": row["code"]}


async def list_versions(api: Any, call: Call) -> dict[str, Any]:
    row = await workflow_row(api.db, call.path_int("code"))
    log_t = t.workflow_definition_log
    total = await sql.fetchval(api.db, select(func.count()).select_from(log_t).where(log_t.c.code == row["code"]))
    rows = await sql.fetch(
        api.db,
        select(log_t.c.version, log_t.c.description, log_t.c.create_time)
        .where(log_t.c.code == row["code"])
        .order_by(log_t.c.version.desc())
        .limit(call.query["size"])
        .offset(call.offset),
    )
    items = [
        {"version": r["version"], "current": r["version"] == row["version"], "description": r["description"],
         "create_time": r["create_time"]}
        for r in rows
    ]  # fmt: skip
    return page(items, total, call)


async def get_version(api: Any, call: Call) -> dict[str, Any]:
    row = await workflow_row(api.db, call.path_int("code"))
    version = call.path_int("version")
    return {**_summary(row), "version": version, "document": await _document(api.db, row, version)}


async def switch(api: Any, call: Call) -> dict[str, Any]:
    code, version = call.path_int("code"), call.path_int("version")
    await workflow_row(api.db, code)
    async with api.db.acquire() as conn:
        try:
            await switch_version(conn, code, version)
        except DefinitionError as exc:
            raise ApiError(404, exc.reason, exc.field) from exc
    await api.expire_caches(code)
    return _summary(await workflow_row(api.db, code))


async def _release(api: Any, call: Call, online: bool) -> dict[str, Any]:
    code = call.path_int("code")
    await workflow_row(api.db, code)
    async with api.db.acquire() as conn:
        await set_release(conn, code, online)
    await api.expire_caches(code)
    return _summary(await workflow_row(api.db, code))


async def online(api: Any, call: Call) -> dict[str, Any]:
    return await _release(api, call, True)


async def offline(api: Any, call: Call) -> dict[str, Any]:
    return await _release(api, call, False)


_RELEASE = Param("release", bool, "put the saved version online", False)
_DELETED = {"type": "object", "properties": {"deleted": {"type": "integer"}}}
_VERSION = {
    "type": "object",
    "properties": {"version": {"type": "integer"}, "current": {"type": "boolean"},
                   "create_time": {"type": "string", "format": "date-time"}},
}  # fmt: skip
_WF = "{code}"
_READ, _WRITE = access.read("workflow", "path.code"), access.write("workflow", "path.code")
ROUTES = [
    Route("GET", "/api/v1/workflows", list_workflows, "List workflow definitions", "workflows",
          query=(Param("project", str, "project name"), Param("name", str, "exact name"),
                 Param("search", str, "substring of the name"),
                 Param("release_state", str, "ONLINE or OFFLINE", choices=RELEASE_NAMES), *PAGE),
          response=_LISTED, rule=access.SIGNED_IN),
    Route("POST", "/api/v1/workflows", create_workflow,
          "Create a workflow, or save a new version of the one with the same project and name", "workflows",
          query=(_RELEASE,), body=document.SCHEMA, response=_SAVED, status=201,
          rule=access.write("project", "body.project", create=True)),
    Route("GET", f"/api/v1/workflows/{_WF}", get_workflow, "A workflow with its current document", "workflows",
          response=_DETAIL, rule=_READ),
    Route("PUT", f"/api/v1/workflows/{_WF}", update_workflow, "Save a new version of a workflow", "workflows",
          query=(_RELEASE,), body=document.SCHEMA, response=_SAVED, rule=_WRITE),
    Route("DELETE", f"/api/v1/workflows/{_WF}", delete,
          "Delete an offline workflow that nothing runs (its instances keep their history)", "workflows",
          response=_DELETED, rule=_WRITE),
    Route("GET", f"/api/v1/workflows/{_WF}/versions", list_versions, "Versions of a workflow, newest first",
          "workflows", query=PAGE, response=_VERSION, rule=_READ),
    Route("GET", f"/api/v1/workflows/{_WF}/versions/{{version}}", get_version, "One version's document",
          "workflows", response=_DETAIL, rule=_READ),
    Route("POST", f"/api/v1/workflows/{_WF}/versions/{{version}}/switch", switch,
          "Make an earlier version the current one", "workflows", response=_SUMMARY, rule=_WRITE),
    Route("POST", f"/api/v1/workflows/{_WF}/online", online, "Release a workflow (it can be started)", "workflows",
          response=_SUMMARY, rule=_WRITE),
    Route("POST", f"/api/v1/workflows/{_WF}/offline", offline, "Take a workflow offline", "workflows",
          response=_SUMMARY, rule=_WRITE),
]  # fmt: skip
