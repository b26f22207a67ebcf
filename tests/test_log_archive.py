"""Archived task logs (engine/api/logarchive.py, engine/api/tasklogs.py) on a real database and blob store.

The compression and its cap alone; the trigger that queues an ended attempt's log; the archiver copying logs
from a worker's RPC listener (the worker's own log files and ``log.download`` answer) into the blob store,
marking a log the worker no longer has MISSING and giving up on a worker that never answers; the API reading
an ended attempt's log from its archive (pages, the end, search, download) with no worker at all, and saying
404 with a reason when neither the worker nor an archive has it; retention deleting the archives of the
instances it removes and only those. The whole path with real masters and workers, a worker killed for good
among them: tests/test_log_archive_e2e.py.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import gzip
import json
import os
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from aiohttp import web

from engine import config as config_mod
from engine.accounts.tokens import create_token, ensure_user
from engine.api import logarchive
from engine.api.logarchive import _CLAIM as _CLAIM_SQL
from engine.api.logarchive import LogArchiver, gzip_capped, truncation_notice
from engine.api.tasklogs import ArchivedLogs
from engine.states import TaskState
from engine.storage.blobs import DatabaseBlobStore
from engine.storage.jsoncodec import register_json
from engine.storage.retention import Retention
from engine.storage.task_logs import ArchiveState, archive_key, instance_prefix
from engine.worker.logfiles import LogFiles
from rpc import RpcClient
from rpc.messages import LogContents, LogDownload, LogDownloads
from rpc.server import RpcServer
from tests import tls
from tests.api_harness import in_process_api
from tests.helpers import TEST_SECRET, free_port, rpc_client
from tests.test_retention import OLD, _instance, _project

SUCCESS, RUNNING = 7, 1


async def _chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def _compress(cap: int, *parts: bytes) -> tuple[bytes, Any]:
    from engine.api.logarchive import Compressed

    seen = Compressed()
    out = b"".join([c async for c in gzip_capped(_chunks(*parts), cap, seen)])
    return gzip.decompress(out), seen


async def test_a_log_under_the_cap_is_archived_as_it_is() -> None:
    parts = [f"line {i}\n".encode() * 50 for i in range(100)]
    text, seen = await _compress(1 << 20, *parts)
    assert text == b"".join(parts) and seen.log_size == len(text) and not seen.truncated
    empty, seen = await _compress(0)
    assert empty == b"" and seen.log_size == 0


async def test_a_log_over_the_cap_is_cut_at_a_line_with_a_last_line_saying_so() -> None:
    parts = [b"".join(f"chunk {c} line {i}\n".encode() for i in range(100)) for c in range(20)]
    whole = b"".join(parts)
    cap = 10_000
    text, seen = await _compress(cap, *parts)
    kept, _, notice = text.rstrip(b"\n").rpartition(b"\n")
    kept += b"\n"
    assert seen.truncated and seen.log_size == len(kept) <= cap
    assert whole.startswith(kept) and len(kept) > cap - 100  # cut at the last line start within the cap
    assert notice.decode() == (
        f"[porpoise] log archive truncated: the last {len(whole) - len(kept)} bytes of the log were not archived"
        f" (api.log_archive_max_bytes = {cap})"
    )


# -- the queue ------------------------------------------------------------------------------------------------


async def _task(conn: asyncpg.Connection, state: int, host: str | None, log_path: str | None) -> tuple[int, int]:
    project = await _project(conn, f"p{await conn.fetchval('SELECT count(*) FROM project')}", None)
    instance = await _instance(conn, project, RUNNING, None, tasks=0)
    task = await conn.fetchval(
        "INSERT INTO task_instance (name, task_type, task_code, task_definition_version, workflow_instance_id,"
        " state, host, log_path) VALUES ('t', 'SHELL', 1, 1, $1, $2, $3, $4) RETURNING id",
        instance,
        state,
        host,
        log_path,
    )
    return instance, int(task)


async def _queued(conn: asyncpg.Connection) -> set[int]:
    return {int(r["task_instance_id"]) for r in await conn.fetch("SELECT task_instance_id FROM task_log_archive")}


async def test_an_attempt_is_queued_for_archiving_when_it_ends_with_a_log_on_a_worker(fresh_db: str) -> None:
    conn = await asyncpg.connect(fresh_db)
    try:
        _, running = await _task(conn, RUNNING, "w:1", "/l/1.log")
        _, ended = await _task(conn, SUCCESS, "w:1", "/l/2.log")  # ended as it was inserted
        _, never_ran = await _task(conn, 6, None, None)  # failed before reaching a worker
        assert await _queued(conn) == {ended}
        await conn.execute("UPDATE task_instance SET state = $2 WHERE id = $1", running, TaskState.KILL)
        await conn.execute("UPDATE task_instance SET state = $2 WHERE id = $1", ended, TaskState.FORCED_SUCCESS)  # once
        assert await _queued(conn) == {ended, running}
        row = await conn.fetchrow("SELECT * FROM task_log_archive WHERE task_instance_id = $1", running)
        assert row["state"] == ArchiveState.PENDING and row["blob_key"] is None
        assert never_ran not in await _queued(conn)
    finally:
        await conn.close()


# -- the archiver against a worker's log listener -------------------------------------------------------------


class LogListener:
    """A worker's ``log.download`` answer (engine/worker/server.py on_log_download) over its log directory, and
    with ``together`` its ``log.downloads`` (on_log_downloads: LogFiles.together); counts the calls of each."""

    def __init__(self, root: Path, together: bool = True) -> None:
        self.files = LogFiles(root)
        self.address = f"127.0.0.1:{free_port()}"
        self.runner: web.AppRunner | None = None
        self.together = together
        self.calls = {"download": 0, "downloads": 0}

    async def downloads(self, msg: LogDownloads) -> LogContents:
        self.calls["downloads"] += 1
        return LogContents(await self.files.together(msg.paths, msg.cap))

    async def download(self, msg: LogDownload) -> web.StreamResponse:
        self.calls["download"] += 1
        target = self.files.checked(msg.path)
        if not target.is_file():
            return web.json_response({"error": f"log {msg.path} does not exist"}, status=404)
        return web.FileResponse(target, headers={"Content-Type": "text/plain; charset=utf-8"})

    async def __aenter__(self) -> LogListener:
        app = web.Application()
        server = RpcServer(app, TEST_SECRET, require_client_cert=tls.ENABLED)
        server.register(LogDownload, self.download)
        if self.together:
            server.register(LogDownloads, self.downloads)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        host, port = self.address.split(":")
        await web.TCPSite(self.runner, host, int(port), ssl_context=tls.server_ssl()).start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.runner is not None
        await self.runner.cleanup()


def _archiver(pool: asyncpg.Pool, rpc: RpcClient, max_bytes: int = 1 << 20, max_tries: int = 2) -> LogArchiver:
    blobs = DatabaseBlobStore(pool)
    return LogArchiver(pool, rpc, blobs, interval=0.05, max_bytes=max_bytes, retry_seconds=0.0, max_tries=max_tries)


async def _blob_text(blobs: DatabaseBlobStore, key: str) -> bytes:
    return zlib.decompress(b"".join([c async for c in blobs.open(key)]), 31)


@pytest.mark.parametrize("together", [True, False], ids=["log.downloads", "a worker without it"])
async def test_the_archiver_copies_ended_logs_and_says_which_it_could_not(
    fresh_db: str, tmp_path: Path, together: bool
) -> None:
    """Small logs of a worker come in one log.downloads call (a missing one said so there), a larger one on its
    own; a worker of a release without log.downloads gives each log on its own, with the same outcome."""
    pool = await asyncpg.create_pool(fresh_db, min_size=1, max_size=4, init=register_json)
    rpc = rpc_client(5)
    try:
        async with LogListener(tmp_path, together) as worker:
            big = tmp_path / "1" / "big.log"
            big.parent.mkdir()
            big.write_bytes(b"".join(f"big line {i}\n".encode() for i in range(50_000)))
            small = tmp_path / "1" / "small.log"
            small.write_text("hello\nworld\n")
            async with pool.acquire() as conn:
                w1, t_big = await _task(conn, SUCCESS, worker.address, str(big))
                w2, t_small = await _task(conn, SUCCESS, worker.address, str(small))
                _, t_gone = await _task(conn, SUCCESS, worker.address, str(tmp_path / "1" / "removed.log"))
                _, t_dead = await _task(conn, SUCCESS, f"127.0.0.1:{free_port()}", str(small))
            archiver = _archiver(pool, rpc, max_bytes=100_000)
            assert await archiver.archive_once() == 4
            assert await archiver.archive_once() == 1  # the dead worker's, tried again at once (retry 0 s)
            assert await archiver.archive_once() == 0  # and given up after max_tries
            # together: the small one and the missing one in one call, the big one (600 KB) on its own
            assert worker.calls == ({"download": 1, "downloads": 1} if together else {"download": 3, "downloads": 0})
        rows = {r["task_instance_id"]: r for r in await pool.fetch("SELECT * FROM task_log_archive")}
        blobs = archiver.blobs
        assert rows[t_small]["state"] == ArchiveState.ARCHIVED and not rows[t_small]["truncated"]
        assert rows[t_small]["blob_key"] == archive_key(w2, t_small, 1)
        assert await _blob_text(blobs, rows[t_small]["blob_key"]) == b"hello\nworld\n"
        assert rows[t_big]["state"] == ArchiveState.ARCHIVED and rows[t_big]["truncated"]
        text = await _blob_text(blobs, archive_key(w1, t_big, 1))
        assert big.read_bytes().startswith(text.rsplit(b"\n[porpoise] log archive truncated", 1)[0])
        assert b"[porpoise] log archive truncated" in text.splitlines()[-1]
        assert rows[t_gone]["state"] == ArchiveState.MISSING
        assert rows[t_dead]["state"] == ArchiveState.FAILED and rows[t_dead]["tries"] == 2
        assert rows[t_dead]["reason"]
    finally:
        await rpc.close()
        await pool.close()


async def test_the_logs_of_a_pass_are_marked_in_one_statement_and_a_removed_instance_s_archive_goes(
    fresh_db: str, tmp_path: Path
) -> None:
    """The pass stores each log, then marks the stored ones ARCHIVED together; a log whose instance retention
    removed while it was stored has its archive deleted, and the others are marked all the same."""
    pool = await asyncpg.create_pool(fresh_db, min_size=1, max_size=4, init=register_json)
    rpc = rpc_client(5)
    try:
        async with LogListener(tmp_path) as worker:
            (tmp_path / "1").mkdir()
            paths = [tmp_path / "1" / f"{i}.log" for i in range(3)]
            for i, path in enumerate(paths):
                path.write_text(f"log {i}\n")
            async with pool.acquire() as conn:
                tasks = [await _task(conn, SUCCESS, worker.address, str(path)) for path in paths]
            archiver = _archiver(pool, rpc)
            removed_instance, removed_task = tasks[1]
            put = archiver.blobs.put
            marked_while_storing: list[int] = []

            async def put_then_remove(key: str, chunks: Any, **kw: Any) -> Any:
                stored = await put(key, chunks, **kw)
                marked_while_storing.append(
                    await pool.fetchval("SELECT count(*) FROM task_log_archive WHERE state = $1", ArchiveState.ARCHIVED)
                )
                if key == archive_key(removed_instance, removed_task, 1):  # retention, while it was stored
                    await pool.execute("DELETE FROM workflow_instance WHERE id = $1", removed_instance)
                return stored

            archiver.blobs.put = put_then_remove  # type: ignore[method-assign]
            assert await archiver.archive_once() == 3
        assert marked_while_storing == [0, 0, 0]  # marked at the end of the pass, not one by one
        rows = {r["task_instance_id"]: r for r in await pool.fetch("SELECT * FROM task_log_archive")}
        assert set(rows) == {tasks[0][1], tasks[2][1]}
        for i in (0, 2):
            instance, task = tasks[i]
            assert rows[task]["state"] == ArchiveState.ARCHIVED and rows[task]["blob_key"] == archive_key(
                instance, task, 1
            )
            assert rows[task]["log_size"] == len(f"log {i}\n") and len(rows[task]["sha256"]) == 64
            assert await _blob_text(archiver.blobs, archive_key(instance, task, 1)) == f"log {i}\n".encode()
        assert not await archiver.blobs.exists(archive_key(removed_instance, removed_task, 1))
    finally:
        await rpc.close()
        await pool.close()


# -- reading through the API ----------------------------------------------------------------------------------


@pytest.fixture
async def api_token(fresh_db: str) -> str:
    conn = await asyncpg.connect(fresh_db)
    try:
        return (await create_token(conn, await ensure_user(conn), "t"))[1]
    finally:
        await conn.close()


async def test_an_ended_attempt_s_log_is_read_from_its_archive_with_no_worker(
    fresh_db: str, api_token: str, tmp_path: Path
) -> None:
    pool = await asyncpg.create_pool(fresh_db, min_size=1, max_size=4, init=register_json)
    blobs = DatabaseBlobStore(pool)
    lines = [f"line {i} of the archived log" for i in range(3000)]
    gone = f"127.0.0.1:{free_port()}"  # a worker that is no more
    async with pool.acquire() as conn:
        instance, task = await _task(conn, SUCCESS, gone, "/nowhere/1-1.log")
        _, lost = await _task(conn, SUCCESS, gone, "/nowhere/2-1.log")
        _, running = await _task(conn, RUNNING, gone, "/nowhere/3-1.log")
        await conn.execute(
            "UPDATE task_log_archive SET state = $2, reason = 'gone from w' WHERE task_instance_id = $1",
            lost,
            int(ArchiveState.MISSING),
        )
    key = archive_key(instance, task, 1)
    data = ("\n".join(lines) + "\n").encode()
    stored = await blobs.put(key, _chunks(gzip.compress(data)))
    await pool.execute(
        f"UPDATE task_log_archive SET state = {int(ArchiveState.ARCHIVED)}, blob_key = $2, log_size = $3,"
        " stored_size = $4, sha256 = $5"
        " WHERE task_instance_id = $1",
        task,
        key,
        len(data),
        stored.size,
        stored.sha256,
    )
    # a truncated archive: the kept bytes (log_size) and its notice line after them
    _, cut = await _task(pool, SUCCESS, gone, "/nowhere/4-1.log")
    cut_key = archive_key(instance, cut, 1)
    kept, notice = data[:1000], truncation_notice(1000, len(data) - 1000)
    cut_stored = await blobs.put(cut_key, _chunks(gzip.compress(kept + notice)))
    await pool.execute(
        f"UPDATE task_log_archive SET state = {int(ArchiveState.ARCHIVED)}, blob_key = $2, log_size = $3,"
        " stored_size = $4, sha256 = $5, truncated = true WHERE task_instance_id = $1",
        cut, cut_key, len(kept), cut_stored.size, cut_stored.sha256,
    )  # fmt: skip
    archived = ArchivedLogs(blobs, str(tmp_path / "cache"), 1 << 20)

    def prepare(server: Any) -> None:
        server.archived_logs = archived

    async with in_process_api(fresh_db, ["rpc.timeout=2"], api_token, prepare) as (http, url):

        async def get(path: str, **params: Any) -> tuple[int, Any]:
            async with http.get(url + path, params={k: json.dumps(v) if isinstance(v, bool) else str(v)
                                                    for k, v in params.items()}) as resp:  # fmt: skip
                return resp.status, await (resp.json() if resp.content_type == "application/json" else resp.read())

        status, page = await get(f"/api/v1/tasks/{task}/log", skip=10, limit=5)
        assert status == 200, page
        assert page == {"lines": lines[10:15], "start": 10, "total": 3000, "next": 15, "complete": True}
        status, page = await get(f"/api/v1/tasks/{task}/log", limit=2, from_end=True)
        assert page["lines"] == lines[-2:] and page["start"] == 2998
        status, found = await get(f"/api/v1/tasks/{task}/log/search", q="LINE 2999 ")
        assert status == 200 and found["hits"] == [{"line": 2999, "text": lines[2999]}] and found["done"]
        status, body = await get(f"/api/v1/tasks/{task}/log/download")
        assert status == 200 and body == data
        status, body = await get(f"/api/v1/tasks/{cut}/log/download")
        assert status == 200 and body == kept + notice
        status, answer = await get(f"/api/v1/tasks/{lost}/log")
        assert status == 404 and "it was not archived (missing: gone from w)" in answer["error"]["message"], answer
        status, answer = await get(f"/api/v1/tasks/{lost}/log/download")
        assert status == 404 and "not archived" in answer["error"]["message"], answer
        status, answer = await get(f"/api/v1/tasks/{running}/log")
        assert status == 502 and "did not answer" in answer["error"]["message"], (
            answer
        )  # a running one: only its worker
    await archived.close()
    await pool.close()


# -- retention ------------------------------------------------------------------------------------------------


async def test_retention_deletes_the_archived_logs_of_the_instances_it_removes(fresh_db: str) -> None:
    pool = await asyncpg.create_pool(fresh_db, min_size=1, max_size=4, init=register_json)
    blobs = DatabaseBlobStore(pool)
    try:
        async with pool.acquire() as conn:
            project = await _project(conn, "p", None)
            old = await _instance(conn, project, SUCCESS, OLD)
            young = await _instance(conn, project, SUCCESS, dt.timedelta(days=1))
        keys = {}
        for instance in (old, young):
            for task in (1, 2):
                keys[instance, task] = archive_key(instance, task, 1)
                await blobs.put(keys[instance, task], _chunks(gzip.compress(b"x\n")))
        removed = await Retention(pool, 90, 0, batch=1, blobs=blobs).run()
        assert removed.instances == 1 and removed.log_archives == 2
        for (instance, _), key in keys.items():
            assert await blobs.exists(key) == (instance == young), key
        assert instance_prefix(old) != instance_prefix(young)
    finally:
        await pool.close()


def test_the_archive_settings_are_checked() -> None:
    with pytest.raises(config_mod.ConfigError, match=r"api\.log_cache_dir"):
        config_mod.load(overrides=["api.log_cache_dir=relative/dir"], environ={})


async def test_an_archive_that_compressed_a_thousandfold_is_read_a_megabyte_at_a_time(
    fresh_db: str, tmp_path: Path
) -> None:
    """One stored chunk of a log of one repeated line holds a gigabyte: reading it never holds more than
    INFLATE_BYTES of it at once, in the download's stream as in the cache's copy."""
    from engine.api.tasklogs import INFLATE_BYTES

    pool = await asyncpg.create_pool(fresh_db, min_size=1, max_size=2, init=register_json)
    blobs = DatabaseBlobStore(pool)
    size = 64 * INFLATE_BYTES + 5
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    data = b"".join(comp.compress(b"y\n" * (INFLATE_BYTES // 2)) for _ in range(64)) + comp.compress(b"tail\n")
    data += comp.flush()
    stored = await blobs.put("task-logs/1/1-1.log.gz", _chunks(data))
    assert stored.size < size // 100
    cache = ArchivedLogs(blobs, str(tmp_path / "cache"), 1 << 30)
    try:
        pieces = [len(p) async for p in cache.stream(stored.key)]
        assert sum(pieces) == size and max(pieces) <= INFLATE_BYTES
        path = Path(await cache.local(stored.key, stored.sha256))
        assert await asyncio.to_thread(os.path.getsize, path) == size
    finally:
        await cache.close()
        await pool.close()


async def test_a_backlog_is_archived_a_share_of_the_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """After each full pass (a backlog) the archiver waits so that it works ``duty`` of the time: the tasks being
    scheduled keep the rest of the machine; after a pass that was not full it waits its interval."""
    clock = [100.0]
    sleeps: list[float] = []
    passes = iter([(32, 0.05), (32, 2.0), (5, 0.1)])

    async def archive_once() -> int:
        claimed, cpu = next(passes)
        clock[0] += cpu  # the time the pass took
        return claimed

    async def sleep(seconds: float) -> None:
        sleeps.append(round(seconds, 6))
        if len(sleeps) == 3:
            raise asyncio.CancelledError

    archiver = LogArchiver(None, None, None, interval=1.0, max_bytes=0, retry_seconds=1, max_tries=1, duty=0.25)  # type: ignore[arg-type]
    archiver.archive_once = archive_once  # type: ignore[method-assign]
    monkeypatch.setattr(logarchive.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(logarchive.asyncio, "sleep", sleep)
    with pytest.raises(asyncio.CancelledError):
        await archiver._run()
    # 0.05 s of work, 0.15 s of rest (a quarter of the time); 2 s of work, at most 0.25 s of rest; then the interval
    assert sleeps == [0.15, 0.25, 1.0]


async def test_a_worker_that_does_not_answer_holds_up_no_other_worker_s_logs(
    pool: asyncpg.Pool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hung worker is asked once per pass (not once more per log): its rows are tried again later, and the
    logs of the other worker in the same pass are archived."""
    monkeypatch.setattr(logarchive, "IDLE_TIMEOUT", 0.5)
    rpc = rpc_client(5)
    hung = asyncio.Event()
    try:
        stuck = LogListener(tmp_path / "b")

        async def never(msg: LogDownloads) -> LogContents:
            stuck.calls["downloads"] += 1
            await hung.wait()
            raise AssertionError("unreachable")

        stuck.downloads = never  # type: ignore[method-assign]
        async with LogListener(tmp_path / "a") as healthy, stuck:
            (tmp_path / "a" / "1").mkdir(parents=True)
            good = tmp_path / "a" / "1" / "good.log"
            good.write_text("fine\n")
            async with pool.acquire() as conn:
                rows = [await _task(conn, SUCCESS, stuck.address, str(tmp_path / "b" / f"{i}.log")) for i in range(4)]
                _, t_good = await _task(conn, SUCCESS, healthy.address, str(good))
            archiver = _archiver(pool, rpc, max_tries=3)
            assert await archiver.archive_once() == 5
            assert stuck.calls == {"download": 0, "downloads": 1}  # one call, not one more per log
            states = {r["task_instance_id"]: r for r in await pool.fetch("SELECT * FROM task_log_archive")}
            assert states[t_good]["state"] == ArchiveState.ARCHIVED
            assert all(states[t]["state"] == ArchiveState.PENDING and states[t]["reason"] for _, t in rows)
            hung.set()
    finally:
        await rpc.close()


async def test_an_archiver_whose_claim_was_taken_again_marks_and_deletes_nothing(
    pool: asyncpg.Pool, tmp_path: Path
) -> None:
    """A pass slower than its lease: another archiver claims the row again and archives it; the first one's
    marks are fenced off (the row's tries moved), and the archive under the shared key stays."""
    rpc = rpc_client(5)
    try:
        async with LogListener(tmp_path) as worker:
            (tmp_path / "1").mkdir()
            path = tmp_path / "1" / "x.log"
            path.write_text("once\n")
            async with pool.acquire() as conn:
                wi, ti = await _task(conn, SUCCESS, worker.address, str(path))
            first, second = _archiver(pool, rpc), _archiver(pool, rpc)
            (row,) = await pool.fetch(_CLAIM_SQL, 32, 60.0, 3600.0, int(ArchiveState.PENDING))
            stored = await first._archive(row, b"once\n")
            assert stored is not None
            await pool.execute("UPDATE task_log_archive SET next_try = now() WHERE task_instance_id = $1", ti)
            assert await second.archive_once() == 1  # the lease ended: claimed again and archived
            await pool.execute("UPDATE task_log_archive SET state = $2 WHERE task_instance_id = $1", ti,
                               int(ArchiveState.PENDING))  # fmt: skip
            await first._archived([(row, stored)])  # the first pass ends late: fenced off
            (after,) = await pool.fetch("SELECT state, tries FROM task_log_archive WHERE task_instance_id = $1", ti)
            assert (after["state"], after["tries"]) == (ArchiveState.PENDING, 2)
            assert await first.blobs.exists(archive_key(wi, ti, 1))
    finally:
        await rpc.close()
