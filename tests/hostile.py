"""The hostile review's set-up (issue 24): an admin, and users alice and bob with their own projects and tokens
and no admin rights, calling the real API server stack (middleware, routing, handlers) on a real PostgreSQL.
tests/test_attacks*.py attack through it as the review did."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import asyncpg

from engine.accounts.tokens import create_token
from tests.api_harness import in_process_api


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def shell(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": "SHELL", "params": {"rawScript": "true"}, **extra}


def waits_on(code: int) -> dict[str, Any]:
    """A DEPENDENT task waiting on workflow ``code``'s run of the day."""
    params = {"items": [{"workflow_code": code, "cycle": "day", "date_value": "today"}]}
    return {"name": "wait", "type": "DEPENDENT", "params": params}


@dataclass
class Answer:
    status: int
    body: Any
    headers: Any = None

    @property
    def error(self) -> dict[str, Any]:
        assert self.status >= 400 and isinstance(self.body, dict) and "error" in self.body, (self.status, self.body)
        return dict(self.body["error"])


@dataclass
class Hostile:
    """Tokens by persona (``admin``, ``alice``, ``bob``, and whatever a test mints) and a caller."""

    session: aiohttp.ClientSession
    base: str
    dsn: str
    tokens: dict[str, str] = field(default_factory=dict)

    async def call(self, who: str | None, method: str, path: str, body: Any = None, **query: Any) -> Answer:
        headers = {"Authorization": f"Bearer {self.tokens[who]}"} if who else {}
        if body is not None:
            headers["Content-Type"] = "application/json"
        data = None if body is None else json.dumps(body)
        async with self.session.request(
            method, self.base + path, data=data, headers=headers, params={k: str(v) for k, v in query.items()}
        ) as resp:
            raw = await resp.read()
            try:
                parsed: Any = json.loads(raw)
            except ValueError:
                parsed = raw
            return Answer(resp.status, parsed, resp.headers)

    async def ok(self, who: str | None, method: str, path: str, body: Any = None, **query: Any) -> Any:
        answer = await self.call(who, method, path, body, **query)
        assert answer.status in (200, 201), (method, path, answer.status, answer.body)
        return answer.body

    async def user(self, name: str, perms: list[str] | None = None) -> None:
        """User ``name`` (no admin) made by the admin, with a token the admin made for them."""
        await self.ok("admin", "POST", "/api/v1/users", {"name": name, "password": "correct horse battery"})
        body: dict[str, Any] = {"name": "review", "user": name}
        if perms is not None:
            body["perms"] = perms
        self.tokens[name] = (await self.ok("admin", "POST", "/api/v1/tokens", body))["token"]

    async def workflow(self, who: str, doc: dict[str, Any]) -> int:
        """Save (and put online) ``doc`` as ``who``: its code."""
        return int((await self.ok(who, "POST", "/api/v1/workflows", doc, release="true"))["code"])

    async def query(self, sql: str, *args: Any) -> list[Any]:
        conn = await asyncpg.connect(self.dsn)
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            await conn.close()


@contextlib.asynccontextmanager
async def hostile_api(dsn: str, overrides: list[str] | None = None) -> AsyncIterator[Hostile]:
    conn = await asyncpg.connect(dsn)
    try:
        uid = await conn.fetchval("INSERT INTO users (user_name, user_type) VALUES ('admin', 0) RETURNING id")
        admin = (await create_token(conn, uid, "t"))[1]
    finally:
        await conn.close()
    settings = [
        "api.token_cache_seconds=0",
        "api.rate_limit_per_second=0",
        "api.anonymous_rate_limit_per_second=0",
        *(overrides or []),
    ]
    async with in_process_api(dsn, settings) as (session, base):
        world = Hostile(session, base, dsn, {"admin": admin})
        await world.user("alice")
        await world.user("bob")
        yield world
