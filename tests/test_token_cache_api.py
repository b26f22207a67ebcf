"""An API server with a token cache, as deployed (the other API tests run without one): concurrent first calls
with a new token share one lookup and one "last used" write, and on the server that makes the change a
demotion, a disabled user, a revoked token and its children take effect on the next call, the cache
notwithstanding."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

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
