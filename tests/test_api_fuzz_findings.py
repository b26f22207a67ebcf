"""What the API fuzz run (tests/test_api_fuzz.py) found, each pinned: answers that were 500s are now 400s
naming the field. The real server stack on a real PostgreSQL, as an admin."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import asyncpg
import pytest

from engine.accounts.tokens import create_token
from tests.api_harness import in_process_api


@pytest.fixture
async def admin_api(fresh_db: str) -> AsyncIterator[tuple[aiohttp.ClientSession, str]]:
    conn = await asyncpg.connect(fresh_db)
    try:
        uid = await conn.fetchval("INSERT INTO users (user_name, user_type) VALUES ('root_admin', 0) RETURNING id")
        token = (await create_token(conn, uid, "t"))[1]
    finally:
        await conn.close()
    async with in_process_api(fresh_db, [], token) as served:
        yield served


async def _error(session: aiohttp.ClientSession, method: str, url: str, data: bytes | None = None) -> dict:
    async with session.request(method, url, data=data, headers={"Content-Type": "application/json"}) as resp:
        answer = await resp.json()
    assert resp.status == 400, answer
    return dict(answer["error"])


@pytest.mark.parametrize("path", ["/api/v1/schedules", "/api/v1/workflows", "/api/v1/instances", "/api/v1/tenants"])
async def test_a_page_beyond_any_offset_is_a_400_not_a_500(
    admin_api: tuple[aiohttp.ClientSession, str], path: str
) -> None:
    session, base = admin_api
    error = await _error(session, "GET", f"{base}{path}?page=144115188075855871&size=377")
    assert error["field"] == "query.page"


async def test_a_lone_surrogate_in_a_body_is_a_400_naming_the_field(
    admin_api: tuple[aiohttp.ClientSession, str],
) -> None:
    session, base = admin_api
    body = b'{"project": "ab\\uda8acd", "workflows": ["x"]}'
    error = await _error(session, "POST", f"{base}/api/v1/export/dolphinscheduler", body)
    assert error["field"] == "project" and "Unicode" in error["message"]
    body = b'{"name": "p", "description": "ok", "x": [{"y": "\\udfff"}]}'
    error = await _error(session, "POST", f"{base}/api/v1/projects", body)
    assert error["field"] == "x[0].y"


async def test_an_integer_beyond_64_bits_in_a_body_is_a_400_naming_the_field(
    admin_api: tuple[aiohttp.ClientSession, str],
) -> None:
    session, base = admin_api
    body = b'{"workflow_code": -415414791860516618240, "crontab": "0 * * * *"}'
    error = await _error(session, "POST", f"{base}/api/v1/schedules", body)
    assert error["field"] == "workflow_code" and "64" in error["message"]


async def test_a_body_nested_too_deeply_is_a_400(admin_api: tuple[aiohttp.ClientSession, str]) -> None:
    session, base = admin_api
    for depth in (900, 100_000):
        body = ('{"name": "p", "x": ' + "[" * depth + "]" * depth + "}").encode()
        error = await _error(session, "POST", f"{base}/api/v1/projects", body)
        assert error["field"] in ("body", "x"), error


async def test_a_nul_character_anywhere_is_a_400_naming_the_field(admin_api: tuple[aiohttp.ClientSession, str]) -> None:
    session, base = admin_api
    error = await _error(session, "POST", f"{base}/api/v1/export/dolphinscheduler", b'{"project": "a\\u0000b"}')
    assert error["field"] == "project" and "NUL" in error["message"]
    error = await _error(session, "GET", f"{base}/api/v1/projects/a%00b")
    assert error["field"] == "path.name"
    error = await _error(session, "GET", f"{base}/api/v1/workflows?project=a%00b")
    assert error["field"] == "query.project"
