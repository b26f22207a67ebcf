"""Task logs that outlive their worker: the archiver copies each ended attempt's log into the blob store.

Who writes: the API server. Workers have no database connection (they hold only what a dispatch sends
them, docs/SECURITY.md), and the API already reads logs from workers (``log.download``, api -> worker), so
the archiver pulls the same way with the same credentials: no new direction of trust, and the blob store's
credentials (the database, or S3 keys) stay on the API and master hosts. A pass reads the small logs of each
worker's rows in one ``log.downloads`` call (each whole, within a budget per answer; a worker without that
call, or one that fails it, gives each log with ``log.download`` as before) and the larger ones streamed.
A worker that does not answer is asked once per pass; its rows are tried again later. Marks are fenced on the
claim (PENDING at the tries claimed). While a backlog lasts the archiver works ``duty`` (a quarter) of the time,
resting after each full pass (at most a quarter of a second), and leaves the rest to the tasks.

When: a trigger (``task_instance_log_archive``, engine/storage/db_objects.py) queues a PENDING
``task_log_archive`` row whenever an attempt with a host and a log path reaches a finished state, whoever
wrote that state. Any number of API servers work through the queue: a claim is ``FOR UPDATE SKIP LOCKED``
plus a lease (``next_try``, growing with each try), so one row is in one archiver's hands at a time and one
whose archiver died is taken up again when its lease ends.

What: the log as the worker has it (already capped by ``worker.max_log_bytes``, its first line saying what
was dropped), gzip-compressed on the way through (the API holds one chunk at a time), cut at
``api.log_archive_max_bytes`` with a last line saying so, under ``task-logs/<workflow instance>/<task
instance>-<attempt>.log.gz`` (retention removes a workflow instance's prefix with the instance). A worker
that answers 404 (its janitor or a user removed the file) makes the row MISSING; a worker that does not
answer is asked again with a doubling delay, and after ``api.log_archive_max_tries`` the row is FAILED.
"""

from __future__ import annotations

import asyncio
import base64
import time
import zlib
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass
from typing import Any

import asyncpg

from core import logs
from core.aio import BackgroundService
from engine.storage.blobs import BlobError, BlobStore
from engine.storage.failures import DB_FAILURES
from engine.storage.task_logs import ArchiveState, archive_key
from rpc.errors import BadRequest, RpcError
from rpc.messages import LOG_MISSING, LOG_OK, LOGS_PER_CALL_BYTES, LogDownload, LogDownloads

log = logs.get(__name__)

#: bytes read from the worker at a time, and compressed at a time (off the event loop)
CHUNK = 256 * 1024
#: seconds a transfer may wait for the worker's next chunk
IDLE_TIMEOUT = 60.0
#: the longest wait between two tries of one log
MAX_RETRY_SECONDS = 3600.0
#: what a pass marks ARCHIVED per log: task instance id, blob key, log bytes, stored bytes, SHA-256, truncated
Stored = tuple[int, str, int, int, str, bool]
#: while a backlog lasts, the share of the time the archiver works (it rests after each full pass), and its
#: longest rest in seconds
BACKLOG_DUTY = 0.25
MAX_REST = 0.25


def truncation_notice(cap: int, dropped: int) -> bytes:
    return (
        f"[porpoise] log archive truncated: the last {dropped} bytes of the log were not archived"
        f" (api.log_archive_max_bytes = {cap})\n"
    ).encode()


@dataclass
class Compressed:
    """What :func:`gzip_capped` passed through: bytes of the log kept, and whether it was cut."""

    log_size: int = 0
    truncated: bool = False


async def gzip_capped(chunks: AsyncIterable[bytes], cap: int, seen: Compressed) -> AsyncIterator[bytes]:
    """The chunks gzip-compressed, keeping at most ``cap`` bytes of them (0: all), cut at the last line
    start within the cap with a notice as the last line; the rest is read and counted, not kept.
    Compression runs in a thread, a chunk at a time."""
    gz = zlib.compressobj(6, zlib.DEFLATED, 31)  # wbits 31: a gzip member
    dropped = 0
    line_open = False  # the last byte kept is not a newline
    async for chunk in chunks:
        if seen.truncated:
            dropped += len(chunk)
            continue
        keep = chunk
        if cap and seen.log_size + len(chunk) > cap:
            room = chunk[: cap - seen.log_size]
            nl = room.rfind(b"\n")
            keep = room[: nl + 1] if nl >= 0 else room
            dropped += len(chunk) - len(keep)
            seen.truncated = True
        seen.log_size += len(keep)
        if keep:
            line_open = not keep.endswith(b"\n")
            out = await asyncio.to_thread(gz.compress, keep)
            if out:
                yield out
    tail = (b"\n" if line_open else b"") + truncation_notice(cap, dropped) if seen.truncated else b""
    yield await asyncio.to_thread(lambda: gz.compress(tail) + gz.flush())


_CLAIM = """
WITH claimed AS (
    UPDATE task_log_archive a SET tries = a.tries + 1,
        next_try = now() + make_interval(secs => least($2 * power(2, a.tries), $3))
    WHERE a.task_instance_id IN (
        SELECT task_instance_id FROM task_log_archive WHERE state = $4 AND next_try <= now()
        ORDER BY next_try LIMIT $1 FOR UPDATE SKIP LOCKED)
    RETURNING a.task_instance_id, a.workflow_instance_id, a.tries
)
SELECT c.task_instance_id, c.workflow_instance_id, c.tries, t.host, t.log_path, t.attempt
FROM claimed c JOIN task_instance t ON t.id = c.task_instance_id
"""

#: the logs of one worker in a pass archived, in one statement, each only while it is still the claim this
#: archiver holds (PENDING at the tries it claimed: another archiver may have claimed it again since its lease
#: ended); the ids it marked, and the ids of the rows still there (a row gone: retention removed it)
_ARCHIVED = """
WITH u AS (
    SELECT * FROM unnest($2::bigint[], $3::int[], $4::text[], $5::bigint[], $6::bigint[], $7::text[], $8::bool[])
        AS u(task_instance_id, tries, key, log_size, stored_size, sha256, truncated)
), marked AS (
    UPDATE task_log_archive a SET state = $1, blob_key = u.key, log_size = u.log_size, stored_size = u.stored_size,
        sha256 = u.sha256, truncated = u.truncated, archive_time = now(), reason = NULL
    FROM u WHERE a.task_instance_id = u.task_instance_id AND a.state = $9 AND a.tries = u.tries
    RETURNING a.task_instance_id
)
SELECT u.task_instance_id, m.task_instance_id IS NOT NULL AS marked,
    EXISTS (SELECT 1 FROM task_log_archive a WHERE a.task_instance_id = u.task_instance_id) AS there
FROM u LEFT JOIN marked m ON m.task_instance_id = u.task_instance_id
ORDER BY u.task_instance_id
"""

#: the same fence: a stale archiver changes nothing
_GIVE_UP = (
    "UPDATE task_log_archive SET state = $2, reason = $3 WHERE task_instance_id = $1 AND state = $4 AND tries = $5"
)
_RETRY = "UPDATE task_log_archive SET reason = $2 WHERE task_instance_id = $1 AND state = $3 AND tries = $4"
#: seconds before a worker that did not know log.downloads is asked again (it may have been upgraded)
OLD_WORKER_SECONDS = 600.0


class LogArchiver(BackgroundService):
    """Copies ended attempts' logs from their workers into the blob store (see the module docstring)."""

    task_name = "log-archiver"

    def __init__(
        self,
        pool: asyncpg.Pool,
        rpc: Any,
        blobs: BlobStore,
        *,
        interval: float,
        max_bytes: int,
        retry_seconds: float,
        max_tries: int,
        batch: int = 32,
        duty: float = BACKLOG_DUTY,
    ) -> None:
        self.pool = pool
        self.rpc = rpc
        self.blobs = blobs
        self.interval = interval
        self.max_bytes = max_bytes
        self.retry_seconds = retry_seconds
        self.max_tries = max_tries
        self.batch = batch
        self.duty = duty
        #: workers found without log.downloads (an older release) -> when: their logs are read one at a time
        self._one_at_a_time: dict[str, float] = {}

    async def _run(self) -> None:
        while True:
            try:
                while True:
                    began = time.monotonic()
                    if await self.archive_once() < self.batch:
                        break
                    # a backlog (a burst of tasks ended): archive a share of the time only, as autovacuum's cost
                    # delay does, leaving the rest to the tasks being scheduled and run. Wall time: a pass keeps
                    # the worker and PostgreSQL busy too, not only this process; a rest is short (a pass that
                    # mostly waited for a slow store loses little)
                    spent = time.monotonic() - began
                    await asyncio.sleep(min(spent * (1 / self.duty - 1), MAX_REST))
            except DB_FAILURES as exc:
                log.warning("log archive pass failed", error=str(exc))
            await asyncio.sleep(self.interval)

    async def archive_once(self) -> int:
        """Claim up to ``batch`` due logs and archive them; how many were claimed. A worker's logs are read
        together, stored one by one, and marked ARCHIVED together (one statement per worker, fenced on the
        claim): an API server that dies before leaves them PENDING, and their leases end, so they are stored
        again (the same key, replaced)."""
        rows = await self.pool.fetch(
            _CLAIM, self.batch, self.retry_seconds, MAX_RETRY_SECONDS, int(ArchiveState.PENDING)
        )
        by_host: dict[str, list[asyncpg.Record]] = {}
        for row in rows:
            by_host.setdefault(row["host"], []).append(row)
        for host, group in by_host.items():
            await self._archive_group(host, group)
        return len(rows)

    async def _archive_group(self, host: str, group: list[asyncpg.Record]) -> None:
        read = await self._read_together(host, group)
        if isinstance(read, RpcError):  # the worker did not answer: each row is tried again later (or given up)
            for row in group:
                await self._failed(row, f"worker {host}: {read}")
            return
        stored: list[tuple[asyncpg.Record, Stored]] = []
        try:
            for row in group:
                task_id = int(row["task_instance_id"])
                if task_id in read and read[task_id] is None:
                    await self._gone(row)
                    continue
                done = await self._archive(row, read.get(task_id))
                if done is not None:
                    stored.append((row, done))
        finally:
            if stored:  # what was stored is marked even when a later row's write failed
                await self._archived(stored)

    async def _archived(self, stored: list[tuple[asyncpg.Record, Stored]]) -> None:
        columns = [[r["task_instance_id"] for r, _ in stored], [r["tries"] for r, _ in stored],
                   *map(list, zip(*(s[1:] for _, s in stored), strict=True))]  # fmt: skip
        pending = int(ArchiveState.PENDING)
        outcome = {
            int(r["task_instance_id"]): (r["marked"], r["there"])
            for r in await self.pool.fetch(_ARCHIVED, int(ArchiveState.ARCHIVED), *columns, pending)
        }
        for _, (task_id, key, log_size, stored_size, _, truncated) in stored:
            marked, there = outcome.get(task_id, (False, True))
            if not there:  # its instance was removed meanwhile (retention): so goes the archive
                await self.blobs.delete(key)
            elif marked:
                log.info("task log archived", task_instance_id=task_id, key=key, log_bytes=log_size,
                         stored_bytes=stored_size, truncated=truncated)  # fmt: skip
            # else claimed again by another archiver since (a lease ended): the row is its to mark, and the key
            # (the same bytes) its to keep

    async def _read_together(self, host: str, group: list[asyncpg.Record]) -> dict[int, bytes | None] | RpcError:
        """The small logs of one worker's rows in one call: task instance id -> its bytes, or None when the
        worker does not have it; a row not in the answer is read apart (larger, or refused). A worker of a
        release without log.downloads gets each log asked apart, as before; one that does not answer, its
        error (each row is tried again later, not asked again one by one now)."""
        if time.monotonic() - self._one_at_a_time.get(host, -OLD_WORKER_SECONDS) < OLD_WORKER_SECONDS:
            return {}
        request = LogDownloads([r["log_path"] for r in group])  # each log up to its cap (larger: streamed)
        try:
            reply = await self.rpc.call(host, request, timeout=IDLE_TIMEOUT)
        except BadRequest as exc:
            if exc.status == 404 and "unknown RPC method" in str(exc):
                log.info("worker without log.downloads: its logs are read one at a time", worker=host)
                self._one_at_a_time[host] = time.monotonic()
                return {}
            return exc
        except RpcError as exc:
            return exc
        out: dict[int, bytes | None] = {}
        budget = LOGS_PER_CALL_BYTES
        try:
            for row, (state, data) in zip(group, reply.logs, strict=False):
                if state == LOG_OK:
                    raw = base64.b64decode(data, validate=True)
                    budget -= len(raw)
                    if len(raw) > request.cap or budget < 0:
                        break  # more than was asked for: the rest read apart
                    out[int(row["task_instance_id"])] = raw
                elif state == LOG_MISSING:
                    out[int(row["task_instance_id"])] = None
        except (ValueError, TypeError) as exc:  # not an answer as sent by a worker: each read apart
            log.warning("unreadable log.downloads answer; reading the logs one at a time", worker=host,
                        error=str(exc))  # fmt: skip
            return {}
        return out

    async def _gone(self, row: asyncpg.Record) -> None:
        task_id = int(row["task_instance_id"])
        missing, pending = int(ArchiveState.MISSING), int(ArchiveState.PENDING)
        await self.pool.execute(_GIVE_UP, task_id, missing, f"gone from {row['host']}", pending, row["tries"])
        log.info("task log gone from its worker before it was archived", task_instance_id=task_id)

    async def _archive(self, row: asyncpg.Record, data: bytes | None = None) -> Stored | None:
        """Store one claimed log (``data``: its bytes, read already); what to mark ARCHIVED, or None (the row
        was given up or is to be retried)."""
        task_id = int(row["task_instance_id"])
        key = archive_key(int(row["workflow_instance_id"]), task_id, int(row["attempt"]))
        seen = Compressed()
        # gzip of a capped log is never much larger than the cap; a bound all the same
        max_size = self.max_bytes + self.max_bytes // 100 + 65536 if self.max_bytes else None
        try:
            if data is not None:
                stored = await self.blobs.put(key, gzip_capped(_once(data), self.max_bytes, seen), max_size=max_size)
            else:
                async with self.rpc.stream(
                    row["host"], LogDownload(row["log_path"]), idle_timeout=IDLE_TIMEOUT
                ) as resp:
                    chunks = resp.content.iter_chunked(CHUNK)
                    stored = await self.blobs.put(key, gzip_capped(chunks, self.max_bytes, seen), max_size=max_size)
        except BadRequest as exc:
            if exc.status == 404:
                await self._gone(row)
                return None
            await self._failed(row, f"worker {row['host']}: {exc}")
            return None
        except (RpcError, BlobError) as exc:
            await self._failed(row, str(exc))
            return None
        return task_id, key, seen.log_size, stored.size, stored.sha256, seen.truncated

    async def _failed(self, row: asyncpg.Record, reason: str) -> None:
        task_id, tries, pending = int(row["task_instance_id"]), row["tries"], int(ArchiveState.PENDING)
        if int(tries) >= self.max_tries:
            await self.pool.execute(_GIVE_UP, task_id, int(ArchiveState.FAILED), reason[:1000], pending, tries)
            log.warning("task log not archived: gave up", task_instance_id=task_id, tries=tries, error=reason)
        else:
            await self.pool.execute(_RETRY, task_id, reason[:1000], pending, tries)
            log.info("task log not archived yet; trying again", task_instance_id=task_id, error=reason)


async def _once(data: bytes) -> AsyncIterator[bytes]:
    yield data
