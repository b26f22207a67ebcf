"""Hostile review of the live event stream (engine/api/live.py): a stream that follows one instance's task
changes (``?instance=``) stops sending them once the caller's grant on the instance's project is revoked,
as the instance's own changes stop (the real server stack and its LISTEN hub on a real PostgreSQL)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import aiohttp
import asyncpg

from engine.accounts.tokens import create_token
from engine.api.server import ApiServer
from engine.states import TaskState, WorkflowState
from tests.api_harness import in_process_api


async def _frames(stream: asyncio.StreamReader, until: bytes) -> list[dict[str, object]]:
    """The ``states`` changes received up to and including the frame holding ``until``."""
    changes: list[dict[str, object]] = []
    while True:
        line = await asyncio.wait_for(stream.readline(), 30)
        assert line, "the stream ended"
        if line.startswith(b"data: ") and line != b"data: {}\n":
            data = json.loads(line[6:])
            if isinstance(data, list):
                changes.extend(data)
                if until in line:
                    return changes


@contextlib.asynccontextmanager
async def _live_api(dsn: str) -> AsyncIterator[tuple[aiohttp.ClientSession, str]]:
    """The in-process API with its LISTEN hub running (as the server's start runs it)."""
    servers: list[ApiServer] = []

    def start_hub(api: ApiServer) -> None:
        servers.append(api)
        api.live.start()

    try:
        settings = ["api.events_heartbeat_seconds=0.1", f"database.dsn={dsn}"]
        async with in_process_api(dsn, settings, prepare=start_hub) as served:
            yield served
    finally:
        for api in servers:
            await api.live.close()


async def test_a_followed_instance_s_task_changes_stop_with_the_grant(fresh_db: str) -> None:
    async with _live_api(fresh_db) as (session, base):
        conn = await asyncpg.connect(fresh_db)
        try:
            bob = await conn.fetchval("INSERT INTO users (user_name, user_type) VALUES ('bob', 1) RETURNING id")
            token = (await create_token(conn, bob, "t"))[1]
            await conn.execute(
                "INSERT INTO project (code, name, user_id) VALUES (1, 'theirs', 1), (2, 'bobs', $1)", bob
            )
            await conn.execute("INSERT INTO project_user (project_code, user_id, perm) VALUES (1, $1, 2)", bob)
            await conn.execute(
                "INSERT INTO workflow_definition (code, name, project_code) VALUES (10, 'wf', 1), (20, 'mine', 2)"
            )
            ids = []
            for n, code in ((1, 10), (2, 20)):
                ids.append(await conn.fetchval(
                    "INSERT INTO workflow_instance (name, workflow_definition_code, workflow_definition_version,"
                    " project_code, state, command_type, command_id) VALUES ($1, $2, 1, $3, 1, 0, $3) RETURNING id",
                    f"run{n}", code, n,
                ))  # fmt: skip
            theirs, mine = ids
            task = await conn.fetchval(
                "INSERT INTO task_instance (name, task_type, task_code, task_definition_version, workflow_instance_id,"
                " state, attempt, flag) VALUES ('t', 'SHELL', 7, 1, $1, 0, 1, 1) RETURNING id",
                theirs,
            )
            owner = await conn.fetchval("INSERT INTO users (user_name, user_type) VALUES ('them', 1) RETURNING id")
            await conn.execute("UPDATE project SET user_id = $1 WHERE code = 1", owner)
            headers = {"Authorization": f"Bearer {token}"}
            url = f"{base}/api/v1/events?instance={theirs}"
            async with session.get(url, headers=headers) as stream:
                assert stream.status == 200
                assert (await stream.content.readline()).startswith(b"id: ")  # hello
                await conn.execute(
                    "UPDATE task_instance SET state = $2 WHERE id = $1", task, int(TaskState.RUNNING_EXECUTION)
                )
                seen = await _frames(stream.content, b'"kind":"task"')
                assert {"kind": "task", "id": task, "state": "RUNNING_EXECUTION", "instance": theirs} in seen
                await conn.execute("DELETE FROM project_user WHERE user_id = $1", bob)
                await conn.execute("UPDATE task_instance SET state = $2 WHERE id = $1", task, int(TaskState.SUCCESS))
                await conn.execute(
                    "UPDATE workflow_instance SET state = $2 WHERE id = ANY($1)",
                    [theirs, mine],
                    int(WorkflowState.SUCCESS),
                )
                seen = await _frames(stream.content, b'"id":%d,' % mine)
        finally:
            await conn.close()
    assert [c for c in seen if c["kind"] == "instance"] == [{"kind": "instance", "id": mine, "state": "SUCCESS"}]
    assert not [c for c in seen if c["kind"] == "task"], seen
