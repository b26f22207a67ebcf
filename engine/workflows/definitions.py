"""Saving and loading versioned workflow definitions (current rows + append-only version logs).

A save validates first and writes nothing when the definition is invalid. Codes are stable across
versions; each save of a workflow creates the next version of it and of its tasks and relations.
The master only ever reads the log tables, pinned to the version an instance was created with.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import asyncpg

from engine.resources import catalog
from engine.resources.refs import Ref
from engine.workflows.model import Dag, DefinitionError, WorkflowDef

ONLINE, OFFLINE = 1, 0

_LATEST = "SELECT max(version) FROM workflow_definition_log WHERE code = $1"


@dataclass(frozen=True)
class TaskSpec:
    code: int
    version: int
    name: str
    task_type: str
    params: Mapping[str, Any]
    priority: int
    worker_group: str
    retries: int
    retry_interval: int
    timeout_flag: int
    timeout_strategy: int | None
    timeout: int
    delay_time: int
    environment_code: int
    #: flag = 0 (DolphinScheduler's Flag.NO): the task is skipped and its downstream connects through it
    disabled: bool = False
    #: task group id (0 = none) and name, priority in it (higher first), slots it takes
    task_group_id: int = 0
    task_group: str = ""
    task_group_priority: int = 0
    task_group_slots: int = 1
    #: task-level alerts: the ends that raise one (failure, success, retry, timeout) and the alert group
    #: they go to (0: the instance's warning group)
    alert_on: frozenset[str] = frozenset()
    alert_group_id: int = 0
    alert_group: str = ""


@dataclass(frozen=True)
class WorkflowSpec:
    code: int
    version: int
    name: str
    project_code: int
    global_params: list[dict[str, Any]]
    timeout: int
    release_state: int
    tenant: str
    execution_type: int
    tasks: Mapping[int, TaskSpec]
    dag: Dag
    #: active runs at once (0 = the execution type's default: engine.concurrency.serial.Rule)
    max_active_runs: int = 0
    #: the workflow timeout's strategy: 0 WARN (an alert), 1 FAILED (alert, stop, FAILURE)
    timeout_strategy: int = 0


async def next_code(conn: asyncpg.Connection) -> int:
    return int(await conn.fetchval("SELECT nextval('definition_code_seq')"))


async def ensure_project(conn: asyncpg.Connection, name: str, owner: int | None = None) -> int:
    """The code of project ``name``, created (owned by ``owner``) when missing."""
    code = await conn.fetchval("SELECT code FROM project WHERE name = $1", name)
    if code is not None:
        return int(code)
    new = await next_code(conn)
    code = await conn.fetchval(
        "INSERT INTO project (code, name, user_id) VALUES ($1, $2, $3)"
        " ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name RETURNING code",
        new,
        name,
        owner,
    )
    return int(code)


async def save_workflow(
    conn: asyncpg.Connection,
    wf: WorkflowDef,
    release: bool = False,
    user_id: int | None = None,
    missing_resources_ok: bool = False,
) -> tuple[int, int]:
    """Create or update (= new version) a workflow definition. Returns (code, version). The resource-center
    files its tasks name are pinned to their newest versions (engine/resources/refs.py); one not stored is a
    DefinitionError at its field, unless ``missing_resources_ok`` (an import: then it is used as ``latest``)."""
    await asyncio.to_thread(wf.validate)  # CPU work in proportion to the definition: off the loop
    async with conn.transaction():
        project_code = await ensure_project(conn, wf.project, user_id)
        row = await conn.fetchrow(
            "SELECT code, version, release_state FROM workflow_definition WHERE project_code = $1 AND name = $2"
            " FOR UPDATE",
            project_code,
            wf.name,
        )
        if row is None:
            code, version, state = await next_code(conn), 1, ONLINE if release else OFFLINE
            names: dict[str, int] = {}
        else:
            code, current = int(row["code"]), int(row["version"])
            # after a switch to an older version the newest log version is not the current one
            version = int(await conn.fetchval(_LATEST, code)) + 1
            state = ONLINE if release else int(row["release_state"])
            names = {
                r["name"]: int(r["code"])
                for r in await conn.fetch(
                    "SELECT t.name, t.code FROM task_definition_log t JOIN workflow_task_relation_log r"
                    " ON r.post_task_code = t.code AND r.post_task_version = t.version"
                    " WHERE r.workflow_definition_code = $1 AND r.workflow_definition_version = $2",
                    code,
                    current,
                )
            }
        codes = {}
        for t in wf.tasks:
            codes[t.name] = names.get(t.name) or await next_code(conn)
        groups = await _task_groups(conn, wf, project_code)
        alert_groups = await alert_groups_of(conn, wf)
        used: list[tuple[int, Ref]] = []
        await catalog.lock_project(conn, project_code)  # what it pins is not deleted before the save commits
        for i, t in enumerate(wf.tasks):
            try:
                params, task_refs = await catalog.pin_task(
                    conn, project_code, t.task_type, t.params, missing_ok=missing_resources_ok
                )
            except DefinitionError as exc:
                raise DefinitionError(f"tasks[{i}].params.{exc.field}", exc.reason) from None
            used.extend((codes[t.name], r) for r in task_refs)
            values = (
                codes[t.name], t.name, version, t.description, project_code, user_id, t.task_type,
                json.dumps(params), t.priority, t.worker_group, t.environment_code, t.retries,
                t.retry_interval, 1 if t.timeout else 0, t.timeout_strategy, t.timeout, t.delay_time,
                0 if t.disabled else 1, groups.get(t.task_group, 0), t.task_group_priority, t.task_group_slots,
                ",".join(t.alert_on), alert_groups.get(i),
            )  # fmt: skip
            cols = (
                "code, name, version, description, project_code, user_id, task_type, task_params, task_priority,"
                " worker_group, environment_code, fail_retry_times, fail_retry_interval, timeout_flag,"
                " timeout_notify_strategy, timeout, delay_time, flag, task_group_id, task_group_priority,"
                " task_group_slots, alert_on, alert_group_id"
            )
            await _write_versioned(conn, "task_definition", cols, values)
        relations = []
        for t in wf.tasks:
            if not t.upstream:
                relations.append((0, 0, codes[t.name]))
            for up in t.upstream:
                relations.append((codes[up], version, codes[t.name]))
        for table in ("workflow_task_relation_log", "workflow_task_relation"):
            if table == "workflow_task_relation":
                await conn.execute("DELETE FROM workflow_task_relation WHERE workflow_definition_code = $1", code)
            await conn.executemany(
                f"INSERT INTO {table} (project_code, workflow_definition_code, workflow_definition_version,"
                " pre_task_code, pre_task_version, post_task_code, post_task_version)"
                " VALUES ($1, $2, $3, $4, $5, $6, $7)",
                [(project_code, code, version, pre, pre_v, post, version) for pre, pre_v, post in relations],
            )
        wf_values = (
            code, wf.name, version, wf.description, project_code, state, user_id,
            json.dumps([dict(p) for p in wf.global_params]), wf.timeout, wf.tenant, wf.execution_type,
            wf.max_active_runs, wf.timeout_strategy,
        )  # fmt: skip
        wf_cols = (
            "code, name, version, description, project_code, release_state, user_id, global_params, timeout,"
            " tenant_code, execution_type, max_active_runs, timeout_strategy"
        )
        await _write_versioned(conn, "workflow_definition", wf_cols, wf_values)
        await catalog.record_references(conn, project_code, code, version, used)
    return code, version


async def _task_groups(conn: asyncpg.Connection, wf: WorkflowDef, project_code: int) -> dict[str, int]:
    """The ids of the task groups the workflow's tasks name; DefinitionError names the task whose group
    does not exist, belongs to another project, or is smaller than the slots the task takes."""
    wanted = sorted({t.task_group for t in wf.tasks if t.task_group})
    if not wanted:
        return {}
    rows = await conn.fetch(
        "SELECT id, name, project_code, group_size FROM task_group WHERE name = ANY($1::text[])", wanted
    )
    found = {r["name"]: r for r in rows}
    for i, t in enumerate(wf.tasks):
        if not t.task_group:
            continue
        g = found.get(t.task_group)
        if g is None:
            raise DefinitionError(f"tasks[{i}].task_group", f"no task group named {t.task_group!r}")
        if g["project_code"] is not None and int(g["project_code"]) != project_code:
            raise DefinitionError(f"tasks[{i}].task_group", f"task group {t.task_group!r} belongs to another project")
        if t.task_group_slots > int(g["group_size"]):
            raise DefinitionError(
                f"tasks[{i}].task_group_slots",
                f"takes {t.task_group_slots} slots; task group {t.task_group!r} has {g['group_size']}",
            )
    return {name: int(r["id"]) for name, r in found.items()}


async def alert_groups_of(conn: asyncpg.Connection | asyncpg.Pool, wf: WorkflowDef) -> dict[int, int]:
    """Task index -> the id of the alert group the task names (by id or name); DefinitionError names the
    task whose group does not exist."""
    out: dict[int, int] = {}
    for i, t in enumerate(wf.tasks):
        if t.alert_group is None:
            continue
        by_id = isinstance(t.alert_group, int)
        found = await conn.fetchval(
            f"SELECT id FROM alert_group WHERE {'id' if by_id else 'group_name'} = $1", t.alert_group
        )
        if found is None:
            raise DefinitionError(f"tasks[{i}].alert_group", f"no alert group {t.alert_group!r}")
        out[i] = int(found)
    return out


async def _write_versioned(conn: asyncpg.Connection, table: str, cols: str, values: tuple[Any, ...]) -> None:
    """Append the version to ``<table>_log`` and make it the current row of ``<table>`` (keyed by code,
    the first column)."""
    marks = ", ".join(f"${i}" for i in range(1, len(values) + 1))
    await conn.execute(f"INSERT INTO {table}_log ({cols}) VALUES ({marks})", *values)
    updates = ", ".join(f"{c.strip()} = EXCLUDED.{c.strip()}" for c in cols.split(",")[1:])
    await conn.execute(
        f"INSERT INTO {table} ({cols}) VALUES ({marks})"
        f" ON CONFLICT (code) DO UPDATE SET {updates}, update_time = now()",
        *values,
    )


async def switch_version(conn: asyncpg.Connection, code: int, version: int) -> None:
    """Make logged ``version`` the current version of workflow ``code`` (DolphinScheduler's "switch
    version"); the next save creates max(version) + 1. DefinitionError if that version does not exist."""
    async with conn.transaction():
        exists = await conn.fetchval(
            "SELECT 1 FROM workflow_definition_log WHERE code = $1 AND version = $2", code, version
        )
        if not exists:
            raise DefinitionError("version", f"workflow {code} has no version {version}")
        await conn.execute(
            "UPDATE workflow_definition d SET name = l.name, version = l.version, description = l.description,"
            " global_params = l.global_params, timeout = l.timeout, tenant_code = l.tenant_code,"
            " execution_type = l.execution_type, max_active_runs = l.max_active_runs,"
            " timeout_strategy = l.timeout_strategy, update_time = now()"
            " FROM workflow_definition_log l WHERE d.code = $1 AND l.code = $1 AND l.version = $2",
            code,
            version,
        )
        await conn.execute("DELETE FROM workflow_task_relation WHERE workflow_definition_code = $1", code)
        await conn.execute(
            "INSERT INTO workflow_task_relation (project_code, workflow_definition_code, workflow_definition_version,"
            " pre_task_code, pre_task_version, post_task_code, post_task_version)"
            " SELECT project_code, workflow_definition_code, workflow_definition_version, pre_task_code,"
            " pre_task_version, post_task_code, post_task_version FROM workflow_task_relation_log"
            " WHERE workflow_definition_code = $1 AND workflow_definition_version = $2",
            code,
            version,
        )
        cols = (
            "name, version, description, project_code, user_id, task_type, task_params, task_priority, worker_group,"
            " environment_code, fail_retry_times, fail_retry_interval, timeout_flag, timeout_notify_strategy,"
            " timeout, delay_time, flag, task_group_id, task_group_priority, task_group_slots, alert_on, alert_group_id"
        )
        names = [c.strip() for c in cols.split(",")]
        updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in names)
        await conn.execute(
            f"INSERT INTO task_definition (code, {cols}) SELECT t.code, {', '.join('t.' + c for c in names)}"
            " FROM task_definition_log t JOIN workflow_task_relation_log r ON r.post_task_code = t.code"
            " AND r.post_task_version = t.version WHERE r.workflow_definition_code = $1"
            f" AND r.workflow_definition_version = $2 ON CONFLICT (code) DO UPDATE SET {updates}, update_time = now()",
            code,
            version,
        )


async def delete_workflow(conn: asyncpg.Connection, code: int) -> None:
    """Delete a workflow definition with its tasks, relations and version logs. The caller checks that
    it is offline and nothing runs it; instances keep their rows (history) but lose the definition."""
    async with conn.transaction():
        task_codes = [
            int(r["post_task_code"])
            for r in await conn.fetch(
                "SELECT DISTINCT post_task_code FROM workflow_task_relation_log WHERE workflow_definition_code = $1",
                code,
            )
        ]
        await conn.execute("DELETE FROM workflow_task_relation WHERE workflow_definition_code = $1", code)
        await conn.execute("DELETE FROM workflow_task_relation_log WHERE workflow_definition_code = $1", code)
        await conn.execute("DELETE FROM task_definition WHERE code = ANY($1)", task_codes)
        await conn.execute("DELETE FROM task_definition_log WHERE code = ANY($1)", task_codes)
        await conn.execute("DELETE FROM workflow_definition WHERE code = $1", code)
        await conn.execute("DELETE FROM workflow_definition_log WHERE code = $1", code)
        await conn.execute("DELETE FROM resource_reference WHERE workflow_code = $1", code)


async def set_release(conn: asyncpg.Connection, code: int, online: bool) -> None:
    await conn.execute(
        "UPDATE workflow_definition SET release_state = $2, update_time = now() WHERE code = $1",
        code,
        ONLINE if online else OFFLINE,
    )


async def load_spec(conn: asyncpg.Connection, code: int, version: int) -> WorkflowSpec:
    """The immutable definition of ``code`` at ``version``; DefinitionError if it does not exist."""
    wf = await conn.fetchrow("SELECT * FROM workflow_definition_log WHERE code = $1 AND version = $2", code, version)
    if wf is None:
        raise DefinitionError("workflow_definition", f"definition {code} version {version} does not exist")
    rels = await conn.fetch(
        "SELECT pre_task_code, post_task_code, post_task_version FROM workflow_task_relation_log"
        " WHERE workflow_definition_code = $1 AND workflow_definition_version = $2",
        code,
        version,
    )
    wanted = {(int(r["post_task_code"]), int(r["post_task_version"])) for r in rels}
    rows = await conn.fetch(
        "SELECT * FROM task_definition_log WHERE (code, version) IN (SELECT * FROM unnest($1::bigint[], $2::int[]))",
        [c for c, _ in wanted],
        [v for _, v in wanted],
    )
    group_ids = sorted({int(r["task_group_id"]) for r in rows if r["task_group_id"]})
    group_names: dict[int, str] = {}
    if group_ids:
        found = await conn.fetch("SELECT id, name FROM task_group WHERE id = ANY($1::bigint[])", group_ids)
        group_names = {int(g["id"]): g["name"] for g in found}
    alert_ids = sorted({int(r["alert_group_id"]) for r in rows if r["alert_group_id"]})
    alert_names: dict[int, str] = {}
    if alert_ids:
        found = await conn.fetch("SELECT id, group_name FROM alert_group WHERE id = ANY($1::bigint[])", alert_ids)
        alert_names = {int(g["id"]): g["group_name"] for g in found}
    tasks = {
        int(r["code"]): TaskSpec(
            code=int(r["code"]),
            version=int(r["version"]),
            name=r["name"],
            task_type=r["task_type"],
            params=r["task_params"],
            priority=int(r["task_priority"]),
            worker_group=r["worker_group"],
            retries=int(r["fail_retry_times"]),
            retry_interval=int(r["fail_retry_interval"]),
            timeout_flag=int(r["timeout_flag"]),
            timeout_strategy=r["timeout_notify_strategy"],
            timeout=int(r["timeout"]),
            delay_time=int(r["delay_time"]),
            environment_code=int(r["environment_code"]),
            disabled=int(r["flag"]) == 0,
            task_group_id=int(r["task_group_id"]),
            task_group=group_names.get(int(r["task_group_id"]), ""),
            task_group_priority=int(r["task_group_priority"]),
            task_group_slots=int(r["task_group_slots"]),
            alert_on=frozenset(w for w in r["alert_on"].split(",") if w),
            alert_group_id=int(r["alert_group_id"] or 0),
            alert_group=alert_names.get(int(r["alert_group_id"] or 0), ""),
        )
        for r in rows
    }
    edges = [(int(r["pre_task_code"]), int(r["post_task_code"])) for r in rels if int(r["pre_task_code"])]
    return WorkflowSpec(
        code=code,
        version=version,
        name=wf["name"],
        project_code=int(wf["project_code"]),
        global_params=list(wf["global_params"]),
        timeout=int(wf["timeout"]),
        release_state=int(wf["release_state"]),
        tenant=wf["tenant_code"],
        execution_type=int(wf["execution_type"]),
        max_active_runs=int(wf["max_active_runs"]),
        timeout_strategy=int(wf["timeout_strategy"]),
        tasks=tasks,
        dag=Dag.build(sorted(tasks), edges),
    )
