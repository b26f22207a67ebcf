"""An API server with a token cache, as deployed (the other API tests run without one): concurrent first calls
with a new token share one lookup and one "last used" write, and on the server that makes the change a
demotion, a disabled user, a revoked token and its children take effect on the next call, the cache
notwithstanding. The API's pooled connections (handed on without a reset) keep no session state, and a token
lookup failing during an event stream ends the stream cleanly."""

from __future__ import annotations

import asyncio
import socket
import ssl
import urllib.parse
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from tests.conftest import ApiCluster, launch_api_cluster
from tests.test_users_e2e import _http

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cached_api(workdir: Path, pg_server: Any, etcd_server: Any) -> Iterator[ApiCluster]:
    cached = ("api.token_cache_seconds=600", "api.rate_limit_per_second=0")
    with launch_api_cluster(workdir, pg_server, etcd_server.endpoint, False, api_overrides=cached) as cluster:
        yield cluster


def _status(c: ApiCluster, token: str, path: str = "/api/v1/users") -> int:
    return int(_http(c, "GET", path, headers={"Authorization": f"Bearer {token}"})[0])


def test_concurrent_first_calls_share_the_lookup_and_changes_take_effect_at_once(cached_api: ApiCluster) -> None:
    c = cached_api
    admin = c.client()
    admin.post("/api/v1/users", {"name": "cached-eve", "password": "correct horse", "admin": True})
    made = admin.post("/api/v1/tokens", {"name": "t", "user": "cached-eve"})
    token = made["token"]
    with ThreadPoolExecutor(20) as pool:
        assert list(pool.map(lambda _: _status(c, token), range(40))) == [200] * 40
    used = c.query("SELECT last_used_time FROM access_token WHERE id = $1", made["id"])
    assert used[0][0] is not None

    admin.put("/api/v1/users/cached-eve", {"admin": False})
    assert _status(c, token) == 403  # demoted: no longer an admin's call
    assert _status(c, token, "/api/v1/me") == 200
    admin.put("/api/v1/users/cached-eve", {"admin": True})
    assert _status(c, token) == 200

    admin.put("/api/v1/users/cached-eve", {"enabled": False})
    assert _status(c, token, "/api/v1/me") == 401
    admin.put("/api/v1/users/cached-eve", {"enabled": True})
    assert _status(c, token, "/api/v1/me") == 200

    # a token the cached one minted is revoked with it
    child = c.client(token).post("/api/v1/tokens", {"name": "child"})["token"]
    assert _status(c, child, "/api/v1/me") == 200
    admin.delete(f"/api/v1/tokens/{made['id']}")
    assert _status(c, token, "/api/v1/me") == 401
    assert _status(c, child, "/api/v1/me") == 401


def test_the_apis_pooled_connections_hold_no_session_state_after_use(cached_api: ApiCluster) -> None:
    """The API's pool hands connections on without a reset (tests/test_pool_sessions.py reads the code): after
    sign-ins (advisory locks), lists (SQLAlchemy-compiled), creates and deletes, no connection of the database
    holds an advisory lock or a temporary table."""
    c = cached_api
    admin = c.client()
    admin.post("/api/v1/users", {"name": "cached-pat", "password": "correct horse"})
    for _ in range(3):
        assert _http(c, "POST", "/api/v1/login", {"user": "cached-pat", "password": "correct horse"})[0] == 200
    admin.post("/api/v1/projects", {"name": "cached-proj"})
    for path in ("/api/v1/projects", "/api/v1/users", "/api/v1/tokens", "/api/v1/instances", "/api/v1/cluster"):
        admin.get(path)
    made = admin.post("/api/v1/tokens", {"name": "gone"})
    admin.delete(f"/api/v1/tokens/{made['id']}")
    assert (
        c.query(
            "SELECT l.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
            " WHERE l.locktype = 'advisory' AND a.datname = current_database()"
        )
        == []
    )
    assert c.query("SELECT relname FROM pg_class WHERE relpersistence = 't'") == []


@pytest.fixture(scope="module")
def beating_api(workdir: Path, pg_server: Any, etcd_server: Any) -> Iterator[ApiCluster]:
    """No token cache: every heartbeat of an event stream looks its token up; statements time out after 2 s."""
    beat = ("api.events_heartbeat_seconds=0.2", "database.command_timeout=2")
    with launch_api_cluster(workdir, pg_server, etcd_server.endpoint, False, api_overrides=beat) as cluster:
        yield cluster


def _stream(c: ApiCluster, path: str) -> socket.socket:
    """A raw connection with a GET of ``path`` sent: what the server writes is read as it is."""
    url = urllib.parse.urlsplit(c.url)
    sock = socket.create_connection((url.hostname, url.port), timeout=20)
    if url.scheme == "https":
        sock = ssl.create_default_context(cafile=c.ca_file).wrap_socket(sock, server_hostname=url.hostname)
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {url.netloc}\r\nAuthorization: Bearer {c.token}\r\n\r\n".encode())
    return sock


def _read_until(sock: socket.socket, raw: bytes, done: Callable[[bytes], bool]) -> bytes:
    while not done(raw):
        try:
            data = sock.recv(65536)
        except TimeoutError:
            raise AssertionError(f"nothing more within the timeout after {raw!r}") from None
        if not data:
            break
        raw += data
    return raw


def test_a_token_lookup_failing_during_an_event_stream_ends_the_stream_cleanly(beating_api: ApiCluster) -> None:
    """The heartbeat's check of the token times out (the token table is locked): the stream ends, or goes on,
    as a well-formed stream; no second answer is written into its middle."""
    c = beating_api

    async def lock_tokens() -> None:
        conn = await asyncpg.connect(c.dsn)
        try:
            async with conn.transaction():
                await conn.execute("LOCK TABLE access_token IN ACCESS EXCLUSIVE MODE")
                await asyncio.sleep(3)  # longer than the API's command_timeout: its lookup fails
        finally:
            await conn.close()

    with _stream(c, "/api/v1/events") as sock:
        raw = _read_until(sock, b"", lambda r: b"event: hello" in r)
        asyncio.run(lock_tokens())
        seen = len(raw)
        # the stream went on after the lock (five pings), or it ended (its last chunk)
        raw = _read_until(sock, raw, lambda r: r.count(b": ping", seen) >= 5 or r.endswith(b"\r\n0\r\n\r\n"))
    assert raw.startswith(b"HTTP/1.1 200") and raw.count(b"HTTP/1.1") == 1, raw
