"""Starting a workflow: a run now (a START_PROCESS command, or START_CURRENT_TASK_PROCESS from chosen
tasks), a backfill over dates (COMPLEMENT_DATA commands, serial or parallel chains, optionally with the
workflows that depend on it), and where a queued command is. The masters claim the commands."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import asyncpg

from core import marks
from engine.api import access, backfill_dependents
from engine.api.routing import ApiError, Call, Route, not_found
from engine.api.rows import FAILURE_STRATEGY_NAMES, PRIORITY_NAMES
from engine.api.tenants import check_tenant
from engine.api.workflows import RUNNABLE_BY_CODE
from engine.scheduling.backfill import BackfillError, backfill_param, chunks, list_dates, range_dates
from engine.states import CommandType, ReleaseState
from engine.tasks.base import ParamError
from engine.tasks.placing import raw_names
from engine.workflows.definitions import load_spec
from engine.workflows.model import name_error
from engine.workflows.start_params import resolve_globals

_START = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "params": {
            "type": "object",
            "additionalProperties": {"type": ["string", "number", "boolean"]},
            "description": "global parameter overrides for this run",
        },
        "priority": {"enum": list(PRIORITY_NAMES)},
        "worker_group": {"type": "string", "minLength": 1, "maxLength": 64},
        "failure_strategy": {"enum": list(FAILURE_STRATEGY_NAMES)},
        "version": {"type": "integer", "minimum": 1, "description": "definition version (default: current)"},
        "dry_run": {"type": "boolean"},
        "warning_type": {"enum": ["NONE", "SUCCESS", "FAILURE", "ALL"]},
        "warning_group_id": {"type": "integer"},
        "start_tasks": {
            "type": "array",
            "items": {"type": "string", "minLength": 1},
            "minItems": 1,
            "description": "run only from these tasks (START_CURRENT_TASK_PROCESS)",
        },
        "scope": {
            "enum": ["TASK_ONLY", "TASK_PRE", "TASK_POST"],
            "description": "with start_tasks: just them, with everything upstream, or downstream (default)",
        },
    },
}
#: chains of one backfill running at once, at most
MAX_PARALLELISM = 64
_BACKFILL = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        **{k: v for k, v in _START["properties"].items() if k not in ("start_tasks", "scope")},
        "start": {"type": "string", "format": "date-time", "description": "range start (inclusive)"},
        "end": {"type": "string", "format": "date-time", "description": "range end (inclusive)"},
        "dates": {"type": "array", "items": {"type": "string", "format": "date-time"}, "minItems": 1},
        "run_mode": {"enum": ["SERIAL", "PARALLEL"]},
        "parallelism": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_PARALLELISM,
            "description": f"PARALLEL: chains running at once (default and at most {MAX_PARALLELISM})",
        },
        "reverse": {"type": "boolean", "description": "newest date first"},
        "on_failure": {"enum": ["STOP", "CONTINUE"], "description": "a chain's next date after a failed one"},
        "dependent_mode": {
            "enum": ["OFF", "ALL_DEPENDENT"],
            "description": "ALL_DEPENDENT: also backfill, for the same dates, every workflow whose DEPENDENT"
            " tasks wait on this one (transitively), upstream ones first, among those the caller may start"
            " (EXECUTE); offline ones and ones whose tenant is not granted are skipped and listed, the others"
            " only counted",
        },
    },
}
_BACKFILLED = {
    "type": "object",
    "properties": {
        "command_ids": {"type": "array", "items": {"type": "integer"}},
        "dates": {"type": "integer"},
        "chains": {"type": "integer"},
        "dependents": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "code": {"type": "integer"},
                    "name": {"type": "string"},
                    "project": {"type": "string"},
                    "command_ids": {"type": "array", "items": {"type": "integer"}},
                    "skipped": {"type": ["string", "null"]},
                },
            },
            "description": "ALL_DEPENDENT: the downstream workflows, in the order they were queued",
        },
        "skipped_not_permitted": {
            "type": "integer",
            "description": "ALL_DEPENDENT: downstream workflows the caller may not start (not queued, not named)",
        },
    },
}
WARNING_TYPES = ("NONE", "SUCCESS", "FAILURE", "ALL")
SCOPES = ("TASK_ONLY", "TASK_PRE", "TASK_POST")
_COMMAND = {
    "type": "object",
    "required": ["command_id", "status", "workflow_instance_id"],
    "properties": {
        "command_id": {"type": "integer"},
        "status": {"enum": ["QUEUED", "STARTED", "ERROR"]},
        "workflow_instance_id": {"type": ["integer", "null"]},
        "message": {"type": ["string", "null"]},
    },
}


async def _startable(api: Any, code: int, body: dict[str, Any]) -> tuple[Any, int, list[Any]]:
    """The workflow row, the version a start or backfill runs (refusing offline / unknown versions,
    and a name saved before names were bounded, which no instance name can hold) and that version's
    global parameters (read with the row and its tenant: one round trip)."""
    version = body.get("version", 0)  # the body's schema: an integer from 1
    row = await api.db.fetchrow(RUNNABLE_BY_CODE, code, version)  # the row and the version's: one round trip
    if row is None:
        raise not_found(f"workflow {code}")
    if row["release_state"] != 1:
        raise ApiError(409, f"workflow {row['name']!r} is offline; put it online first")
    too_long = name_error(row["name"])
    if too_long:
        raise ApiError(400, f"{too_long}: save the workflow under a shorter name to run it", "name")
    if not row["run_found"] and version:
        raise ApiError(400, f"workflow {row['code']} has no version {version}", "version")
    # the tenant's grant is checked again: one revoked since the save stops new runs
    await check_tenant(api.db, row["run_tenant"] if row["run_found"] else None, row["project"])
    return row, version, list((row["run_global_params"] if row["run_found"] else None) or [])


async def _check_params(
    api: Any,
    row: Any,
    version: int,
    start_params: dict[str, str],
    times: list[tuple[dt.datetime, str]],
    global_params: list[Any] | None = None,
) -> None:
    """Refuse up front the parameters the master could not resolve (a ``$[...]`` past the date range,
    a division by zero, an unknown function) at each business time: a start parameter names its
    ``params.<name>`` field; the definition's own global parameter names the time's field.
    ``global_params``: the version's, when the caller read them already (else read here)."""
    if global_params is None:
        raw = await api.db.fetchval(
            "SELECT global_params FROM workflow_definition_log WHERE code = $1 AND version = $2",
            row["code"],
            version or row["version"],
        )
        global_params = list(raw or [])
    for when, time_field in times:
        try:
            resolve_globals(global_params, start_params, when)
        except ParamError as exc:
            where, _, name = exc.field.partition(".")
            if where == "StartParams":
                raise ApiError(400, exc.reason, f"params.{name}") from None
            raise ApiError(400, f"global parameter {name}: {exc.reason}", time_field) from None


async def _check_raw(api: Any, row: Any, version: int, start_params: dict[str, str]) -> None:
    """Refuse a start parameter a SQL task uses as raw text (``!{name}``): that takes only values the
    workflow's writers wrote (the worker refuses the attempt too; this says so before anything runs)."""
    if not start_params:
        return
    async with api.db.acquire() as conn:
        spec = await load_spec(conn, row["code"], version or row["version"])
    for task in sorted(spec.tasks.values(), key=lambda t: t.name):
        if task.task_type != "SQL":
            continue
        texts = [task.params.get("sql"), *task.params.get("preStatements", []), *task.params.get("postStatements", [])]
        used = set().union(*(raw_names(t) for t in texts if isinstance(t, str)))
        for name in sorted(used & set(start_params)):
            raise ApiError(
                400,
                f"task {task.name!r} uses it as raw SQL text (!{{{name}}}), which takes only the value the workflow"
                " declares: a start cannot set it",
                f"params.{name}",
            )


_INSERT_COMMAND = (
    "INSERT INTO command (command_type, workflow_definition_code, workflow_definition_version, command_param,"
    " failure_strategy, workflow_instance_priority, worker_group, executor_id, dry_run, task_depend_type,"
    " warning_type, warning_group_id, schedule_time)"
    " VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING id"
)


def _command_args(row: Any, version: int, body: dict[str, Any], user_id: int | None) -> list[Any]:
    """Arguments 2..12 of _INSERT_COMMAND (type, param and schedule time are the caller's)."""
    return [
        row["code"],
        version,
        FAILURE_STRATEGY_NAMES.index(body.get("failure_strategy", "END")),
        PRIORITY_NAMES.index(body.get("priority", "MEDIUM")),
        body.get("worker_group", "default"),
        user_id,
        1 if body.get("dry_run") else 0,
        SCOPES.index(body.get("scope", "TASK_POST")),
        WARNING_TYPES.index(body.get("warning_type", "NONE")),
        body.get("warning_group_id"),
    ]


async def _task_codes(api: Any, code: int, version: int, names: list[str]) -> list[int]:
    async with api.db.acquire() as conn:
        if not version:
            version = int(await conn.fetchval("SELECT version FROM workflow_definition WHERE code = $1", code))
        spec = await load_spec(conn, code, version)
    by_name = {t.name: t.code for t in spec.tasks.values()}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ApiError(400, f"unknown task {unknown[0]!r} (tasks: {', '.join(sorted(by_name))})", "start_tasks")
    return [by_name[n] for n in names]


async def start(api: Any, call: Call) -> dict[str, Any]:
    marks.mark("api start")
    body = call.body or {}
    row, version, global_params = await _startable(api, call.path_int("code"), body)
    params: dict[str, Any] = {"StartParams": {k: str(v) for k, v in (body.get("params") or {}).items()}}
    now = [(dt.datetime.now(dt.UTC), "params")]
    await _check_params(api, row, version, params["StartParams"], now, global_params)
    await _check_raw(api, row, version, params["StartParams"])
    command_type = CommandType.START_PROCESS
    if body.get("start_tasks"):
        params["StartNodeList"] = await _task_codes(api, row["code"], version, body["start_tasks"])
        command_type = CommandType.START_CURRENT_TASK_PROCESS
    elif "scope" in body:
        raise ApiError(400, "scope needs start_tasks", "scope")
    args = _command_args(row, version, body, call.user_id)
    marks.mark("api insert")
    command_id = await api.db.fetchval(
        _INSERT_COMMAND, command_type, args[0], args[1], json.dumps(params), *args[2:], None
    )
    return {"command_id": command_id, "status": "QUEUED", "workflow_instance_id": None, "message": None}


def _when(value: str, name: str) -> dt.datetime:
    try:
        when = dt.datetime.fromisoformat(value)
    except ValueError:
        raise ApiError(400, f"must be an ISO 8601 time, got {value!r}", name) from None
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


async def backfill(api: Any, call: Call) -> dict[str, Any]:
    """COMPLEMENT_DATA: one command per chain; each chain runs its dates one after another."""
    body = call.body or {}
    row, version, global_params = await _startable(api, call.path_int("code"), body)
    has_range, has_list = "start" in body or "end" in body, "dates" in body
    if has_range == has_list:
        raise ApiError(400, "give either start and end, or dates", "dates" if has_list else "start")
    try:
        if has_list:
            dates = list_dates([_when(v, "dates") for v in body["dates"]])
        else:
            if "start" not in body or "end" not in body:
                raise ApiError(400, "a range needs both start and end", "end" if "start" in body else "start")
            crons = await api.db.fetch(
                "SELECT crontab, timezone_id FROM schedule"
                f" WHERE workflow_definition_code = $1 AND release_state = {int(ReleaseState.ONLINE)}",
                row["code"],
            )
            dates = range_dates(_when(body["start"], "start"), _when(body["end"], "end"), [(c[0], c[1]) for c in crons])
    except BackfillError as exc:
        raise ApiError(400, exc.reason, exc.field) from None
    if not dates:
        raise ApiError(400, "no fire time of the workflow's schedules falls in the range", "start")
    start_params = {k: str(v) for k, v in (body.get("params") or {}).items()}
    # dates are sorted here; a placeholder's date arithmetic is monotonic, so the ends are the extremes
    await _check_params(api, row, version, start_params, [(dates[0], "dates" if has_list else "start"),
                        (dates[-1], "dates" if has_list else "end")], global_params)  # fmt: skip
    await _check_raw(api, row, version, start_params)
    if body.get("reverse"):
        dates.reverse()
    parallel = body.get("run_mode", "SERIAL") == "PARALLEL"
    if not parallel and "parallelism" in body:
        raise ApiError(400, "parallelism needs run_mode PARALLEL", "parallelism")
    chains = chunks(dates, body.get("parallelism") or MAX_PARALLELISM) if parallel else [dates]
    downstream = backfill_dependents.Downstream()
    if body.get("dependent_mode") == "ALL_DEPENDENT":
        downstream = await backfill_dependents.downstream(api.db, row["code"], access.principal_of(call))
        for d, skipped in downstream.allowed:
            if skipped:
                continue
            try:  # what the master could not resolve is refused up front here too
                await _check_params(api, d, 0, {}, [(dates[0], "dates"), (dates[-1], "dates")])
            except ApiError as exc:
                raise ApiError(400, f"downstream workflow {d['name']!r}: {exc}", "dependent_mode") from None
    async with api.db.acquire() as conn, conn.transaction():
        base = _command_args(row, version, body, call.user_id)
        ids = await _queue_backfill(conn, base, dates, chains, start_params, body.get("on_failure", "STOP"))
        dependents = []
        for d, skipped in downstream.allowed:
            entry = {"code": d["code"], "name": d["name"], "project": d["project"], "command_ids": []}
            entry["skipped"] = skipped
            if not skipped:
                args = _command_args(d, 0, body, call.user_id)
                entry["command_ids"] = await _queue_backfill(
                    conn, args, dates, chains, {}, body.get("on_failure", "STOP")
                )
            dependents.append(entry)
    answer: dict[str, Any] = {"command_ids": ids, "dates": len(dates), "chains": len(chains)}
    if body.get("dependent_mode") == "ALL_DEPENDENT":
        answer["dependents"] = dependents
        answer["skipped_not_permitted"] = downstream.not_permitted
    return answer


async def _queue_backfill(
    conn: asyncpg.Connection,
    base: list[Any],
    dates: list[dt.datetime],
    chains: list[list[dt.datetime]],
    start_params: dict[str, str],
    on_failure: str,
) -> list[int]:
    """One workflow's backfill: its dates kept once, one COMPLEMENT_DATA command per chain, each naming
    its first and last index into them."""
    backfill_id = await conn.fetchval(
        "INSERT INTO backfill (workflow_definition_code, dates) VALUES ($1, $2) RETURNING id", base[0], dates
    )
    ids, first = [], 0
    for chain in chains:
        param = {
            "StartParams": start_params,
            "complementOnFailure": on_failure,
            **backfill_param(backfill_id, first, first + len(chain) - 1),
        }
        command = _INSERT_COMMAND, CommandType.COMPLEMENT_DATA, base[0], base[1], json.dumps(param), *base[2:]
        ids.append(int(await conn.fetchval(*command, chain[0])))
        first += len(chain)
    return ids


async def command_status(api: Any, call: Call) -> dict[str, Any]:
    """Where a command is: still QUEUED, STARTED as an instance, or moved to error_command (ERROR)."""
    command_id = call.path_int("id")
    row = await api.db.fetchrow(
        "SELECT 'QUEUED' AS status, NULL::bigint AS instance, NULL AS message FROM command WHERE id = $1"
        " UNION ALL SELECT 'STARTED', id, NULL FROM workflow_instance WHERE command_id = $1"
        " UNION ALL SELECT 'ERROR', NULL, message FROM error_command WHERE id = $1 LIMIT 1",
        command_id,
    )
    if row is None:
        raise not_found(f"command {command_id}")
    return {
        "command_id": command_id,
        "status": row["status"],
        "workflow_instance_id": row["instance"],
        "message": row["message"],
    }


_WF = "{code}"
_EXECUTE = access.execute("workflow", "path.code", uses=(access.WARNING_GROUP,))
ROUTES = [
    Route("POST", f"/api/v1/workflows/{_WF}/start", start, "Start a workflow: queue a START_PROCESS command",
          "workflows", body=_START, body_required=False, response=_COMMAND, status=201,
          rule=_EXECUTE),
    Route("POST", f"/api/v1/workflows/{_WF}/backfill", backfill,
          "Backfill (COMPLEMENT_DATA) over a date range or list, serially or in parallel chains", "workflows",
          body=_BACKFILL, response=_BACKFILLED, status=201, rule=_EXECUTE),
    Route("GET", "/api/v1/commands/{id}", command_status, "Where a command is: queued, started or refused",
          "workflows", response=_COMMAND, rule=access.read("command", "path.id")),
]  # fmt: skip
