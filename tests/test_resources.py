"""The resource center's API (engine/api/resources.py, engine/resources/): uploads make versions, downloads
stream them back, restores copy an old one, limits refuse and store nothing, workflow versions pin the files
their tasks name and a file in use cannot be deleted. The real API stack on a real PostgreSQL."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import os
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import asyncpg
import pytest

from engine.accounts.tokens import create_token
from tests.api_harness import in_process_api
from tests.helpers import eventually
from tests.test_blobs import moto_s3  # noqa: F401 (fixture)

P = "/api/v1/projects/res"


@pytest.fixture
async def api(fresh_db: str, request: pytest.FixtureRequest) -> AsyncIterator[tuple[aiohttp.ClientSession, str, str]]:
    overrides = getattr(request, "param", [])
    conn = await asyncpg.connect(fresh_db)
    try:
        uid = await conn.fetchval("INSERT INTO users (user_name, user_type) VALUES ('root_admin', 0) RETURNING id")
        token = (await create_token(conn, uid, "t"))[1]
    finally:
        await conn.close()
    async with in_process_api(fresh_db, overrides, token) as (session, base):
        status, answer = await _json(session, "POST", f"{base}/api/v1/projects", {"name": "res"})
        assert status in (200, 201), answer
        yield session, base, fresh_db


async def _json(session: aiohttp.ClientSession, method: str, url: str, body: Any = None) -> tuple[int, Any]:
    async with session.request(method, url, json=body) as resp:
        return resp.status, await resp.json()


async def _upload(session: aiohttp.ClientSession, base: str, path: str, data: bytes) -> tuple[int, Any]:
    headers = {"Content-Type": "application/octet-stream"}
    body = io.BytesIO(data)  # aiohttp warns of large raw bytes bodies
    async with session.post(f"{base}{P}/resources", params={"path": path}, data=body, headers=headers) as resp:
        return resp.status, await resp.json()


async def _download(session: aiohttp.ClientSession, base: str, path: str, version: int | None = None) -> bytes:
    params: dict[str, Any] = {"path": path, **({"version": version} if version else {})}
    async with session.get(f"{base}{P}/resources/content", params=params) as resp:
        assert resp.status == 200, await resp.text()
        body = await resp.read()
        assert resp.headers["X-Resource-Sha256"] == hashlib.sha256(body).hexdigest()
        return body


async def test_uploads_make_versions_and_every_version_downloads_and_restores(
    api: tuple[aiohttp.ClientSession, str, str],
) -> None:
    session, base, _ = api
    status, v1 = await _upload(session, base, "etl/clean.py", b"print('one')\n")
    assert status == 201, v1
    assert (v1["path"], v1["version"], v1["size"]) == ("etl/clean.py", 1, 13)
    assert v1["sha256"] == hashlib.sha256(b"print('one')\n").hexdigest()
    status, v2 = await _upload(session, base, "etl/clean.py", b"print('two')\n")
    assert (status, v2["version"]) == (201, 2)
    assert await _download(session, base, "etl/clean.py") == b"print('two')\n"
    assert await _download(session, base, "etl/clean.py", 1) == b"print('one')\n"
    status, restored = await _json(
        session, "POST", f"{base}{P}/resources/restore", {"path": "etl/clean.py", "version": 1}
    )
    assert status == 201, restored
    assert (restored["version"], restored["restored_from"], restored["sha256"]) == (3, 1, v1["sha256"])
    assert await _download(session, base, "etl/clean.py") == b"print('one')\n"
    status, listed = await _json(session, "GET", f"{base}{P}/resources/versions?path=etl/clean.py")
    assert [v["version"] for v in listed["versions"]] == [3, 2, 1]
    # the tree: the top holds folder etl, etl holds the file (its newest version, with a count)
    await _upload(session, base, "top.txt", b"x")
    status, top = await _json(session, "GET", f"{base}{P}/resources")
    assert status == 200
    assert [f["name"] for f in top["folders"]] == ["etl"] and [f["name"] for f in top["files"]] == ["top.txt"]
    assert top["usage"] == 13 + 13 + 1  # the restore shares version 1's content
    status, etl = await _json(session, "GET", f"{base}{P}/resources?folder=etl")
    assert [(f["name"], f["version"], f["versions"]) for f in etl["files"]] == [("clean.py", 3, 3)]
    status, missing = await _json(session, "GET", f"{base}{P}/resources/content?path=etl/clean.py&version=9")
    assert status == 404 and "version 9" in missing["error"]["message"]


async def test_a_multipart_upload_names_the_file_after_its_part(api: tuple[aiohttp.ClientSession, str, str]) -> None:
    session, base, _ = api
    form = aiohttp.FormData()
    form.add_field("file", b"SELECT 1;\n", filename="q.sql", content_type="application/sql")
    async with session.post(f"{base}{P}/resources?folder=sql/daily", data=form) as resp:
        answer = await resp.json()
        assert resp.status == 201, answer
    assert answer["path"] == "sql/daily/q.sql"
    assert await _download(session, base, "sql/daily/q.sql") == b"SELECT 1;\n"


@pytest.mark.parametrize("path", ["../etc/passwd", "/abs", "a//b", "a/./b", "x" * 600])
async def test_bad_paths_are_a_400_at_the_path(api: tuple[aiohttp.ClientSession, str, str], path: str) -> None:
    session, base, _ = api
    status, answer = await _upload(session, base, path, b"x")
    assert status == 400 and answer["error"]["field"] == "query.path", answer


@pytest.mark.parametrize(
    "api", [["storage.max_file_bytes=3000000", "storage.max_project_bytes=5000000"]], indirect=True
)
async def test_limits_refuse_with_a_clear_error_and_store_nothing(api: tuple[aiohttp.ClientSession, str, str]) -> None:
    session, base, dsn = api
    status, answer = await _upload(session, base, "big.bin", os.urandom(3_000_001))
    assert status == 413, answer
    assert "larger than the limit of 3000000 bytes a file" in answer["error"]["message"]
    assert (await _upload(session, base, "a.bin", os.urandom(3_000_000)))[0] == 201
    status, answer = await _upload(session, base, "b.bin", os.urandom(2_500_000))
    assert status == 413 and "past its limit of 5000000 bytes" in answer["error"]["message"], answer
    conn = await asyncpg.connect(dsn)
    try:
        assert await conn.fetchval("SELECT count(*) FROM blob") == 1
        assert await conn.fetchval("SELECT array_agg(full_name) FROM resource") == ["a.bin"]
    finally:
        await conn.close()


def _workflow(name: str, params: dict[str, Any], task_type: str = "SHELL") -> dict[str, Any]:
    return {"name": name, "project": "res", "tasks": [{"name": "t", "type": task_type, "params": params}]}


async def test_workflow_versions_pin_the_files_they_use_and_a_used_file_cannot_be_deleted(
    api: tuple[aiohttp.ClientSession, str, str],
) -> None:
    session, base, dsn = api
    await _upload(session, base, "etl/run.sh", b"echo 1\n")
    await _upload(session, base, "etl/run.sh", b"echo 2\n")
    await _upload(session, base, "etl/lib.py", b"X = 1\n")
    # a file not in the resource center is a 400 at its field
    status, answer = await _json(
        session,
        "POST",
        f"{base}/api/v1/workflows",
        _workflow("w0", {"rawScript": "true", "resourceList": [{"resourceName": "nope.sh"}]}),
    )
    assert status == 400 and answer["error"]["field"] == "tasks[0].params.resourceList[0]", answer
    params = {
        "rawScript": "bash etl/run.sh",
        "resourceList": [{"resourceName": "etl/run.sh"}, {"resourceName": "/etl/lib.py", "version": "latest"}],
    }
    status, saved = await _json(session, "POST", f"{base}/api/v1/workflows", _workflow("w1", params))
    assert status in (200, 201), saved
    conn = await asyncpg.connect(dsn)
    try:
        stored = await conn.fetchval("SELECT task_params FROM task_definition_log WHERE name = 't'")
    finally:
        await conn.close()
    assert json.loads(stored)["resourceList"] == [
        {"resourceName": "etl/run.sh", "version": 2},  # pinned to the newest at save
        {"resourceName": "etl/lib.py", "version": "latest"},
    ]
    status, used = await _json(session, "GET", f"{base}{P}/resources/references?path=etl")
    assert {(u["workflow"], u["path"], u["version"]) for u in used["references"]} == {
        ("w1", "etl/run.sh", 2),
        ("w1", "etl/lib.py", "latest"),
    }
    for path in ("etl/run.sh", "etl"):
        status, refused = await _json(session, "DELETE", f"{base}{P}/resources?path={path}")
        assert status == 409 and "w1 (version 1)" in refused["error"]["message"], refused
        assert refused["error"]["details"][0]["workflow"] == "w1"
    # a 3.1-style {"id": n} entry pins the version with that id
    status, versions = await _json(session, "GET", f"{base}{P}/resources/versions?path=etl/run.sh")
    first = versions["versions"][-1]["id"]
    await _json(
        session,
        "PUT",
        f"{base}/api/v1/workflows/{saved['code']}",
        _workflow("w1", {"rawScript": "true", "resourceList": [{"id": first}]}),
    )
    conn = await asyncpg.connect(dsn)
    try:
        latest = await conn.fetchval("SELECT task_params FROM task_definition_log WHERE name = 't' AND version = 2")
    finally:
        await conn.close()
    assert json.loads(latest)["resourceList"] == [{"resourceName": "etl/run.sh", "version": 1}]
    # once the workflow is gone, so are its references, and the files can go
    assert (await _json(session, "DELETE", f"{base}/api/v1/workflows/{saved['code']}"))[0] == 200
    status, deleted = await _json(session, "DELETE", f"{base}{P}/resources?path=etl")
    assert status == 200 and deleted == {"deleted": ["etl/lib.py", "etl/run.sh"], "versions": 3}, deleted
    conn = await asyncpg.connect(dsn)
    try:
        assert await conn.fetchval("SELECT count(*) FROM blob") == 0
    finally:
        await conn.close()


async def test_changes_are_audited(api: tuple[aiohttp.ClientSession, str, str]) -> None:
    session, base, _ = api
    await _upload(session, base, "a.txt", b"a")
    await _json(session, "POST", f"{base}{P}/resources/restore", {"path": "a.txt", "version": 1})
    await _json(session, "DELETE", f"{base}{P}/resources?path=a.txt")
    status, audit = await _json(session, "GET", f"{base}/api/v1/audit?resource_type=resources")
    assert status == 200
    assert [e["action"] for e in audit["items"]] == ["delete", "update", "create"]


async def test_deleting_a_project_removes_its_files_contents(api: tuple[aiohttp.ClientSession, str, str]) -> None:
    session, base, dsn = api
    await _upload(session, base, "a.txt", b"a")
    await _upload(session, base, "b/c.txt", b"c")
    assert (await _json(session, "DELETE", f"{base}{P}"))[0] == 200
    conn = await asyncpg.connect(dsn)
    try:
        assert await conn.fetchval("SELECT count(*) FROM resource") == 0
        assert await conn.fetchval("SELECT count(*) FROM blob") == 0
    finally:
        await conn.close()


def test_the_upload_is_documented_with_its_streamed_body() -> None:
    from engine.api.openapi import docs_page, document
    from engine.api.server import ROUTES

    doc = document(ROUTES)
    body = doc["paths"]["/api/v1/projects/{name}/resources"]["post"]["requestBody"]["content"]
    assert set(body) == {"application/octet-stream", "multipart/form-data"}
    assert "application/octet-stream, multipart/form-data" in docs_page(doc)  # the docs page lists it too


@pytest.fixture
def s3_api(fresh_db: str, moto_s3: str) -> tuple[str, list[str]]:  # noqa: F811 (the imported fixture)
    """A fresh database and the settings of an API storing contents in moto's S3 (its bucket made)."""
    import boto3

    bucket = f"res-{uuid.uuid4().hex[:8]}"
    boto3.client(
        "s3", endpoint_url=moto_s3, aws_access_key_id="t", aws_secret_access_key="t", region_name="us-east-1"
    ).create_bucket(Bucket=bucket)
    settings = {"type": "s3", "s3_bucket": bucket, "s3_endpoint": moto_s3, "s3_access_key_id": "t",
                "s3_secret_access_key": "t"}  # fmt: skip
    return fresh_db, [f"storage.{k}={v}" for k, v in settings.items()]


async def test_files_round_trip_through_an_s3_store(s3_api: tuple[str, list[str]]) -> None:
    dsn, overrides = s3_api
    conn = await asyncpg.connect(dsn)
    try:
        uid = await conn.fetchval("INSERT INTO users (user_name, user_type) VALUES ('root_admin', 0) RETURNING id")
        token = (await create_token(conn, uid, "t"))[1]
    finally:
        await conn.close()
    async with in_process_api(dsn, overrides, token) as (session, base):
        await _json(session, "POST", f"{base}/api/v1/projects", {"name": "res"})
        data = os.urandom(9 << 20)  # two multipart parts
        status, stored = await _upload(session, base, "big/data.bin", data)
        assert status == 201 and stored["sha256"] == hashlib.sha256(data).hexdigest(), stored
        assert await _download(session, base, "big/data.bin") == data
        assert (await _json(session, "DELETE", f"{base}{P}/resources?path=big"))[0] == 200
    conn = await asyncpg.connect(dsn)
    try:
        assert await conn.fetchval("SELECT count(*) FROM blob") == 0  # nothing went to the database store
    finally:
        await conn.close()


@pytest.mark.parametrize("api", [["storage.upload_idle_timeout=5", "storage.max_concurrent_uploads=1"]], indirect=True)
async def test_a_stalled_upload_is_abandoned_and_uploads_beyond_the_cap_wait_their_turn(
    api: tuple[aiohttp.ClientSession, str, str],
) -> None:
    # a client that sends a few bytes and then nothing would hold a store connection for ever: it is cut
    # after the idle timeout, stores nothing, and while it holds the only upload slot others get 503
    session, base, _ = api
    stall = asyncio.Event()

    async def trickle() -> AsyncIterator[bytes]:
        yield b"0123456789"
        await stall.wait()

    async def stalled() -> int | None:
        headers = {"Content-Type": "application/octet-stream"}
        while True:  # until it holds the slot: a probe being stored when it arrives refuses it (503)
            try:
                async with session.post(
                    f"{base}{P}/resources", params={"path": "stalled.bin"}, data=trickle(), headers=headers
                ) as resp:
                    if resp.status != 503:
                        return resp.status
            except aiohttp.ClientError:
                return None  # the server answered and closed while the body was still being sent

    sending = asyncio.ensure_future(stalled())
    try:

        async def refused() -> bool:
            status, answer = await _upload(session, base, "probe.bin", b"x")
            return status == 503 and "too many uploads" in answer["error"]["message"]

        await eventually(refused, 30, "an upload refused while the stalled one holds the only slot")
        assert await asyncio.wait_for(sending, 30) in (408, None)
    finally:
        stall.set()
        await asyncio.wait_for(sending, 30)
    status, answer = await _upload(session, base, "after.bin", b"fine")
    assert status == 201, answer
    status, listing = await _json(session, "GET", f"{base}{P}/resources")
    assert "stalled.bin" not in {f["name"] for f in listing["files"]}, listing
