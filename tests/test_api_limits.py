"""Request size and rate limits of the API server (engine/api/ratelimit.py, api.max_body_bytes, api.rate_limit_*):
the real server stack (middleware, routing, authentication) on a real PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import asyncpg
import pytest

from engine.accounts.tokens import create_token
from engine.api.ratelimit import RateLimiter
from tests.api_harness import in_process_api


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_allows_its_burst_then_refills_at_its_rate() -> None:
    clock = Clock()
    limiter = RateLimiter(rate=2, burst=3, clock=clock)
    assert [limiter.take("a") for _ in range(4)] == [0, 0, 0, 1]  # burst of 3, then wait
    assert limiter.take("b") == 0  # keys are independent
    clock.now += 0.5  # one request refilled
    assert limiter.take("a") == 0 and limiter.take("a") == 1
    clock.now += 10  # never more than the burst
    assert [limiter.take("a") for _ in range(4)] == [0, 0, 0, 1]
    slow = RateLimiter(rate=0.1, burst=1, clock=clock)
    assert slow.take("x") == 0 and slow.take("x") == 10  # Retry-After: whole seconds until one refilled
    assert RateLimiter(rate=0, burst=1, clock=clock).take("x") == 0  # 0: no limit


def test_the_table_forgets_refilled_buckets_when_it_grows() -> None:
    clock = Clock()
    limiter = RateLimiter(rate=1, burst=2, clock=clock, max_keys=10)
    for i in range(10):
        limiter.take(i)
    clock.now += 5  # every bucket refilled: they carry nothing
    limiter.take("new")
    assert len(limiter._buckets) <= 10 and "new" in limiter._buckets
    for i in range(50):  # all recent: the oldest half go
        limiter.take(("recent", i))
    assert len(limiter._buckets) <= 11


@pytest.fixture
async def limited(fresh_db: str) -> AsyncIterator[tuple[aiohttp.ClientSession, str, dict[str, str]]]:
    conn = await asyncpg.connect(fresh_db)
    try:
        tokens = {}
        for name in ("alice", "bob"):
            uid = await conn.fetchval("INSERT INTO users (user_name, user_type) VALUES ($1, 1) RETURNING id", name)
            tokens[name] = (await create_token(conn, uid, "t"))[1]
    finally:
        await conn.close()
    overrides = ["api.max_body_bytes=2048", "api.rate_limit_per_second=0.01", "api.rate_limit_burst=3",
                 "api.anonymous_rate_limit_per_second=0.01", "api.anonymous_rate_limit_burst=2"]  # fmt: skip
    async with in_process_api(fresh_db, overrides) as (session, base):
        yield session, base, tokens


async def _call(session: aiohttp.ClientSession, method: str, url: str, token: str = "", body: Any = None):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body))
    async with session.request(method, url, data=data, headers=headers) as resp:
        return resp.status, dict(resp.headers), await resp.json()


async def test_each_user_and_each_anonymous_address_is_limited_with_429_and_retry_after(
    limited: tuple[aiohttp.ClientSession, str, dict[str, str]],
) -> None:
    session, base, tokens = limited
    statuses = [(await _call(session, "GET", f"{base}/api/v1/projects", tokens["alice"]))[0] for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    status, headers, answer = await _call(session, "GET", f"{base}/api/v1/projects", tokens["alice"])
    assert status == 429 and int(headers["Retry-After"]) >= 1 and answer["error"]["status"] == 429
    # another user is not held back by alice
    assert (await _call(session, "GET", f"{base}/api/v1/projects", tokens["bob"]))[0] == 200
    # without valid credentials (guessing tokens, logging in): per client address
    anonymous = [
        (await _call(session, "GET", f"{base}/api/v1/projects", "not-a-token"))[0],
        (await _call(session, "POST", f"{base}/api/v1/login", body={"user": "x", "password": "yyyyyyyy"}))[0],
        (await _call(session, "GET", f"{base}/api/v1/projects", "not-a-token"))[0],
    ]
    assert anonymous == [401, 401, 429]
    # the health check is never limited (supervisors and load balancers poll it)
    async with session.get(f"{base}/health") as resp:
        assert resp.status != 429


async def test_a_body_over_the_size_limit_is_refused_with_a_json_413(
    limited: tuple[aiohttp.ClientSession, str, dict[str, str]],
) -> None:
    session, base, tokens = limited
    body = json.dumps({"name": "p", "description": "x" * 4096}).encode()
    status, _, answer = await _call(session, "POST", f"{base}/api/v1/projects", tokens["bob"], body)
    assert status == 413 and answer["error"] == {"status": 413, "message": "request body too large"}
