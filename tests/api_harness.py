"""An API server in the test's own event loop (the real middleware, routing and handlers) on a real database."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable

import aiohttp
import asyncpg
from aiohttp.test_utils import TestServer

from engine import config as config_mod
from engine.api.server import ApiServer
from engine.storage.jsoncodec import register_json
from tests.helpers import TEST_SECRET


@contextlib.asynccontextmanager
async def in_process_api(
    dsn: str, overrides: list[str], token: str = "", prepare: Callable[[ApiServer], None] | None = None
) -> AsyncIterator[tuple[aiohttp.ClientSession, str]]:
    """A client session (with ``token`` as its Bearer token, if given) and the server's base URL; ``prepare``
    is given the server before it serves (to set what its ``start`` would)."""
    cfg = config_mod.load(overrides=[f"rpc.secret={TEST_SECRET}", "api.alerts_enabled=false", *overrides], environ={})
    api = ApiServer(cfg)
    api.pool = await asyncpg.create_pool(dsn, min_size=1, max_size=4, init=register_json)
    if prepare is not None:
        prepare(api)
    server = TestServer(api.app)
    await server.start_server()
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10), headers=headers) as session:
            yield session, str(server.make_url(""))
    finally:
        await server.close()
        await api.pool.close()
        await api.etcd.close()
        await api.rpc.close()
