"""Parsers of user input do bounded work and answer bad input with a 400 (or 413) naming the field: the
real server stack on a real PostgreSQL, as an admin (issue 24: crontabs, `$[...]`, sizes, cycles)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import asyncpg
import pytest

from engine.api.tokens import create_token
from engine.scheduling.cron import MAX_STEPS
from tests.api_harness import in_process_api
from tests.cluster_harness import save, shell


@pytest.fixture
async def admin_api(fresh_db: str) -> AsyncIterator[tuple[aiohttp.ClientSession, str, str]]:
    conn = await asyncpg.connect(fresh_db)
    try:
        uid = await conn.fetchval("INSERT INTO users (user_name, user_type) VALUES ('root_admin', 0) RETURNING id")
        token = (await create_token(conn, uid, "t"))[1]
    finally:
        await conn.close()
    async with in_process_api(fresh_db, [], token) as (session, base):
        yield session, base, fresh_db


async def _call(session: aiohttp.ClientSession, method: str, url: str, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body))
    async with session.request(method, url, data=data, headers={"Content-Type": "application/json"}) as resp:
        return resp.status, await resp.json()


# -- crontabs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("crontab", "expected"),
    [
        ("* * * * * ? 2025,2099", ["2099-01-01T00:00:00", "2099-01-01T00:00:01", "2099-01-01T00:00:02"]),
        ("*/10 * * * * ? 2025,2098", ["2098-01-01T00:00:00", "2098-01-01T00:00:10", "2098-01-01T00:00:20"]),
    ],
)
async def test_preview_of_a_year_list_with_a_gap_jumps_to_the_next_year_with_bounded_work(
    admin_api: tuple[aiohttp.ClientSession, str, str], crontab: str, expected: list[str]
) -> None:
    session, base, _ = admin_api
    status, answer = await _call(session, "POST", f"{base}/api/v1/schedules/preview", {"crontab": crontab, "count": 3})
    assert status == 200, answer
    assert [t.removesuffix("Z").removesuffix("+00:00") for t in answer["next_fire_times"]] == expected
    assert answer["work"] <= 3 * MAX_STEPS


@pytest.mark.parametrize(
    ("crontab", "message"),
    [
        ("0 0 0 1 1 ? 9999", "1970-2099"),  # accepted by parse() before, then failed in the scheduler
        ("0 0 0 29 2 ? 2025-2027,2029-2031", "no fire time"),  # no 29 February in those years
        ("0 0 0 1 1 ? 2020", "no fire time"),  # only in the past
        ("0 0 0 29 2 ? 1970-2099/4,2096", "within"),  # ~30 years to jump for the first fire
    ],
)
async def test_a_schedule_that_cannot_fire_within_its_bound_is_refused_at_the_crontab(
    admin_api: tuple[aiohttp.ClientSession, str, str], crontab: str, message: str
) -> None:
    session, base, dsn = admin_api
    code = await save(dsn, "sched-bound", [shell("a", "true")])
    url = f"{base}/api/v1/schedules"
    status, answer = await _call(session, "POST", url, {"workflow_code": code, "crontab": crontab})
    assert status == 400, answer
    assert answer["error"]["field"] == "crontab" and message in answer["error"]["message"]
    status, answer = await _call(session, "POST", url, {"workflow_code": code, "crontab": "0 0 0 1 1 ? 2098"})
    assert status == 201, answer
