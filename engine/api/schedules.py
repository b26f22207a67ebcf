"""Cron schedules of workflows: create, update, delete, online / offline, and the next fire times.

Crontabs are standard 5-field cron or DolphinScheduler's Quartz style (engine/scheduling/cron.py); a
bad expression, an unknown time zone or an end before the start is a 400 naming the field. A schedule
goes online only while its workflow is online; online means "fire from now on" (never before its
``start_time``). A crontab that never fires between the start and the end, or whose next fire time
costs more than the bounded work of one fire (engine/scheduling/cron.py), is refused at save time.
Fire times are computed in a thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import asyncpg
import jsonschema

from core.schema_problem import schema_problem
from engine.api import access
from engine.api.routing import PAGE, ApiError, Call, Param, Route, not_found, page, quoted, select_page
from engine.api.rows import FAILURE_STRATEGY_NAMES, PRIORITY_NAMES, RELEASE_NAMES
from engine.api.tenants import check_tenant
from engine.scheduling.cron import CronError, Meter, next_times, parse, zone
from engine.scheduling.scheduler import FIRE_ALL, SKIP, set_online
from engine.workflows.model import name_error

WARNING_TYPES = ("NONE", "SUCCESS", "FAILURE", "ALL")
_FAR = dt.datetime(9999, 12, 31, tzinfo=dt.UTC)

_FIELDS = {
    "crontab": {"type": "string", "minLength": 1, "maxLength": 255,
                "description": "5-field cron, or Quartz style with seconds (`0 0 2 * * ?`)"},
    "timezone": {"type": "string", "minLength": 1, "maxLength": 64, "description": "IANA zone, default UTC"},
    "start_time": {"type": "string", "format": "date-time", "description": "first possible fire (default now)"},
    "end_time": {"type": "string", "format": "date-time", "description": "last possible fire (default never)"},
    "failure_strategy": {"enum": list(FAILURE_STRATEGY_NAMES)},
    "priority": {"enum": list(PRIORITY_NAMES)},
    "worker_group": {"type": "string", "minLength": 1, "maxLength": 64},
    "misfire_policy": {"enum": [FIRE_ALL, SKIP],
                       "description": "after downtime: fire each missed time (bounded) or skip to now"},
    "warning_type": {"enum": list(WARNING_TYPES)},
    "warning_group_id": {"type": ["integer", "null"]},
    "online": {"type": "boolean", "description": "put it online at once"},
}  # fmt: skip
_CREATE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["workflow_code", "crontab"],
    "properties": {"workflow_code": {"type": "integer"}, **_FIELDS},
}
_CREATE_VALIDATOR = jsonschema.Draft202012Validator(_CREATE)
_UPDATE = {"type": "object", "additionalProperties": False, "properties": _FIELDS}
_PREVIEW = {
    "type": "object",
    "additionalProperties": False,
    "required": ["crontab"],
    "properties": {
        "crontab": _FIELDS["crontab"],
        "timezone": _FIELDS["timezone"],
        "count": {"type": "integer", "minimum": 1, "maximum": 100},
    },
}
_SCHEDULE = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "workflow_code": {"type": "integer"},
        "crontab": {"type": "string"},
        "timezone": {"type": "string"},
        "release_state": {"enum": list(RELEASE_NAMES)},
        "next_fire_times": {"type": "array", "items": {"type": "string", "format": "date-time"}},
        "work": {"type": "integer", "description": "preview: units of work the fire times cost (bounded per fire)"},
    },
}


def _time(value: str | None, name: str) -> dt.datetime | None:
    if value is None:
        return None
    try:
        when = dt.datetime.fromisoformat(value)
    except ValueError:
        raise ApiError(400, f"must be an ISO 8601 time, got {quoted(value)}", name) from None
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def _check_cron(crontab: str, tz: str) -> None:
    try:
        parse(crontab)
    except CronError as exc:
        raise ApiError(400, str(exc), "crontab") from None
    try:
        zone(tz)
    except CronError as exc:
        raise ApiError(400, str(exc), "timezone") from None


def _check_fires(crontab: str, tz: str, start: dt.datetime, end: dt.datetime) -> None:
    """A schedule must yield its next fire time within the bounded work of one fire (a few ms)."""
    after = max(dt.datetime.now(dt.UTC), start - dt.timedelta(microseconds=1))
    try:
        first = next_times(parse(crontab), tz, after, 1, end)
    except CronError as exc:
        raise ApiError(400, str(exc), "crontab") from None
    if not first:
        raise ApiError(400, f"cron {crontab!r} has no fire time between start_time and end_time", "crontab")


async def _json(row: Any, count: int = 5) -> dict[str, Any]:
    return await asyncio.to_thread(schedule_json, row, count)


def schedule_json(row: Any, count: int = 5) -> dict[str, Any]:
    now = dt.datetime.now(dt.UTC)
    after = max(now, row["start_time"] - dt.timedelta(microseconds=1))
    try:
        upcoming = next_times(parse(row["crontab"]), row["timezone_id"], after, count, row["end_time"])
    except CronError:
        upcoming = []
    return {
        "id": row["id"],
        "workflow_code": row["workflow_definition_code"],
        "crontab": row["crontab"],
        "timezone": row["timezone_id"],
        "start_time": row["start_time"],
        "end_time": None if row["end_time"] >= _FAR else row["end_time"],
        "failure_strategy": FAILURE_STRATEGY_NAMES[row["failure_strategy"]],
        "priority": PRIORITY_NAMES[row["workflow_instance_priority"]],
        "worker_group": row["worker_group"],
        "misfire_policy": row["misfire_policy"],
        "warning_type": WARNING_TYPES[row["warning_type"]],
        "warning_group_id": row["warning_group_id"],
        "release_state": RELEASE_NAMES[row["release_state"]],
        "fired_until": row["fired_until"],
        "next_fire_times": upcoming,
    }


async def _row(db: asyncpg.Pool | asyncpg.Connection, schedule_id: int, lock: bool = False) -> Any:
    row = await db.fetchrow(
        "SELECT * FROM schedule WHERE id = $1" + (" FOR UPDATE" if lock else ""),
        schedule_id,
    )
    if row is None:
        raise not_found(f"schedule {schedule_id}")
    return row


async def _workflow_online(conn: asyncpg.Connection, code: int) -> None:
    row = await conn.fetchrow(
        "SELECT d.name, d.release_state, d.tenant_code, p.name AS project FROM workflow_definition d"
        " JOIN project p ON p.code = d.project_code WHERE d.code = $1",
        code,
    )
    if row is None:
        raise ApiError(404, f"workflow {code} does not exist", "workflow_code")
    if row["release_state"] != 1:
        raise ApiError(409, f"workflow {row['name']!r} is offline; put it online before its schedule")
    too_long = name_error(row["name"])
    if too_long:  # saved before names were bounded: no instance name can hold it
        raise ApiError(400, f"the workflow's name: {too_long}; save it under a shorter name", "workflow_code")
    await check_tenant(conn, row["tenant_code"], row["project"])  # a schedule going online starts runs


def _values(body: dict[str, Any], current: Any = None) -> dict[str, Any]:
    def pick(key: str, column: str, default: Any) -> Any:
        return body[key] if key in body else (current[column] if current is not None else default)

    crontab = pick("crontab", "crontab", None)
    tz = pick("timezone", "timezone_id", "UTC")
    _check_cron(crontab, tz)
    start = _time(body.get("start_time"), "start_time") or (current["start_time"] if current else None)
    start = start or dt.datetime.now(dt.UTC)
    if "end_time" in body:
        end = _time(body["end_time"], "end_time") or _FAR
    else:
        end = current["end_time"] if current is not None else _FAR
    if end <= start:
        raise ApiError(400, "must be after start_time", "end_time")
    _check_fires(crontab, tz, start, end)
    values = {
        "crontab": crontab,
        "timezone_id": tz,
        "start_time": start,
        "end_time": end,
        "misfire_policy": pick("misfire_policy", "misfire_policy", FIRE_ALL),
        "worker_group": pick("worker_group", "worker_group", "default"),
        "warning_group_id": pick("warning_group_id", "warning_group_id", None),
    }
    for key, column, names, default in (
        ("failure_strategy", "failure_strategy", FAILURE_STRATEGY_NAMES, "END"),
        ("priority", "workflow_instance_priority", PRIORITY_NAMES, "MEDIUM"),
        ("warning_type", "warning_type", WARNING_TYPES, "NONE"),
    ):
        if key in body:
            values[column] = names.index(body[key])
        elif current is not None:
            values[column] = current[column]
        else:
            values[column] = names.index(default)
    return values


async def insert(conn: asyncpg.Connection, code: int, values: dict[str, Any], user_id: int | None) -> int:
    """Insert an offline schedule of workflow ``code`` from checked ``values`` (:func:`checked`); its id."""
    cols = ["workflow_definition_code", "user_id", *values]
    args = [code, user_id, *values.values()]
    marks = ", ".join(f"${i}" for i in range(1, len(args) + 1))
    return int(await conn.fetchval(f"INSERT INTO schedule ({', '.join(cols)}) VALUES ({marks}) RETURNING id", *args))


def checked(body: dict[str, Any]) -> dict[str, Any]:
    """The column values of a new schedule's body (the fields of POST /schedules); ApiError names a bad one."""
    problem = schema_problem(_CREATE_VALIDATOR, {**body, "workflow_code": 0})
    if problem is not None:
        raise ApiError(400, problem[1], problem[0])
    return _values(body)


async def create(api: Any, call: Call) -> dict[str, Any]:
    body = call.body
    values = _values(body)
    async with api.db.acquire() as conn, conn.transaction():
        code = body["workflow_code"]
        if body.get("online"):
            await _workflow_online(conn, code)
        elif not await conn.fetchval("SELECT 1 FROM workflow_definition WHERE code = $1", code):
            raise ApiError(404, f"workflow {code} does not exist", "workflow_code")
        sid = await insert(conn, code, values, call.user_id)
        if body.get("online"):
            await set_online(conn, sid, True)
        row = await _row(conn, sid)
    return await _json(row)


async def update(api: Any, call: Call) -> dict[str, Any]:
    sid = call.path_int("id")
    async with api.db.acquire() as conn, conn.transaction():
        current = await _row(conn, sid, lock=True)
        values = _values(call.body, current)
        sets = ", ".join(f"{c} = ${i}" for i, c in enumerate(values, start=2))
        await conn.execute(f"UPDATE schedule SET {sets}, update_time = now() WHERE id = $1", sid, *values.values())
        if "online" in call.body:
            if call.body["online"]:
                await _workflow_online(conn, current["workflow_definition_code"])
            await set_online(conn, sid, bool(call.body["online"]))
        row = await _row(conn, sid)
    return await _json(row)


async def get(api: Any, call: Call) -> dict[str, Any]:
    return await _json(await _row(api.db, call.path_int("id")), call.query["count"])


async def list_schedules(api: Any, call: Call) -> dict[str, Any]:
    q = call.query
    release = RELEASE_NAMES.index(q["release_state"]) if q["release_state"] else None
    projects = access.project_filter(call, "project_code")
    visible = projects and (
        lambda n: f"workflow_definition_code IN (SELECT code FROM workflow_definition WHERE {projects(n)})"
    )
    equal = {"workflow_definition_code": q["workflow"] or None, "release_state": release}
    rows, total = await select_page(api.db, call, "schedule", equal, "id", visible)
    items = await asyncio.to_thread(lambda: [schedule_json(r, 1) for r in rows])
    return page(items, total, call)


async def delete(api: Any, call: Call) -> dict[str, Any]:
    sid = call.path_int("id")
    async with api.db.acquire() as conn, conn.transaction():
        row = await _row(conn, sid, lock=True)
        if row["release_state"] == 1:
            raise ApiError(409, f"schedule {sid} is online; take it offline first")
        await conn.execute("DELETE FROM schedule WHERE id = $1", sid)
    return {"deleted": sid}


async def _release(api: Any, call: Call, online: bool) -> dict[str, Any]:
    sid = call.path_int("id")
    async with api.db.acquire() as conn, conn.transaction():
        row = await _row(conn, sid, lock=True)
        if online:
            await _workflow_online(conn, row["workflow_definition_code"])
        await set_online(conn, sid, online)
        row = await _row(conn, sid)
    return await _json(row)


async def online(api: Any, call: Call) -> dict[str, Any]:
    return await _release(api, call, True)


async def offline(api: Any, call: Call) -> dict[str, Any]:
    return await _release(api, call, False)


async def preview(api: Any, call: Call) -> dict[str, Any]:
    body = call.body
    tz = body.get("timezone", "UTC")
    _check_cron(body["crontab"], tz)
    meter = Meter()
    try:
        times = await asyncio.to_thread(
            next_times, parse(body["crontab"]), tz, dt.datetime.now(dt.UTC), body.get("count", 5), None, meter
        )
    except CronError as exc:
        raise ApiError(400, str(exc), "crontab") from None
    return {"crontab": body["crontab"], "timezone": tz, "next_fire_times": times, "work": meter.total}


_COUNT = Param("count", int, "how many next fire times to show", 5, minimum=1, maximum=100)
ROUTES = [
    Route("GET", "/api/v1/schedules", list_schedules, "List cron schedules", "schedules",
          query=(Param("workflow", int, "workflow definition code"),
                 Param("release_state", str, "ONLINE or OFFLINE", choices=RELEASE_NAMES), *PAGE),
          response=_SCHEDULE, rule=access.SIGNED_IN),
    Route("POST", "/api/v1/schedules", create, "Create a cron schedule for a workflow", "schedules",
          body=_CREATE, response=_SCHEDULE, status=201,
          rule=access.write("workflow", "body.workflow_code", uses=(access.WARNING_GROUP,))),
    Route("POST", "/api/v1/schedules/preview", preview, "The next fire times of a crontab", "schedules",
          body=_PREVIEW, response=_SCHEDULE, rule=access.SIGNED_IN),
    Route("GET", "/api/v1/schedules/{id}", get, "A schedule with its next fire times", "schedules",
          query=(_COUNT,), response=_SCHEDULE, rule=access.read("schedule", "path.id")),
    Route("PUT", "/api/v1/schedules/{id}", update, "Change a schedule (fields left out stay)", "schedules",
          body=_UPDATE, response=_SCHEDULE, rule=access.write("schedule", "path.id", uses=(access.WARNING_GROUP,))),
    Route("DELETE", "/api/v1/schedules/{id}", delete, "Delete an offline schedule", "schedules",
          response={"type": "object", "properties": {"deleted": {"type": "integer"}}},
          rule=access.write("schedule", "path.id")),
    Route("POST", "/api/v1/schedules/{id}/online", online, "Fire from now on", "schedules", response=_SCHEDULE,
          rule=access.write("schedule", "path.id")),
    Route("POST", "/api/v1/schedules/{id}/offline", offline, "Stop firing", "schedules", response=_SCHEDULE,
          rule=access.write("schedule", "path.id")),
]  # fmt: skip
