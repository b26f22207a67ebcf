"""Live updates (GET /api/v1/events) and the web UI's files, against real api + master + worker processes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from tests import tls
from tests.conftest import ApiCluster
from tests.helpers import eventually

pytestmark = pytest.mark.slow


class Stream:
    """A server-sent-events reader: ``(event, id, data)`` tuples, comments skipped."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.response = response
        self.seen: list[tuple[str, str | None, Any]] = []

    async def next(self, timeout: float = 30) -> tuple[str, str | None, Any]:
        event, event_id, data = "message", None, ""
        async with asyncio.timeout(timeout):
            while True:
                raw = await self.response.content.readline()
                if not raw:
                    raise AssertionError("the stream ended")
                line = raw.decode().rstrip("\n")
                if line == "":
                    if data:
                        item = (event, event_id, json.loads(data))
                        self.seen.append(item)
                        return item
                    continue
                if line.startswith(":"):
                    continue
                name, _, value = line.partition(": ")
                if name == "event":
                    event = value
                elif name == "id":
                    event_id = value
                elif name == "data":
                    data += value

    async def until(self, predicate: Any, timeout: float = 60) -> tuple[str, str | None, Any]:
        async with asyncio.timeout(timeout):
            while True:
                item = await self.next(timeout)
                if predicate(item):
                    return item


@contextlib.asynccontextmanager
async def open_stream(
    session: aiohttp.ClientSession, c: ApiCluster, query: str = "", last_id: str | None = None
) -> AsyncIterator[Stream]:
    headers = {"Authorization": f"Bearer {c.token}"}
    if last_id is not None:
        headers["Last-Event-ID"] = last_id
    async with session.get(f"{c.url}/api/v1/events{query}", headers=headers) as response:
        assert response.status == 200, await response.text()
        assert response.headers["Content-Type"].startswith("text/event-stream")
        yield Stream(response)


def _changes(stream: Stream, kind: str, ident: int) -> list[str]:
    return [ch["state"] for ev, _, data in stream.seen if ev == "states" for ch in data if ch["kind"] == kind
            and (ch["id"] if kind == "instance" else ch["instance"]) == ident]  # fmt: skip


async def test_stream_pushes_state_changes_and_resumes(api_cluster: ApiCluster) -> None:
    c = api_cluster
    client = c.client()
    name = f"live_{uuid.uuid4().hex[:8]}"
    doc = {
        "name": name,
        "project": "live-tests",
        "tasks": [
            {"name": "a", "type": "SHELL", "params": {"rawScript": "echo a"}},
            {"name": "b", "type": "SHELL", "params": {"rawScript": "echo b"}, "upstream": ["a"]},
        ],
    }
    timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
    async with aiohttp.ClientSession(timeout=timeout, connector=tls.connector()) as session:
        async with open_stream(session, c) as stream:
            event, hello_id, _ = await stream.next()
            assert event == "hello" and hello_id
            code = (await asyncio.to_thread(client.request, "POST", "/api/v1/workflows", doc, {"release": True}))[
                "code"
            ]
            command = await asyncio.to_thread(client.post, f"/api/v1/workflows/{code}/start", {})

            async def instance_id() -> int | None:
                status = await asyncio.to_thread(client.get, f"/api/v1/commands/{command['command_id']}")
                return status["workflow_instance_id"]  # type: ignore[no-any-return]

            wid = await eventually(instance_id, 30, "the command became an instance")
            await stream.until(lambda item: item[0] == "states" and "SUCCESS" in _changes(stream, "instance", wid))
            states = _changes(stream, "instance", wid)
            # a batch carries a row's latest state: on a slow machine RUNNING_EXECUTION may be folded in
            assert states[-1] == "SUCCESS" and set(states) <= {"SUBMITTED_SUCCESS", "RUNNING_EXECUTION", "SUCCESS"}
            assert _changes(stream, "task", wid) == [], "task changes only go to streams that ask for the instance"

        # resume from the first stream's hello: the history replays, with this instance's task changes
        async with open_stream(session, c, f"?instance={wid}", last_id=hello_id) as resumed:
            await resumed.until(lambda item: item[0] == "states" and "SUCCESS" in _changes(resumed, "instance", wid))
            assert resumed.seen[0][0] == "states", "a resumable id replays, without hello or reset"
            tasks = _changes(resumed, "task", wid)
            assert tasks.count("SUCCESS") == 2, tasks

        # an id from another server (or a restarted one) cannot resume: reset, then hello
        async with open_stream(session, c, last_id="00000000.5") as fresh:
            assert (await fresh.next())[0] == "reset"
            assert (await fresh.next())[0] == "hello"


async def test_stream_needs_a_token(api_cluster: ApiCluster) -> None:
    async with (
        aiohttp.ClientSession(connector=tls.connector()) as session,
        session.get(f"{api_cluster.url}/api/v1/events") as response,
    ):
        assert response.status == 401
        assert "token" in (await response.json())["error"]["message"]


async def test_unknown_api_path_is_a_json_404_not_the_app(api_cluster: ApiCluster) -> None:
    headers = {"Authorization": f"Bearer {api_cluster.token}"}
    async with (
        aiohttp.ClientSession(connector=tls.connector()) as session,
        session.get(f"{api_cluster.url}/api/v1/no-such-thing", headers=headers) as response,
    ):
        assert response.status == 404
        assert "no API endpoint" in (await response.json())["error"]["message"]
