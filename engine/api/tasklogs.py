"""Where the API reads a task's log from: the worker while the attempt runs, its archive once it ended.

An ended attempt whose log was archived (engine/api/logarchive.py) is read from the archive, whether or not
its worker still lives or still has the file; one not archived (yet, or never: see ``ArchiveState``) from
its worker, as a running one. Paging and search of an archive run on a local copy: the first read of an
archived log decompresses it into this API server's cache directory (``api.log_cache_dir``, least recently
used copies dropped past ``api.log_cache_bytes``), where the worker's own line index pages it
(engine/worker/logfiles.py); a download streams the archive through decompressed, without the cache.
"""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
import tempfile
import zlib
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from core import logs
from engine.api.routing import ApiError
from engine.states import TaskState
from engine.storage.blobs import BlobError, BlobStore
from engine.storage.task_logs import ArchiveState
from engine.worker.logfiles import LogFiles
from rpc.errors import BadRequest, RpcError
from rpc.messages import LogHits, LogLines, LogRange, LogSearch

log = logs.get(__name__)

WORKER_READ_TIMEOUT = 30.0
T = TypeVar("T")
#: bytes decompressed at a time: a log of one repeated line compresses a thousand times, and one stored chunk
#: must not become a gigabyte in memory
INFLATE_BYTES = 1 << 20


def _inflate(gz: Any, data: bytes) -> tuple[bytes, bytes]:
    """At most INFLATE_BYTES of ``data`` decompressed, and the input not consumed yet."""
    out = gz.decompress(data, INFLATE_BYTES)
    return out, gz.unconsumed_tail


class ArchivedLogs:
    """Decompressed local copies of archived logs, named by their content hash, least recently used
    dropped past ``max_bytes`` (the newest is always kept)."""

    def __init__(self, blobs: BlobStore, cache_dir: str = "", max_bytes: int = 1 << 30) -> None:
        self.blobs = blobs
        self._own = not cache_dir
        self.root = Path(cache_dir or tempfile.mkdtemp(prefix="porpoise-log-cache-"))
        self.root.mkdir(parents=True, exist_ok=True)
        self.files = LogFiles(self.root)
        self.max_bytes = max_bytes
        self._sizes: OrderedDict[str, int] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}

    async def local(self, key: str, sha256: str) -> str:
        """The path of the archive's decompressed copy (made now when missing)."""
        name = self._name(sha256)
        if name in self._sizes:
            self._sizes.move_to_end(name)
            return str(self.root / name)
        lock = self._locks.setdefault(name, asyncio.Lock())
        try:
            async with lock:
                if name not in self._sizes:
                    self._sizes[name] = await self._fetch(key, self.root / name)
                    await self._evict()
        finally:
            self._locks.pop(name, None)
        return str(self.root / name)

    def forget(self, sha256: str) -> None:
        """The copy is no more (removed from under the cache): the next ``local`` makes it again."""
        self._sizes.pop(self._name(sha256), None)

    @staticmethod
    def _name(sha256: str) -> str:
        return f"{sha256[:40]}.log"

    async def _fetch(self, key: str, target: Path) -> int:
        tmp = target.with_suffix(".part")
        fh = await asyncio.to_thread(open, tmp, "wb")
        done = False
        try:
            async for data in self.stream(key):
                await asyncio.to_thread(fh.write, data)
            done = True
        finally:
            await asyncio.to_thread(fh.close)
            if not done:
                await asyncio.to_thread(tmp.unlink, True)
        size = (await asyncio.to_thread(tmp.stat)).st_size
        await asyncio.to_thread(tmp.replace, target)
        return size

    async def _evict(self) -> None:
        while len(self._sizes) > 1 and sum(self._sizes.values()) > self.max_bytes:
            name, _ = self._sizes.popitem(last=False)
            await asyncio.to_thread((self.root / name).unlink, True)

    async def stream(self, key: str) -> AsyncIterator[bytes]:
        """The archived log decompressed, at most INFLATE_BYTES at a time (however well a log compressed)."""
        gz = zlib.decompressobj(31)
        try:
            async for chunk in self.blobs.open(key):
                data = chunk
                while True:
                    out, data = await asyncio.to_thread(_inflate, gz, data)
                    if out:
                        yield out
                    if not data and len(out) < INFLATE_BYTES:
                        break
        except zlib.error as exc:
            raise BlobError(f"{key}: the archive is not a gzip stream: {exc}") from exc
        if not gz.eof:
            raise BlobError(f"{key}: the archive ends before its gzip stream does")

    async def close(self) -> None:
        if self._own:
            await asyncio.to_thread(shutil.rmtree, self.root, True)


@dataclass(frozen=True)
class Archive:
    key: str
    sha256: str
    #: bytes of the log the archive kept; a truncated archive holds its notice line after them
    log_size: int
    truncated: bool = False


async def archive_of(api: Any, row: Any) -> tuple[Archive | None, str]:
    """The ended attempt's archive, else None and why there is none (for error messages)."""
    if not TaskState(row["state"]).finished or api.archived_logs is None:  # None: a server not started (tests)
        return None, ""
    arch = await api.db.fetchrow(
        "SELECT state, blob_key, sha256, log_size, truncated, reason FROM task_log_archive WHERE task_instance_id = $1",
        row["id"],
    )
    if arch is None:
        return None, "it was not archived"
    state = ArchiveState(arch["state"])
    if state is ArchiveState.ARCHIVED:
        return Archive(arch["blob_key"], arch["sha256"], int(arch["log_size"]), bool(arch["truncated"])), ""
    if state is ArchiveState.PENDING:
        return None, "it is not archived yet"
    return None, f"it was not archived ({state.name.lower()}: {arch['reason'] or 'no reason recorded'})"


def worker_source(row: Any) -> tuple[str, str]:
    if not row["host"] or not row["log_path"]:
        raise ApiError(404, f"task instance {row['id']} has no log yet (state {TaskState(row['state']).name})")
    return row["host"], row["log_path"]


def worker_error(row: Any, host: str, exc: RpcError, why: str) -> ApiError:
    """The answer for a worker that could not give the log; ``why``: why no archive serves it instead."""
    finished = TaskState(row["state"]).finished
    if isinstance(exc, BadRequest) and exc.status == 404:
        return ApiError(404, f"the log is gone from worker {host}" + (f" and {why}" if why else ""))
    if finished and why:
        # neither the worker nor an archive has it: as far as the caller can tell, it does not exist
        return ApiError(404, f"worker {host} that ran the task is unreachable ({exc}) and {why}")
    return ApiError(502, f"worker {host} that ran the task did not answer: {exc}")


async def _on_copy(cache: ArchivedLogs, row: Any, archive: Archive, read: Callable[[str], Awaitable[T]]) -> T:
    """``read`` run on the archive's local copy; a copy dropped from the cache meanwhile is made again."""
    for again in (True, False):
        try:
            return await read(await cache.local(archive.key, archive.sha256))
        except BlobError as exc:
            log.warning("archived task log unreadable", task_instance_id=row["id"], error=str(exc))
            raise ApiError(502, f"the archived log of task instance {row['id']} could not be read: {exc}") from exc
        except OSError as exc:  # the cache directory (full, or not writable)
            log.warning("archived task log not copied", task_instance_id=row["id"], error=str(exc))
            raise ApiError(503, f"this API server could not keep a copy of the archived log: {exc}") from exc
        except BadRequest as exc:
            if exc.status != 404 or not again:
                raise ApiError(400 if exc.status == 400 else 503, str(exc)) from exc
            cache.forget(archive.sha256)  # the copy was removed between its making and its reading
    raise AssertionError("unreachable")


async def read_lines(api: Any, row: Any, skip: int, limit: int, from_end: bool = False) -> LogLines:
    archive, why = await archive_of(api, row)
    if archive is not None:
        cache: ArchivedLogs = api.archived_logs
        lines, start, total = await _on_copy(
            cache, row, archive, lambda path: cache.files.range(path, skip, limit, from_end)
        )
        return LogLines(lines=lines, next=start + len(lines), complete=True, start=start, total=total)
    host, path = worker_source(row)
    try:
        page = await api.rpc.call(host, LogRange(path, skip, limit, from_end))
    except RpcError as exc:
        raise worker_error(row, host, exc, why) from exc
    # the worker answers complete=True for any file nobody writes; a task still active has more to come
    return dataclasses.replace(page, complete=page.complete and TaskState(row["state"]).finished)


async def search(api: Any, row: Any, needle: str, after: int, limit: int) -> LogHits:
    archive, why = await archive_of(api, row)
    if archive is not None:
        cache: ArchivedLogs = api.archived_logs
        found = await _on_copy(cache, row, archive, lambda path: cache.files.search(path, needle, after, limit))
        hits, nxt, done, total = found
        return LogHits(hits=hits, next=nxt, done=done, total=total)
    host, path = worker_source(row)
    try:
        return await api.rpc.call(host, LogSearch(path, needle, after, limit), timeout=WORKER_READ_TIMEOUT)
    except RpcError as exc:
        raise worker_error(row, host, exc, why) from exc
