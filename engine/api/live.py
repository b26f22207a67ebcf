"""Live updates for browsers: ``GET /api/v1/events``, one server-sent-events stream per page.

Source: PostgreSQL triggers NOTIFY ``porpoise_state`` for every new workflow / task instance row and every
state change (schema.sql). One :class:`LiveHub` per API server holds the single LISTEN connection, gathers
notifications for ``events_batch_seconds`` and appends each batch, numbered, to a bounded history. Every
stream reads the same history from its own position, so a slow client costs nothing but falls behind;
there is no queue per client.

Wire format (``text/event-stream``), ids are ``<boot>.<seq>`` so a resume against another API server, or
this one after a restart, is recognised::

    id: 3f2a.0      event: hello      data: {}            first event: load your data now
    id: 3f2a.17     event: states     data: [{"kind": "task", "id": 5, "instance": 2, "state": "SUCCESS"}, ...]
    event: reset    data: {"reason": ...}                 changes were lost: reload everything
    event: signed-out data: {"reason": ...}               last event: the credentials were revoked or expired
    : ping                                                keep-alive every events_heartbeat_seconds

A stream sends instance changes, and task changes of the instance named by ``?instance=``. Before each batch
and each keep-alive it checks again that its credentials are valid (ApiServer.still_allowed) and ends with
``signed-out`` when they are not. A client resumes
with ``Last-Event-ID``; when that batch is no longer in the history (or the listener lost its connection,
which may drop notifications) the stream sends ``reset`` instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
from collections import deque
from dataclasses import dataclass
from typing import Any

import asyncpg
from aiohttp import web

from core import logs
from engine.api import access
from engine.api.routing import ApiError, Call, Param, Route
from engine.states import TaskState, WorkflowState
from engine.storage.failures import DB_FAILURES

log = logs.get(__name__)

CHANNEL = "porpoise_state"


@dataclass(frozen=True)
class Change:
    kind: str  # "instance" or "task"
    id: int
    state: str
    instance: int  # the workflow instance (= id for an instance change)

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "id": self.id, "state": self.state}
        if self.kind == "task":
            out["instance"] = self.instance
        return out


def parse(payload: str) -> Change | None:
    """A notification's payload -> Change; None (logged) for anything malformed."""
    parts = payload.split(",")
    try:
        if parts[0] == "w" and len(parts) == 3:
            wid = int(parts[1])
            return Change("instance", wid, WorkflowState(int(parts[2])).name, wid)
        if parts[0] == "t" and len(parts) == 4:
            return Change("task", int(parts[1]), TaskState(int(parts[3])).name, int(parts[2]))
    except ValueError:
        pass
    log.warning("ignored malformed state notification", payload=payload[:100])
    return None


class LiveHub:
    """The API server's one LISTEN connection and the numbered history of change batches."""

    def __init__(self, dsn: str, batch_seconds: float, heartbeat_seconds: float, history: int) -> None:
        self.dsn = dsn
        self.batch_seconds = batch_seconds
        self.heartbeat_seconds = heartbeat_seconds
        #: random per process: ids from another server or an earlier run are not resumed
        self.boot = secrets.token_hex(4)
        #: number of the newest batch (0: none yet)
        self.seq = 0
        #: (seq, changes or None for a reset) for the newest ``history`` batches
        self._history: deque[tuple[int, list[Change] | None]] = deque(maxlen=history)
        self._pending: dict[tuple[str, int], Change] = {}
        self._arrived = asyncio.Event()
        self._published = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.closed = False

    # -- the listener ------------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="api-live-listener")

    async def close(self) -> None:
        self.closed = True
        self._wake_streams()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def _on_notify(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        change = parse(payload)
        if change is not None:
            self._pending[(change.kind, change.id)] = change  # the latest state of a row wins within a batch
            self._arrived.set()

    async def _run(self) -> None:
        delay = 0.2
        first = True
        while True:
            conn: asyncpg.Connection | None = None
            try:
                conn = await asyncpg.connect(self.dsn, timeout=5)
                await conn.add_listener(CHANNEL, self._on_notify)
                if not first:
                    self._publish(None)  # notifications may have been missed while disconnected
                first, delay = False, 0.2
                log.info("live updates listening", channel=CHANNEL)
                await self._pump(conn)
            except DB_FAILURES as exc:
                log.warning("live updates: database connection lost", error=str(exc), retry_in=delay)
            finally:
                if conn is not None:
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(conn.close(), 5)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    async def _pump(self, conn: asyncpg.Connection) -> None:
        """Publish a batch every ``batch_seconds`` while changes arrive; return when the connection drops."""
        while not conn.is_closed():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), self.heartbeat_seconds)
            if self._arrived.is_set():
                await asyncio.sleep(self.batch_seconds)  # gather the rest of the burst
                self._arrived.clear()
                batch, self._pending = list(self._pending.values()), {}
                self._publish(batch)
            else:
                await asyncio.wait_for(conn.fetchval("SELECT 1"), 5)  # notices a dead connection

    def _publish(self, batch: list[Change] | None) -> None:
        self.seq += 1
        self._history.append((self.seq, batch))
        self._wake_streams()

    def _wake_streams(self) -> None:
        published, self._published = self._published, asyncio.Event()
        published.set()

    # -- what streams read -------------------------------------------------------------------------

    def event_id(self, seq: int) -> str:
        return f"{self.boot}.{seq}"

    def resume_point(self, last_event_id: str) -> int | None:
        """The seq after which a stream resuming from ``last_event_id`` continues; None: it cannot resume."""
        boot, _, raw = last_event_id.partition(".")
        if boot != self.boot or not raw.isdigit():
            return None
        seq = int(raw)
        oldest = self._history[0][0] if self._history else self.seq + 1
        if seq > self.seq or seq < oldest - 1:
            return None
        return seq

    def since(self, seq: int) -> list[tuple[int, list[Change] | None]]:
        """Batches newer than ``seq`` (the caller checked it can resume from there)."""
        return [(s, b) for s, b in self._history if s > seq]

    def behind(self, seq: int) -> bool:
        """Whether batches after ``seq`` already left the history (the stream was too slow)."""
        return bool(self._history) and self._history[0][0] > seq + 1

    async def wait(self, seq: int, timeout: float) -> None:
        """Until a batch newer than ``seq`` exists, the hub closes, or ``timeout`` passes."""
        if self.seq > seq or self.closed:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._published.wait(), timeout)


#: the headers of a server-sent-events answer (no proxy buffering, no caching)
SSE_HEADERS = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache, no-transform",
    "X-Accel-Buffering": "no",
}


def frame(event: str, data: Any, event_id: str | None = None) -> bytes:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


async def _visible(api: Any, who: access.Principal, ids: list[int]) -> set[int]:
    """The instances among ``ids`` whose project the caller may see (all of them for an admin)."""
    if who.is_admin or not ids:
        return set(ids)
    rows = await api.db.fetch(
        f"SELECT id FROM workflow_instance WHERE id = ANY($1) AND project_code IN {access.visible_projects_sql(2)}",
        ids,
        who.user_id,
    )
    return {int(r["id"]) for r in rows}


async def events(api: Any, call: Call) -> web.StreamResponse:
    hub: LiveHub = api.live
    request = call.request
    instance = call.query["instance"]
    who = access.principal_of(call)
    if instance is not None and instance not in await _visible(api, who, [instance]):
        raise ApiError(404, f"workflow instance {instance} does not exist", "query.instance")
    response = web.StreamResponse(headers=SSE_HEADERS)
    await response.prepare(request)
    last = request.headers.get("Last-Event-ID", "")
    seq = hub.resume_point(last) if last else None
    if seq is None:
        seq = hub.seq
        if last:
            await response.write(frame("reset", {"reason": "cannot resume from that event id"}))
        await response.write(frame("hello", {}, hub.event_id(seq)))
    try:
        while not hub.closed:
            await hub.wait(seq, hub.heartbeat_seconds)
            if hub.closed:
                break
            if not await api.still_allowed(call):  # revoked, expired, signed out: nothing more is sent
                await response.write(frame("signed-out", {"reason": "your credentials are no longer valid"}))
                break
            who = access.principal_of(call)
            if hub.seq == seq:
                await response.write(b": ping\n\n")
                continue
            if hub.behind(seq):
                seq = hub.seq
                await response.write(frame("reset", {"reason": "fell behind"}, hub.event_id(seq)))
                continue
            for number, batch in hub.since(seq):
                seq = number
                if batch is None:
                    await response.write(frame("reset", {"reason": "updates were interrupted"}, hub.event_id(seq)))
                    continue
                mine = [c for c in batch if c.kind == "instance" or c.instance == instance]
                # the followed instance's task changes too: a grant revoked meanwhile ends them
                seen = await _visible(api, who, sorted({c.instance for c in mine}))
                wanted = [c.as_json() for c in mine if c.instance in seen]
                if wanted:
                    await response.write(frame("states", wanted, hub.event_id(seq)))
    except ConnectionResetError:
        pass  # the page went away
    return response


ROUTES = [
    Route("GET", "/api/v1/events", events,
          "Live state changes as server-sent events (one stream per page; resume with Last-Event-ID)", "events",
          query=(Param("instance", int, "also send the task changes of this workflow instance"),),
          response={"type": "string", "description": "text/event-stream: hello, states, reset events"},
          produces="text/event-stream", rule=access.SIGNED_IN),
]  # fmt: skip
