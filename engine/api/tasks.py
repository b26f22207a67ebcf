"""Task instances: detail, and the log: paged, searched (bounded per request, go on with ``after``), followed
as server-sent events while the task writes, or whole; read from the worker that ran the task while it runs,
from its archive once it ended (engine/api/tasklogs.py)."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any
from urllib.parse import quote

from aiohttp import web
from sqlalchemy import select

from core import logs
from engine.api import access, rows, tasklogs
from engine.api.live import SSE_HEADERS, frame
from engine.api.routing import ApiError, Call, Param, Route, one
from engine.storage import tables as t
from engine.storage.blobs import BlobError
from rpc.errors import RpcError
from rpc.messages import LogDownload

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
        "waiting": {
            "type": "string",
            "description": "why an attempt not on a worker yet waits: no live worker in its group (instance detail)",
        },
    },
}
#: one attempt in full (GET /api/v1/tasks/{id})
TASK_DETAIL = {
    **TASK_INSTANCE,
    "properties": {
        **TASK_INSTANCE["properties"],
        "pid": {"type": ["integer", "null"]},
        "app_id": {
            "type": ["string", "null"],
            "description": "the external application it started (a Spark or YARN application id), once known",
        },
        "app_link": {"type": ["string", "null"], "description": "that application's web UI, when known"},
        "worker_group": {"type": ["string", "null"]},
        "priority": {"type": "string"},
        "task_version": {"type": "integer"},
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


_HITS = {
    "type": "object",
    "required": ["hits", "next", "done", "total"],
    "properties": {
        "hits": {"type": "array", "items": {"type": "object", "required": ["line", "text"],
                 "properties": {"line": {"type": "integer"}, "text": {"type": "string"}}}},
        "next": {"type": "integer", "description": "line number to go on from (after=next)"},
        "done": {"type": "boolean", "description": "the search reached the end of the log"},
        "total": {"type": "integer", "description": "complete lines in the log when searched"},
    },
}  # fmt: skip


async def _task(api: Any, task_id: int) -> Any:
    return await one(api.db, select(ti).where(ti.c.id == task_id), f"task instance {task_id}")


async def get_task(api: Any, call: Call) -> dict[str, Any]:
    return rows.task_detail(await _task(api, call.path_int("id")))


async def get_log(api: Any, call: Call) -> dict[str, Any]:
    row = await _task(api, call.path_int("id"))
    lines = await tasklogs.read_lines(api, row, call.query["skip"], call.query["limit"], call.query["from_end"])
    return {"lines": lines.lines, "start": lines.start, "total": lines.total, "next": lines.next,
            "complete": lines.complete}  # fmt: skip


async def search_log(api: Any, call: Call) -> dict[str, Any]:
    row = await _task(api, call.path_int("id"))
    needle = call.query["q"]
    if not needle or len(needle) > MAX_NEEDLE:
        raise ApiError(400, f"must be 1 to {MAX_NEEDLE} characters", "query.q")
    found = await tasklogs.search(api, row, needle, call.query["after"], call.query["limit"])
    return {"hits": [{"line": n, "text": text} for n, text in found.hits], "next": found.next, "done": found.done,
            "total": found.total}  # fmt: skip


#: a follow stream ends after this long (the page opens another from where it was, which checks the caller
#: again); polls while idle
FOLLOW_SECONDS = 300.0
#: seconds between checks, while a follow runs, that its caller may still read the log
FOLLOW_RECHECK = 5.0
FOLLOW_POLL = 0.5
WORKER_READ_TIMEOUT = 30.0
MAX_NEEDLE = 200
_PING_EVERY = 15.0


async def follow_log(api: Any, call: Call) -> web.StreamResponse:
    """New lines of a task's log as server-sent events while the task writes: ``lines`` {start, lines, total},
    then ``end`` {next, complete} when the task finished (or the stream's time is up: open it again from
    ``next``); ``error`` {message} when the worker cannot be read."""
    task_id = call.path_int("id")
    tasklogs.worker_source(await _task(api, task_id))  # 404 before the stream starts for an attempt with no log yet
    response = web.StreamResponse(headers=SSE_HEADERS)
    await response.prepare(call.request)
    skip = call.query["skip"]
    started = pinged = checked = time.monotonic()
    try:
        while not api.live.closed:
            if time.monotonic() - checked > FOLLOW_RECHECK:
                if not await api.still_allowed(call):
                    await response.write(frame("error", {"message": "your credentials are no longer valid"}))
                    break
                checked = time.monotonic()
            try:
                page = await tasklogs.read_lines(api, await _task(api, task_id), skip, 1000)
            except ApiError as exc:
                await response.write(frame("error", {"message": exc.message}))
                break
            if page.lines:
                await response.write(frame("lines", {"start": page.start, "lines": page.lines, "total": page.total}))
                skip = page.next
                continue
            if page.complete or time.monotonic() - started > FOLLOW_SECONDS:
                await response.write(frame("end", {"next": skip, "complete": page.complete}))
                break
            if time.monotonic() - pinged > _PING_EVERY:
                await response.write(b": ping\n\n")
                pinged = time.monotonic()
            await asyncio.sleep(FOLLOW_POLL)
    except ConnectionResetError:
        pass  # the page went away
    return response


#: bytes passed from the worker to the client at a time (the API holds no more of a log than this)
DOWNLOAD_CHUNK = 64 * 1024
#: seconds a download may wait for the next chunk from the worker
DOWNLOAD_IDLE_TIMEOUT = 60.0


def attachment(name: str) -> str:
    """A Content-Disposition for a download named ``name`` whatever it holds (RFC 6266): a plain ASCII
    ``filename`` (other characters as ``_``) and the name itself in ``filename*`` (RFC 8187, UTF-8,
    percent-encoded); control characters are dropped from both."""
    printable = "".join(ch for ch in name if ch.isprintable())
    fallback = re.sub(r"[^A-Za-z0-9._-]", "_", printable) or "task.log"
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(printable, safe='')}"


async def download_log(api: Any, call: Call) -> web.StreamResponse:
    """The log streamed through to the client a chunk at a time: from its archive once the attempt ended and
    it was archived, else from the worker."""
    row = await _task(api, call.path_int("id"))
    name = f"{row['name']}-{row['id']}-{row['attempt']}.log"
    out = web.StreamResponse(headers={"Content-Disposition": attachment(name)})
    out.content_type, out.charset = "text/plain", "utf-8"
    archive, why = await tasklogs.archive_of(api, row)
    if archive is not None:
        return await _download_archive(api, call, row, archive, out)
    host, path = tasklogs.worker_source(row)
    try:
        async with api.rpc.stream(host, LogDownload(path), idle_timeout=DOWNLOAD_IDLE_TIMEOUT) as resp:
            if resp.content_length is not None:
                out.content_length = resp.content_length  # a cut-off transfer is seen as one by the client
            await out.prepare(call.request)
            async for chunk in resp.content.iter_chunked(DOWNLOAD_CHUNK):
                await out.write(chunk)
    except RpcError as exc:
        if not out.prepared:
            raise tasklogs.worker_error(row, host, exc, why) from exc
        # the answer has begun: its status cannot change any more; the client sees a short body
        log.warning("log download cut off", task_instance_id=row["id"], worker=host, error=str(exc))
        return out
    await out.write_eof()
    return out


async def _download_archive(
    api: Any, call: Call, row: Any, archive: tasklogs.Archive, out: web.StreamResponse
) -> web.StreamResponse:
    if not archive.truncated:  # (a truncated one's notice line is not counted in log_size: sent chunked)
        out.content_length = archive.log_size  # a cut-off transfer is seen as one by the client
    try:
        async for chunk in api.archived_logs.stream(archive.key):
            if not out.prepared:
                await out.prepare(call.request)
            await out.write(chunk)
    except BlobError as exc:
        if not out.prepared:
            raise ApiError(502, f"the archived log of task instance {row['id']} could not be read: {exc}") from exc
        log.warning("archived log download cut off", task_instance_id=row["id"], error=str(exc))
        return out
    if not out.prepared:
        await out.prepare(call.request)
    await out.write_eof()
    return out


ROUTES = [
    Route("GET", "/api/v1/tasks/{id}", get_task, "A task instance (one attempt)", "tasks", response=TASK_DETAIL,
          rule=access.read("task", "path.id")),
    Route("GET", "/api/v1/tasks/{id}/log", get_log, "Lines of a task's log, paged (tail it by following next)",
          "tasks", query=(Param("skip", int, "lines to skip", 0, minimum=0),
                          Param("limit", int, "lines to return", 1000, minimum=1, maximum=10000),
                          Param("from_end", bool, "the last `limit` lines (open a log at its end)", False)),
          response=_LINES, rule=access.read("task", "path.id")),
    Route("GET", "/api/v1/tasks/{id}/log/search", search_log,
          "Lines of a task's log containing a text (case-insensitive), searched on the worker while the task runs,"
          " on its archive once it ended; a long log is searched in steps: go on from next until done", "tasks",
          query=(Param("q", str, "the text to find (1 to 200 characters)"),
                 Param("after", int, "line number (from 0) to search from", 0, minimum=0),
                 Param("limit", int, "matches to return at most", 100, minimum=1, maximum=1000)),
          response=_HITS, rule=access.read("task", "path.id")),
    Route("GET", "/api/v1/tasks/{id}/log/follow", follow_log,
          "New lines of a task's log as server-sent events while it runs (lines, then end)", "tasks",
          query=(Param("skip", int, "line number (from 0) to start from", 0, minimum=0),),
          response={"type": "string", "description": "text/event-stream: lines, end, error events"},
          produces="text/event-stream", rule=access.read("task", "path.id")),
    Route("GET", "/api/v1/tasks/{id}/log/download", download_log, "The whole log file", "tasks",
          response={"type": "string"}, produces="text/plain", rule=access.read("task", "path.id")),
]  # fmt: skip
