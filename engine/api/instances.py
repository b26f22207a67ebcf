"""Workflow instances: list and filter, detail with task instances and timings, stop / pause (sent to
the owning master) and resume (a RECOVER_SUSPENDED_PROCESS command, as DolphinScheduler)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import and_, func, not_, or_, select

from engine.api import access, rows, task_groups
from engine.api.routing import PAGE, ApiError, Call, Param, Route, not_found, one, page
from engine.api.skipped import Edge, skipped_tasks
from engine.api.tenants import check_tenant
from engine.concurrency import serial_sql
from engine.master.worker_groups import parse_addresses
from engine.states import RESTART_FROM, CommandType, TaskState, WorkflowState
from engine.storage import sql, state_writes
from engine.storage import tables as t
from rpc.errors import RpcError
from rpc.messages import WorkflowControl

wi = t.workflow_instance
ti = t.task_instance
#: the instances list counts matches up to this many (``total_capped`` says there are more)
COUNT_CAP = 10_000
_STATES = tuple(s.name for s in WorkflowState)
_INSTANCE = {
    "type": "object",
    "required": ["id", "name", "workflow_code", "workflow_version", "project_code", "state", "finished", "host",
                 "start_time", "end_time", "duration_ms", "run_type"],
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": "string"},
        "workflow_code": {"type": "integer"},
        "workflow_version": {"type": "integer"},
        "project_code": {"type": "integer"},
        "state": {"enum": list(_STATES)},
        "finished": {"type": "boolean"},
        "host": {"type": ["string", "null"]},
        "command_type": {"type": "integer"},
        "run_type": {"enum": list(rows.RUN_TYPES), "description": "how the run came to be, from its command"},
        "run_times": {"type": "integer"},
        "priority": {"type": "string"},
        "failure_strategy": {"type": "string"},
        "worker_group": {"type": "string"},
        "schedule_time": {
            "type": ["string", "null"],
            "format": "date-time",
            "description": "the business date: the schedule's fire time or the backfill date it runs for",
        },
        "start_time": {"type": ["string", "null"], "format": "date-time"},
        "end_time": {"type": ["string", "null"], "format": "date-time"},
        "duration_ms": {"type": ["integer", "null"]},
    },
}  # fmt: skip
_DETAIL = {
    "type": "object",
    "required": [*_INSTANCE["required"], "tasks_total", "tasks"],
    "properties": {
        **_INSTANCE["properties"],
        "tasks_total": {"type": "integer", "description": "tasks in the definition version"},
        "parent_instance_id": {
            "type": ["integer", "null"],
            "description": "the instance whose sub-workflow task started this one",
        },
        "tasks": {"type": "array", "items": {"$ref": "#/components/schemas/TaskInstance"}},
    },
}
_CONTROL = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "action": {"enum": ["stop", "pause", "resume", "recover-failed", "rerun"]},
        "accepted": {"type": "boolean"},
        "command_id": {"type": ["integer", "null"]},
    },
}


def _names(raw: str, known: tuple[str, ...], field: str) -> list[str]:
    """A comma list of names, each one of ``known`` (else a 400 at ``field``), each once: a name repeated a
    thousand times must not make a statement a thousand clauses long."""
    names = [n.strip().lower() for n in raw.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ApiError(400, f"unknown run type {unknown[0]!r} (known: {', '.join(known)})", field)
    return sorted(set(names))


def _run_type_clause(wanted: list[str]) -> Any:
    """Instances whose run type (rows.run_type: from the command type, or for a run woken from a serial wait
    the first command of its history) is one of ``wanted``."""
    woken = wi.c.command_type == int(CommandType.RECOVER_SERIAL_WAIT)
    first = func.split_part(func.coalesce(wi.c.history_cmd, ""), ",", 1)

    def of(kind: str) -> Any:
        types = [c for c, k in rows.RUN_TYPE_OF.items() if k == kind]
        return or_(wi.c.command_type.in_([int(c) for c in types]), and_(woken, first.in_([c.name for c in types])))

    others = [of(k) for k in rows.RUN_TYPES if k != "manual"]
    return or_(*(of(k) if k != "manual" else not_(or_(*others)) for k in wanted))


async def list_instances(api: Any, call: Call) -> dict[str, Any]:
    q = call.query
    where = access.project_clause(call, wi.c.project_code)
    if q["state"]:
        names = [s.strip().upper() for s in q["state"].split(",") if s.strip()]
        unknown = [n for n in names if n not in _STATES]
        if unknown:
            raise ApiError(400, f"unknown state {unknown[0]!r} (known: {', '.join(_STATES)})", "query.state")
        where.append(wi.c.state.in_([int(WorkflowState[n]) for n in names]))
    if q["workflow"]:
        where.append(wi.c.workflow_definition_code == q["workflow"])
    if q["workflow_name"]:
        named = select(t.workflow_definition.c.code).where(t.workflow_definition.c.name == q["workflow_name"])
        where.append(wi.c.workflow_definition_code.in_(named))
    if q["run_type"]:
        where.append(_run_type_clause(_names(q["run_type"], rows.RUN_TYPES, "query.run_type")))
    if q["project"]:
        where.append(
            wi.c.project_code == select(t.project.c.code).where(t.project.c.name == q["project"]).scalar_subquery()
        )
    if q["since"]:
        where.append(wi.c.start_time >= q["since"])
    if q["until"]:
        where.append(wi.c.start_time < q["until"])
    if q["schedule_since"]:
        where.append(wi.c.schedule_time >= q["schedule_since"])
    if q["schedule_until"]:
        where.append(wi.c.schedule_time < q["schedule_until"])
    if q["host"]:
        where.append(wi.c.host == q["host"])
    # counted up to COUNT_CAP: a count over a million rows costs more than the page itself
    matching = select(wi.c.id).where(*where).limit(COUNT_CAP + 1).subquery()
    total = await sql.fetchval(api.db, select(func.count()).select_from(matching))
    if q["before"] is not None:
        where.append(wi.c.id < q["before"])  # keyset: as cheap a thousand pages deep as on the first
    found = await sql.fetch(
        api.db, select(wi).where(*where).order_by(wi.c.id.desc()).limit(q["size"]).offset(call.offset)
    )
    answer = page([rows.instance(r) for r in found], min(total, COUNT_CAP), call)
    answer["total_capped"] = total > COUNT_CAP
    answer["next_before"] = found[-1]["id"] if len(found) == q["size"] else None
    return answer


async def _instance(api: Any, instance_id: int) -> Any:
    return await one(api.db, select(wi).where(wi.c.id == instance_id), f"workflow instance {instance_id}")


def _group_state(entry: dict[str, Any] | None) -> dict[str, Any]:
    """A task's place in its task group: "waiting for group X, position n", or holding its slots."""
    if entry is None:
        return {}
    if entry["status"] == "WAITING":
        waiting = f"waiting for task group {entry['task_group']}, position {entry['position']}"
    else:
        waiting = None
    return {"task_group": {**entry, "waiting": waiting}}


#: task states in which an attempt waits for a worker to take it
_UNDISPATCHED = {TaskState.SUBMITTED_SUCCESS, TaskState.DISPATCH}


async def _no_worker_reasons(api: Any, found: list[Any], listed: list[dict[str, Any]]) -> None:
    """``waiting`` says so on each attempt not yet on a worker whose worker group has no live worker (a worker
    is in its configured group and in the managed groups listing its address: engine/master/worker_groups.py)."""
    groups = {r["worker_group"] for r in found if TaskState(r["state"]) in _UNDISPATCHED and not r["host"]}
    if not groups or not api.membership.ready.is_set():
        return
    live = api.membership.workers()
    assigned = {
        r["name"]: parse_addresses(r["addr_list"])
        for r in await api.db.fetch("SELECT name, addr_list FROM worker_group WHERE name = ANY($1)", list(groups))
    }
    empty = {g for g in groups if not any(w.node.group == g or w.address in assigned.get(g, ()) for w in live)}
    for r, task in zip(found, listed, strict=False):
        if r["worker_group"] in empty and TaskState(r["state"]) in _UNDISPATCHED and not r["host"]:
            task["waiting"] = f"no live worker in worker group {r['worker_group']!r}"


async def get_instance(api: Any, call: Call) -> dict[str, Any]:
    row = await _instance(api, call.path_int("id"))
    where = [ti.c.workflow_instance_id == row["id"]]
    if not call.query["all_attempts"]:
        where.append(ti.c.flag == 1)
    tasks = await sql.fetch(api.db, select(ti).where(*where).order_by(ti.c.submit_time, ti.c.id))
    # one relation row per edge (a task with two upstream tasks has two): the tasks are its distinct ends
    graph = await api.db.fetch(
        "SELECT r.pre_task_code, r.post_task_code, t.name, t.task_type, t.flag FROM workflow_task_relation_log r"
        " JOIN task_definition_log t ON t.code = r.post_task_code AND t.version = r.post_task_version"
        " WHERE r.workflow_definition_code = $1 AND r.workflow_definition_version = $2",
        row["workflow_definition_code"],
        row["workflow_definition_version"],
    )
    defined = {int(g["post_task_code"]): g for g in graph}
    total = len(defined)
    off = sorted((g for g in defined.values() if g["flag"] == 0), key=lambda g: g["name"])
    disabled = [{"code": g["post_task_code"], "name": g["name"], "task_type": g["task_type"]} for g in off]
    queued = {
        int(q["task_instance_id"]): task_groups.entry(q)
        for q in await api.db.fetch(
            "SELECT * FROM (" + task_groups.QUEUE + " WHERE q.task_group_id IN (SELECT task_group_id FROM"
            " task_group_queue WHERE workflow_instance_id = $1)) s WHERE workflow_instance_id = $1",
            row["id"],
        )
    }
    listed = [{**rows.task(r), **_group_state(queued.get(int(r["id"])))} for r in tasks]
    await _no_worker_reasons(api, tasks, listed)
    listed += [rows.disabled_task(d, row["id"]) for d in disabled]
    current = {int(r["task_code"]): TaskState(r["state"]).name for r in tasks if r["flag"] == 1}
    skipped = skipped_tasks(
        [Edge(int(g["pre_task_code"]), int(g["post_task_code"])) for g in graph],
        {code: g["task_type"] for code, g in defined.items()},
        current,
        WorkflowState(row["state"]).finished,
    )
    skipped = {code for code in skipped if defined[code]["flag"] != 0}  # a disabled task is listed as such
    listed += [rows.skipped_task(defined[c], row["id"]) for c in sorted(skipped, key=lambda c: defined[c]["name"])]
    children = await api.db.fetch(
        "SELECT parent_task_instance_id, workflow_instance_id FROM sub_workflow_relation"
        " WHERE parent_workflow_instance_id = $1 AND workflow_instance_id <> 0",
        row["id"],
    )
    child_of = {c["parent_task_instance_id"]: c["workflow_instance_id"] for c in children}
    for task in listed:
        if task["id"] in child_of:
            task["sub_instance_id"] = child_of[task["id"]]
    parent = await api.db.fetchval(
        "SELECT parent_workflow_instance_id FROM sub_workflow_relation WHERE workflow_instance_id = $1", row["id"]
    )
    return {**rows.instance_detail(row), "tasks_total": total, "tasks": listed, "parent_instance_id": parent}


async def _control(api: Any, call: Call, action: str, allowed: set[WorkflowState]) -> dict[str, Any]:
    row = await _instance(api, call.path_int("id"))
    state = WorkflowState(row["state"])
    if state not in allowed:
        names = " or ".join(sorted(s.name for s in allowed))
        raise ApiError(409, f"cannot {action} workflow instance {row['id']} in state {state.name} (needs {names})")
    try:
        reply = await api.rpc.call(row["host"], WorkflowControl(row["id"], action), timeout=5.0)
    except RpcError as exc:
        raise ApiError(
            503, f"the owning master {row['host']} did not answer ({exc}); it may be failing over, retry shortly"
        ) from exc
    if not reply.accepted:
        raise ApiError(
            409, f"master {row['host']} did not accept {action}: {reply.reason or 'state changed meanwhile'}"
        )
    return {"id": row["id"], "action": action, "accepted": True, "command_id": None}


async def stop(api: Any, call: Call) -> dict[str, Any]:
    row = await _instance(api, call.path_int("id"))
    if row["state"] == WorkflowState.SERIAL_WAIT:
        return await _stop_waiting(api, row)
    # a second stop of a stopping instance is accepted: its master sends the kills again
    allowed = {WorkflowState.RUNNING_EXECUTION, WorkflowState.READY_PAUSE, WorkflowState.READY_STOP}
    return await _control(api, call, "stop", allowed)


async def _stop_waiting(api: Any, row: Any) -> dict[str, Any]:
    """A run waiting for a place has no owner: the API stops it (under its workflow's lock), and if it had
    been woken already, the next waiting run is woken in its place."""
    async with api.db.acquire() as conn, conn.transaction():
        await serial_sql.lock(conn, int(row["workflow_definition_code"]))
        done = await state_writes.move_workflows(
            conn, [row["id"]], [WorkflowState.SERIAL_WAIT], WorkflowState.STOP, "stopped while waiting (api stop)"
        )
        if not done:
            raise ApiError(409, f"workflow instance {row['id']} stopped waiting meanwhile; try again")
        await serial_sql.wake(conn, int(row["workflow_definition_code"]))
    return {"id": row["id"], "action": "stop", "accepted": True, "command_id": None}


async def pause(api: Any, call: Call) -> dict[str, Any]:
    return await _control(api, call, "pause", {WorkflowState.RUNNING_EXECUTION})


# Commands that act on an existing instance: type, the states it applies to (DolphinScheduler's API rules).
_ON_INSTANCE = {
    "resume": CommandType.RECOVER_SUSPENDED_PROCESS,
    "recover-failed": CommandType.START_FAILURE_TASK_PROCESS,
    "rerun": CommandType.REPEAT_RUNNING,
}


async def _queue(api: Any, call: Call, action: str) -> dict[str, Any]:
    """Queue a command on an instance whose state allows it; a second one while the first is still
    queued is refused (DolphinScheduler's verifyIsNeedCreateCommand)."""
    command_type = _ON_INSTANCE[action]
    allowed = RESTART_FROM[command_type]
    instance_id = call.path_int("id")
    async with api.db.acquire() as conn, conn.transaction():
        row = await conn.fetchrow(
            "SELECT id, state, workflow_definition_code, workflow_definition_version, workflow_instance_priority,"
            " worker_group, failure_strategy, warning_type, warning_group_id FROM workflow_instance WHERE id = $1"
            " FOR UPDATE",
            instance_id,
        )
        if row is None:
            raise not_found(f"workflow instance {instance_id}")
        state = WorkflowState(row["state"])
        if state not in allowed:
            names = " or ".join(sorted(s.name for s in allowed))
            raise ApiError(
                409, f"cannot {action} workflow instance {instance_id} in state {state.name} (needs {names})"
            )
        if await conn.fetchval("SELECT 1 FROM command WHERE workflow_instance_id = $1", instance_id):
            raise ApiError(409, f"a command for workflow instance {instance_id} is already queued")
        # as for a start: the tenant's grant is checked again (one revoked since stops new runs of it)
        runs_as = await conn.fetchrow(
            "SELECT l.tenant_code, p.name FROM workflow_definition_log l JOIN workflow_definition d ON d.code = l.code"
            " JOIN project p ON p.code = d.project_code WHERE l.code = $1 AND l.version = $2",
            row["workflow_definition_code"],
            row["workflow_definition_version"],
        )
        if runs_as is not None:
            await check_tenant(conn, runs_as["tenant_code"], runs_as["name"])
        command_id = await conn.fetchval(
            "INSERT INTO command (command_type, workflow_definition_code, workflow_definition_version,"
            " workflow_instance_id, failure_strategy, workflow_instance_priority, worker_group, executor_id,"
            " warning_type, warning_group_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id",
            command_type,
            row["workflow_definition_code"],
            row["workflow_definition_version"],
            instance_id,
            row["failure_strategy"],
            row["workflow_instance_priority"],
            row["worker_group"],
            call.user_id,
            row["warning_type"],
            row["warning_group_id"],
        )
    return {"id": instance_id, "action": action, "accepted": True, "command_id": command_id}


async def resume(api: Any, call: Call) -> dict[str, Any]:
    return await _queue(api, call, "resume")


async def recover_failed(api: Any, call: Call) -> dict[str, Any]:
    return await _queue(api, call, "recover-failed")


async def rerun(api: Any, call: Call) -> dict[str, Any]:
    return await _queue(api, call, "rerun")


#: task states a user may force to success, and the instance states that allows (no actor drives it)
_FORCEABLE = {TaskState.FAILURE, TaskState.KILL, TaskState.NEED_FAULT_TOLERANCE}
_FORCE_IN = {WorkflowState.FAILURE, WorkflowState.STOP, WorkflowState.PAUSE}


async def force_success(api: Any, call: Call) -> dict[str, Any]:
    """Mark a failed task instance FORCED_SUCCESS; recover-failed (or resume) then runs what follows it."""
    task_id = call.path_int("id")
    async with api.db.acquire() as conn, conn.transaction():
        task = await conn.fetchrow(
            "SELECT id, workflow_instance_id, state, flag, name FROM task_instance WHERE id = $1", task_id
        )
        if task is None:
            raise not_found(f"task instance {task_id}")
        state = await conn.fetchval(
            "SELECT state FROM workflow_instance WHERE id = $1 FOR UPDATE", task["workflow_instance_id"]
        )
        if WorkflowState(state) not in _FORCE_IN:
            raise ApiError(
                409,
                f"workflow instance {task['workflow_instance_id']} is {WorkflowState(state).name}; force success"
                " needs it FAILURE, STOP or PAUSE",
            )
        if task["flag"] != 1:
            raise ApiError(409, f"task instance {task_id} is a superseded attempt; force its latest attempt")
        if TaskState(task["state"]) not in _FORCEABLE:
            raise ApiError(
                409,
                f"task instance {task_id} is {TaskState(task['state']).name}; only a failed or killed task"
                " can be forced to success",
            )
        moved = await state_writes.move_tasks(conn, [task_id], _FORCEABLE, TaskState.FORCED_SUCCESS, "forced (api)")
        if not moved:
            raise ApiError(409, f"task instance {task_id} changed meanwhile; try again")
    return {"id": task_id, "state": TaskState.FORCED_SUCCESS.name}


ROUTES = [
    Route("GET", "/api/v1/instances", list_instances, "List workflow instances, newest first", "instances",
          query=(Param("state", str, "comma list of states, e.g. RUNNING_EXECUTION,FAILURE"),
                 Param("workflow", int, "workflow definition code"), Param("project", str, "project name"),
                 Param("since", dt.datetime, "started at or after (ISO 8601)"),
                 Param("until", dt.datetime, "started before (ISO 8601)"),
                 Param("workflow_name", str, "workflow definition name (exact; with project for one project's)"),
                 Param("run_type", str, f"comma list of run types: {', '.join(rows.RUN_TYPES)}"),
                 Param("schedule_since", dt.datetime, "business date (schedule time) at or after (ISO 8601)"),
                 Param("schedule_until", dt.datetime, "business date (schedule time) before (ISO 8601)"),
                 Param("host", str, "owning master host:port"),
                 Param("before", int, "only instances with a smaller id: pass the previous answer's next_before to"
                       " page through history at any depth (with page=1; total counts them all)", minimum=1),
                 *PAGE),
          response=_INSTANCE, rule=access.SIGNED_IN),
    Route("GET", "/api/v1/instances/{id}", get_instance, "A workflow instance with its task instances", "instances",
          query=(Param("all_attempts", bool, "include superseded attempts (retries, failovers)", False),),
          response=_DETAIL, rule=access.read("instance", "path.id")),
    Route("POST", "/api/v1/instances/{id}/stop", stop, "Stop: kill running tasks, submit nothing more",
          "instances", response=_CONTROL, rule=access.execute("instance", "path.id")),
    Route("POST", "/api/v1/instances/{id}/pause", pause, "Pause: let running tasks finish, submit nothing more",
          "instances", response=_CONTROL, rule=access.execute("instance", "path.id")),
    Route("POST", "/api/v1/instances/{id}/resume", resume, "Resume a paused or stopped instance", "instances",
          response=_CONTROL, status=202, rule=access.execute("instance", "path.id")),
    Route("POST", "/api/v1/instances/{id}/recover-failed", recover_failed,
          "Run a failed instance again from its failed tasks (START_FAILURE_TASK_PROCESS)", "instances",
          response=_CONTROL, status=202, rule=access.execute("instance", "path.id")),
    Route("POST", "/api/v1/instances/{id}/rerun", rerun,
          "Run a finished instance again from scratch, same instance (REPEAT_RUNNING)", "instances",
          response=_CONTROL, status=202, rule=access.execute("instance", "path.id")),
    Route("POST", "/api/v1/tasks/{id}/force-success", force_success,
          "Force a failed task instance of a finished workflow instance to success", "instances",
          response={"type": "object", "properties": {"id": {"type": "integer"}, "state": {"type": "string"}}},
          rule=access.execute("task", "path.id")),
]  # fmt: skip
