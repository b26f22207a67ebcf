"""Task instances: detail, and the log, read from the worker that ran the task (paged or whole)."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from sqlalchemy import select

from engine import logs
from engine.api import access, rows
from engine.api.routing import ApiError, Call, Param, Route, one
from engine.states import TaskState
from engine.storage import tables as t
from rpc.errors import BadRequest, RpcError
from rpc.messages import LogDownload, LogLines, LogRange

log = logs.get(__name__)

ti = t.task_instance
TASK_INSTANCE = {
    "type": "object",
    "required": ["id", "name", "type", "task_code", "workflow_instance_id", "state", "finished", "attempt", "current"],
    "properties": {
        "id": {"type": ["integer", "null"], "description": "null for a disabled task (it has no instance)"},
        "name": {"type": "string"},
        "type": {"type": "string"},
        "task_code": {"type": "integer"},
        "workflow_instance_id": {"type": "integer"},
        "state": {"type": "string", "description": "a task state name, or DISABLED"},
        "finished": {"type": "boolean"},
        "attempt": {"type": "integer"},
        "current": {"type": "boolean", "description": "the latest attempt (older ones: all_attempts=true)"},
        "retry_times": {"type": "integer"},
        "host": {"type": ["string", "null"]},
        "submit_time": {"type": ["string", "null"], "format": "date-time"},
        "start_time": {"type": ["string", "null"], "format": "date-time"},
        "end_time": {"type": ["string", "null"], "format": "date-time"},
        "queued_ms": {"type": ["integer", "null"]},
        "duration_ms": {"type": ["integer", "null"]},
        "exit_code": {"type": ["integer", "null"]},
        "sub_instance_id": {"type": "integer", "description": "a SUB_PROCESS task's child instance (instance detail)"},
    },
}
_LINES = {
    "type": "object",
    "required": ["lines", "next", "complete", "start", "total"],
    "properties": {
        "lines": {"type": "array", "items": {"type": "string"}},
        "start": {"type": "integer", "description": "line number (from 0) of the first line returned"},
        "total": {"type": "integer", "description": "complete lines in the log when it was read"},
        "next": {"type": "integer", "description": "skip value of the next page"},
        "complete": {"type": "boolean", "description": "the task finished writing: no more lines will come"},
    },
}


async def _task(api: Any, task_id: int) -> Any:
    return await one(api.db, select(ti).where(ti.c.id == task_id), f"task instance {task_id}")


async def get_task(api: Any, call: Call) -> dict[str, Any]:
    return rows.task_detail(await _task(api, call.path_int("id")))


def _log_source(row: Any) -> tuple[str, str]:
    if not row["host"] or not row["log_path"]:
        raise ApiError(404, f"task instance {row['id']} has no log yet (state {TaskState(row['state']).name})")
    return row["host"], row["log_path"]


def _worker_error(host: str, exc: RpcError) -> ApiError:
    if isinstance(exc, BadRequest) and exc.status == 404:
        return ApiError(404, f"the log is gone from worker {host}")
    return ApiError(502, f"worker {host} that ran the task did not answer: {exc}")


async def get_log(api: Any, call: Call) -> dict[str, Any]:
    row = await _task(api, call.path_int("id"))
    host, path = _log_source(row)
    try:
        ask = LogRange(path, call.query["skip"], call.query["limit"], call.query["from_end"])
        lines = await api.rpc.call(host, ask, LogLines)
    except RpcError as exc:
        raise _worker_error(host, exc) from exc
    # the worker answers complete=True for any file nobody writes; a task still active has more to come
    complete = lines.complete and TaskState(row["state"]).finished
    return {"lines": lines.lines, "start": lines.start, "total": lines.total, "next": lines.next, "complete": complete}


#: bytes passed from the worker to the client at a time (the API holds no more of a log than this)
DOWNLOAD_CHUNK = 64 * 1024
#: seconds a download may wait for the next chunk from the worker
DOWNLOAD_IDLE_TIMEOUT = 60.0


async def download_log(api: Any, call: Call) -> web.StreamResponse:
    """The log file streamed from the worker through to the client, a chunk at a time."""
    row = await _task(api, call.path_int("id"))
    host, path = _log_source(row)
    name = f"{row['name']}-{row['id']}-{row['attempt']}.log"
    out = web.StreamResponse(headers={"Content-Disposition": f'attachment; filename="{name}"'})
    out.content_type, out.charset = "text/plain", "utf-8"
    try:
        async with api.rpc.stream(host, LogDownload(path), idle_timeout=DOWNLOAD_IDLE_TIMEOUT) as resp:
            if resp.content_length is not None:
                out.content_length = resp.content_length  # a cut-off transfer is seen as one by the client
            await out.prepare(call.request)
            async for chunk in resp.content.iter_chunked(DOWNLOAD_CHUNK):
                await out.write(chunk)
    except RpcError as exc:
        if not out.prepared:
            raise _worker_error(host, exc) from exc
        # the answer has begun: its status cannot change any more; the client sees a short body
        log.warning("log download cut off", task_instance_id=row["id"], worker=host, error=str(exc))
        return out
    await out.write_eof()
    return out


ROUTES = [
    Route("GET", "/api/v1/tasks/{id}", get_task, "A task instance (one attempt)", "tasks", response=TASK_INSTANCE,
          rule=access.read("task", "path.id")),
    Route("GET", "/api/v1/tasks/{id}/log", get_log, "Lines of a task's log, paged (tail it by following next)",
          "tasks", query=(Param("skip", int, "lines to skip", 0, minimum=0),
                          Param("limit", int, "lines to return", 1000, minimum=1, maximum=10000),
                          Param("from_end", bool, "the last `limit` lines (open a log at its end)", False)),
          response=_LINES, rule=access.read("task", "path.id")),
    Route("GET", "/api/v1/tasks/{id}/log/download", download_log, "The whole log file", "tasks",
          response={"type": "string"}, produces="text/plain", rule=access.read("task", "path.id")),
]  # fmt: skip
