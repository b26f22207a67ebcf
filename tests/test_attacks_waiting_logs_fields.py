"""Hostile review of the newest surfaces (the real API server stack on a real PostgreSQL): a task's
``delay_time`` and the other minute fields take only what the master can hold (a 400 at the field, never a
500 or a stalled master); ``GET /api/v1/instances/{id}/waiting`` answers bad ids with a 400 / 404, tells a
stranger nothing, asks no master about a run that is over, and a master that accepts the question but never
answers costs the caller its bounded wait while the API serves every other request."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import socket
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import asyncpg
import pytest

from engine.accounts.tokens import create_token
from engine.api import access
from engine.api.waiting import ASK_TIMEOUT
from tests.api_harness import in_process_api
from tests.conftest import ApiCluster
from tests.helpers import wait_sync
from tests.test_api import shell_doc, start, wait_final
from tests.test_migrate_dolphinscheduler import _one_task
from tests.test_waiting_reasons import _reason as waiting_reason

_TIMED = ("delay_time", "retry_interval", "timeout")


@pytest.fixture
async def world(fresh_db: str) -> AsyncIterator[dict[str, Any]]:
    """An admin, a project p with a reader, a stranger (owner of another project, q), and instances of p: one
    running on a master that never answers, one finished (SUCCESS, with a task that ran on that host), one
    running with no owner yet."""
    conn = await asyncpg.connect(fresh_db)
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts connections (the kernel's backlog) and never answers a byte
    try:
        ids = {}
        for name, kind in (("admin", 0), ("owner", 1), ("reader", 1), ("stranger", 1)):
            ids[name] = await conn.fetchval(
                "INSERT INTO users (user_name, user_type) VALUES ($1, $2) RETURNING id", name, kind
            )
        tokens = {name: (await create_token(conn, uid, "t"))[1] for name, uid in ids.items()}
        await conn.execute("INSERT INTO project (code, name, user_id) VALUES (1, 'p', $1)", ids["owner"])
        await conn.execute(
            "INSERT INTO project_user (project_code, user_id, perm) VALUES (1, $1, $2)", ids["reader"], access.READ
        )
        await conn.execute("INSERT INTO project (code, name, user_id) VALUES (2, 'q', $1)", ids["stranger"])
        await conn.execute("INSERT INTO workflow_definition (code, name, project_code) VALUES (10, 'wf', 1)")
        host = f"127.0.0.1:{silent.getsockname()[1]}"
        instances = {}
        for command, (key, state, owner) in enumerate((("running", 1, host), ("final", 7, host), ("unowned", 1, ""))):
            instances[key] = await conn.fetchval(
                "INSERT INTO workflow_instance (name, workflow_definition_code, workflow_definition_version,"
                " project_code, state, command_type, command_id, host) VALUES ($1, 10, 1, 1, $2, 0, $4, $3)"
                " RETURNING id",
                f"wf-{key}",
                state,
                owner,
                500 + command,
            )
        task = await conn.fetchval(
            "INSERT INTO task_instance (name, task_type, task_code, task_definition_version, workflow_instance_id,"
            " state, attempt, flag, host, log_path) VALUES ('t', 'SHELL', 7, 1, $1, 7, 1, 1, $2, '/tmp/x.log')"
            " RETURNING id",
            instances["final"],
            host,
        )
        yield {"dsn": fresh_db, "tokens": tokens, "instances": instances, "host": host, "task": task}
    finally:
        silent.close()
        await conn.close()


async def _get(session: aiohttp.ClientSession, url: str, token: str) -> tuple[int, Any]:
    async with session.get(url, headers={"Authorization": f"Bearer {token}"}) as resp:
        return resp.status, await resp.json()


def _doc(name: str, **task: Any) -> dict[str, Any]:
    return {"name": name, "project": "p",
            "tasks": [{"name": "a", "type": "SHELL", "params": {"rawScript": "echo"}, **task}]}  # fmt: skip


# -- delay_time and the other minute fields ---------------------------------------------------------


@pytest.mark.parametrize("field", _TIMED)
@pytest.mark.parametrize("value", [-1, 2**31, 10**30, "5", 1.5, True, None, [1], {"m": 1}])
async def test_a_bad_minute_field_is_a_400_at_the_field(world: dict[str, Any], field: str, value: Any) -> None:
    async with in_process_api(world["dsn"], [], world["tokens"]["admin"]) as (session, base):
        body = json.dumps(_doc(f"bad-{field}", **{field: value}))
        headers = {"Content-Type": "application/json"}
        async with session.post(f"{base}/api/v1/workflows", data=body, headers=headers) as resp:
            status, answer = resp.status, await resp.json()
    assert status == 400, answer
    assert answer["error"]["field"] == f"tasks[0].{field}", answer


@pytest.mark.parametrize("field", _TIMED)
async def test_an_integral_float_minute_field_is_stored_as_an_integer(world: dict[str, Any], field: str) -> None:
    """JSON Schema's "integer" takes 5.0: it is stored as 5 (an int column), not a 500 from the insert."""
    async with in_process_api(world["dsn"], [], world["tokens"]["admin"]) as (session, base):
        body = json.dumps(_doc(f"float-{field}", **{field: 5.0}))
        headers = {"Content-Type": "application/json"}
        async with session.post(f"{base}/api/v1/workflows", data=body, headers=headers) as resp:
            status, answer = resp.status, await resp.json()
        assert status == 201, answer
        status, saved = await _get(session, f"{base}/api/v1/workflows/{answer['code']}", world["tokens"]["admin"])
    assert status == 200, saved
    stored = saved["document"]["tasks"][0][field]
    assert stored == 5 and type(stored) is int, saved


# -- GET /api/v1/instances/{id}/waiting -------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "status"),
    [("abc", 400), ("1.5", 400), ("0x10", 400), ("99999999999999999999", 400), ("-1", 404), ("0", 404),
     ("9223372036854775807", 404), ("%20", 400)],
)  # fmt: skip
async def test_waiting_of_a_bad_or_missing_id_is_a_400_or_404(world: dict[str, Any], raw: str, status: int) -> None:
    async with in_process_api(world["dsn"], []) as (session, base):
        got, answer = await _get(session, f"{base}/api/v1/instances/{raw}/waiting", world["tokens"]["admin"])
    assert got == status, answer
    assert answer["error"]["status"] == status
    if status == 400:
        assert answer["error"]["field"] == "path.id", answer


async def test_waiting_tells_a_stranger_nothing_and_a_reader_the_reasons(world: dict[str, Any]) -> None:
    """A user without a grant on p gets the answer of an id that does not exist (no state, no host); a
    READ grant is enough to ask."""
    final = world["instances"]["final"]
    async with in_process_api(world["dsn"], []) as (session, base):
        hidden = await _get(session, f"{base}/api/v1/instances/{final}/waiting", world["tokens"]["stranger"])
        missing = await _get(session, f"{base}/api/v1/instances/999999/waiting", world["tokens"]["stranger"])
        read = await _get(session, f"{base}/api/v1/instances/{final}/waiting", world["tokens"]["reader"])
    assert hidden[0] == missing[0] == 404
    assert hidden[1]["error"]["message"].replace(str(final), "N") == missing[1]["error"]["message"].replace(
        "999999", "N"
    )
    assert world["host"] not in json.dumps(hidden[1])
    assert read[0] == 200 and read[1]["state"] == "SUCCESS", read


async def test_waiting_with_a_revoked_token_is_a_401(world: dict[str, Any]) -> None:
    running = world["instances"]["running"]
    token = world["tokens"]["reader"]
    async with in_process_api(world["dsn"], []) as (session, base):
        status, mine = await _get(session, f"{base}/api/v1/tokens", token)
        assert status == 200, mine
        (entry,) = [t for t in mine["items"] if t["name"] == "t"]
        async with session.delete(
            f"{base}/api/v1/tokens/{entry['id']}", headers={"Authorization": f"Bearer {token}"}
        ) as resp:
            assert resp.status in (200, 204), await resp.text()
        status, answer = await _get(session, f"{base}/api/v1/instances/{running}/waiting", token)
    assert status == 401, answer


async def test_waiting_of_a_finished_run_asks_no_master(world: dict[str, Any]) -> None:
    """The finished run's host is a master that never answers: asking it would come back "silent"."""
    final = world["instances"]["final"]
    async with in_process_api(world["dsn"], []) as (session, base):
        status, answer = await _get(session, f"{base}/api/v1/instances/{final}/waiting", world["tokens"]["reader"])
    assert status == 200, answer
    assert (answer["state"], answer["unknown"], answer["tasks"]) == ("SUCCESS", None, [])


async def test_waiting_of_a_run_no_master_owns_says_so(world: dict[str, Any]) -> None:
    unowned = world["instances"]["unowned"]
    async with in_process_api(world["dsn"], []) as (session, base):
        status, answer = await _get(session, f"{base}/api/v1/instances/{unowned}/waiting", world["tokens"]["reader"])
    assert status == 200, answer
    assert answer["unknown_kind"] == "no_owner" and answer["tasks"] == [], answer


async def test_a_master_that_takes_the_question_and_never_answers_gives_reason_unknown(world: dict[str, Any]) -> None:
    """The connection is accepted (the kernel's backlog) and no byte ever comes back: the API's own
    bound (ASK_TIMEOUT, under the client's 10 s) ends the wait."""
    running = world["instances"]["running"]
    async with in_process_api(world["dsn"], []) as (session, base):
        status, answer = await _get(session, f"{base}/api/v1/instances/{running}/waiting", world["tokens"]["reader"])
    assert status == 200, answer
    assert answer["unknown_kind"] == "silent" and answer["tasks"] == [], answer
    assert answer["unknown"] == f"reason unknown: master {world['host']} did not answer"
    assert ASK_TIMEOUT < 10


async def test_a_silent_master_blocks_no_other_request(world: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """While questions to a silent master are pending (their wait made unbounded here, so they stay pending
    until the master goes away), the API answers every other request; then the pending ones end unknown."""
    monkeypatch.setattr("engine.api.waiting.ASK_TIMEOUT", 600.0)
    asked = asyncio.Event()
    release = asyncio.Event()
    held: list[asyncio.StreamWriter] = []

    async def silent(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)
        asked.set()
        await release.wait()
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    host = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
    conn = await asyncpg.connect(world["dsn"])
    try:
        await conn.execute("UPDATE workflow_instance SET host = $1 WHERE id = $2", host, world["instances"]["running"])
    finally:
        await conn.close()
    running, final = world["instances"]["running"], world["instances"]["final"]
    token = world["tokens"]["reader"]
    try:
        async with in_process_api(world["dsn"], []) as (session, base):
            pending = [
                asyncio.create_task(_get(session, f"{base}/api/v1/instances/{running}/waiting", token))
                for _ in range(3)
            ]
            await asyncio.wait_for(asked.wait(), 10)
            for _ in range(5):
                status, answer = await _get(session, f"{base}/api/v1/instances/{final}", token)
                assert status == 200, answer
                status, answer = await _get(session, f"{base}/api/v1/instances/{final}/waiting", token)
                assert status == 200, answer
            assert not any(p.done() for p in pending)
            release.set()
            answers = await asyncio.gather(*pending)
    finally:
        release.set()
        server.close()
        await server.wait_closed()
    assert all(status == 200 and a["unknown_kind"] == "silent" for status, a in answers), answers


async def _post_raw(session: aiohttp.ClientSession, url: str, text: str) -> tuple[int, Any]:
    async with session.post(url, data=text.encode(), headers={"Content-Type": "application/json"}) as resp:
        return resp.status, await resp.json()


async def test_a_minute_field_of_1e400_is_a_400_at_the_field(world: dict[str, Any]) -> None:
    """1e400 is valid JSON that Python reads as infinity (not the Infinity constant, which is refused)."""
    body = json.dumps(_doc("inf-delay", delay_time=12345)).replace("12345", "1e400")
    async with in_process_api(world["dsn"], [], world["tokens"]["admin"]) as (session, base):
        status, answer = await _post_raw(session, f"{base}/api/v1/workflows", body)
    assert status == 400, answer
    assert answer["error"]["field"] == "tasks[0].delay_time", answer


@pytest.mark.parametrize("field", ["delayTime", "failRetryTimes", "failRetryInterval"])
async def test_an_imported_dolphinscheduler_minute_field_of_1e400_is_a_400(world: dict[str, Any], field: str) -> None:
    export = _one_task(**{field: 12345})
    body = json.dumps({"export": export, "project": "p"}).replace("12345", "1e400")
    async with in_process_api(world["dsn"], [], world["tokens"]["admin"]) as (session, base):
        status, answer = await _post_raw(session, f"{base}/api/v1/import/dolphinscheduler", body)
    assert status == 400, answer
    assert answer["error"]["field"] == "export: workflow 'wf'", answer
    assert "OverflowError" in answer["error"]["message"], answer


# -- the largest accepted minute fields on a real cluster -------------------------------------------


@pytest.mark.slow
def test_the_largest_delay_time_waits_thousands_of_years_and_stalls_nothing(api_cluster: ApiCluster) -> None:
    """delay_time, timeout and retry_interval at their bound (2**31 - 1 minutes, ~4000 years): the delayed
    task waits with its due time shown, its sibling runs (on a worker that arms the same timeout) to SUCCESS
    meanwhile, and a stop ends the run."""
    c = api_cluster
    biggest = 2**31 - 1
    doc = shell_doc(f"huge{uuid.uuid4().hex[:8]}", "review-attacks")
    doc["tasks"] = [
        {"name": "late", "type": "SHELL", "params": {"rawScript": "echo late"}, "delay_time": biggest},
        {"name": "now", "type": "SHELL", "params": {"rawScript": "echo now"}, "timeout": biggest,
         "timeout_strategy": "FAILED", "retries": 1, "retry_interval": biggest},
    ]  # fmt: skip
    code = int(c.client().post("/api/v1/workflows", doc, release=True)["code"])
    instance = start(c, code)
    reason = waiting_reason(c, instance, "late", "delay")
    assert dt.datetime.fromisoformat(reason["at"]).year > 6000, reason

    def sibling_done() -> bool:
        tasks = c.client().get(f"/api/v1/instances/{instance}")["tasks"]
        return any(t["name"] == "now" and t["state"] == "SUCCESS" for t in tasks)

    wait_sync(sibling_done, 60, what="the task without a delay ran")
    c.client().post(f"/api/v1/instances/{instance}/stop", {})
    final = wait_final(c, instance)
    assert final["state"] == "STOP", final
    assert sorted((t["name"], t["state"]) for t in final["tasks"]) == [("late", "KILL"), ("now", "SUCCESS")]


@pytest.mark.parametrize("value", [2**63, 10**30, 0, -1, 1.5, True])
async def test_a_task_alert_group_out_of_range_is_a_400_at_the_field(world: dict[str, Any], value: Any) -> None:
    async with in_process_api(world["dsn"], [], world["tokens"]["admin"]) as (session, base):
        status, answer = await _post_raw(session, f"{base}/api/v1/workflows", json.dumps(_doc("ag", alert_group=value)))
    assert status == 400, answer
    assert answer["error"]["field"] == "tasks[0].alert_group", answer


@pytest.mark.parametrize("route", ["", "/log", "/log/download", "/log/search?q=a", "/log/follow"])
async def test_a_stranger_reads_no_log_by_any_route(world: dict[str, Any], route: str) -> None:
    """The log (and so the rendered script at its head) of a task of a project the caller cannot see: the
    answer of a task that does not exist, through the real handlers, before any worker is asked."""
    task = world["task"]
    token = world["tokens"]["stranger"]
    async with in_process_api(world["dsn"], []) as (session, base):
        hidden = await _get(session, f"{base}/api/v1/tasks/{task}{route}", token)
        missing = await _get(session, f"{base}/api/v1/tasks/999999{route}", token)
    assert hidden[0] == missing[0] == 404, (hidden, missing)
    assert hidden[1]["error"]["message"].replace(str(task), "N") == missing[1]["error"]["message"].replace(
        "999999", "N"
    )


async def test_a_master_that_is_down_gives_reason_unknown(world: dict[str, Any]) -> None:
    """Its address refuses connections (a port nothing listens on): "did not answer", not an error."""
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    down = f"127.0.0.1:{closed.getsockname()[1]}"
    closed.close()
    conn = await asyncpg.connect(world["dsn"])
    try:
        await conn.execute("UPDATE workflow_instance SET host = $1 WHERE id = $2", down, world["instances"]["running"])
    finally:
        await conn.close()
    running = world["instances"]["running"]
    async with in_process_api(world["dsn"], []) as (session, base):
        status, answer = await _get(session, f"{base}/api/v1/instances/{running}/waiting", world["tokens"]["reader"])
    assert status == 200, answer
    assert answer["unknown_kind"] == "silent" and answer["unknown"] == f"reason unknown: master {down} did not answer"
