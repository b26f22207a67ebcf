"""Units of the live-update hub (engine/api/live.py) and the UI file server (engine/api/static.py)."""

from __future__ import annotations

from pathlib import Path

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from engine.api.live import Change, LiveHub, parse
from engine.api.routing import errors_middleware
from engine.api.static import IMMUTABLE, REVALIDATE, UiFiles


def test_parse_notifications() -> None:
    assert parse("w,12,1") == Change("instance", 12, "RUNNING_EXECUTION", 12)
    assert parse("t,40,12,7") == Change("task", 40, "SUCCESS", 12)
    assert parse("t,40,12,999") is None  # unknown state code
    assert parse("x,1") is None
    assert parse("w,abc,1") is None


async def test_history_resume_points() -> None:
    hub = LiveHub("postgresql://unused", 0.01, 1.0, history=3)
    assert hub.resume_point(hub.event_id(0)) == 0
    for n in range(5):
        hub._publish([Change("instance", n, "SUCCESS", n)])
    assert hub.seq == 5
    # batches 3, 4, 5 are kept: resuming after 2, 3 or 4 replays; after 1 the batch 2 is gone
    assert hub.resume_point(hub.event_id(2)) == 2
    assert [s for s, _ in hub.since(2)] == [3, 4, 5]
    assert hub.resume_point(hub.event_id(1)) is None
    assert hub.behind(1) and not hub.behind(2)
    assert hub.resume_point(hub.event_id(6)) is None  # from the future
    assert hub.resume_point("deadbeef.3") is None  # another server's id
    assert hub.resume_point(f"{hub.boot}.x") is None


async def test_notifications_are_batched_latest_state_wins() -> None:
    hub = LiveHub("postgresql://unused", 0.01, 1.0, history=10)
    hub._on_notify(None, 0, "porpoise_state", "t,1,9,1")
    hub._on_notify(None, 0, "porpoise_state", "t,1,9,7")
    hub._on_notify(None, 0, "porpoise_state", "w,9,1")
    assert list(hub._pending.values()) == [
        Change("task", 1, "SUCCESS", 9),
        Change("instance", 9, "RUNNING_EXECUTION", 9),
    ]


async def _client(dist: Path) -> TestClient:
    app = web.Application(middlewares=[errors_middleware])
    UiFiles(dist).add_routes(app)
    client = TestClient(TestServer(app))
    await client.start_server()
    return client


async def test_ui_files_cache_policy_and_app_routes(tmp_path: Path) -> None:
    (tmp_path / "assets").mkdir()
    (tmp_path / "index.html").write_text("<!doctype html><title>app</title>")
    (tmp_path / "assets" / "index-abc123.js").write_text("console.log(1)")
    (tmp_path / "favicon.svg").write_text("<svg/>")
    (tmp_path.parent / "secret.txt").write_text("no")
    client = await _client(tmp_path)
    try:
        for path in ("/", "/instances/12", "/workflows/3/edit"):
            r = await client.get(path)
            assert r.status == 200 and "<title>app</title>" in await r.text(), path
            assert r.headers["Cache-Control"] == REVALIDATE
        r = await client.get("/assets/index-abc123.js")
        assert r.status == 200 and r.headers["Cache-Control"] == IMMUTABLE
        r = await client.get("/favicon.svg")
        assert r.status == 200 and r.headers["Cache-Control"] == REVALIDATE
        r = await client.get("/assets/index-old.js")  # a stale page asking for a previous build's file
        assert r.status == 404 and "reload" in (await r.json())["error"]["message"]
        assert UiFiles(tmp_path)._file("../secret.txt") is None  # never outside the build
        assert UiFiles(tmp_path)._file("assets/../index.html") == (tmp_path / "index.html").resolve()
        r = await client.get("/api/v1/nothing")
        assert r.status == 404 and "no API endpoint" in (await r.json())["error"]["message"]
    finally:
        await client.close()


async def test_ui_not_built_says_how(tmp_path: Path) -> None:
    client = await _client(tmp_path / "dist")
    try:
        r = await client.get("/instances")
        assert r.status == 404
        text = await r.text()
        assert "make install" in text and "/docs" in text
    finally:
        await client.close()
