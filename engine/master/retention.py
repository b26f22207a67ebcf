"""The retention job on the masters: every ``history.interval_seconds`` each master tries the etcd lock
``<root>/lock/job/retention`` (bound to its session lease, as the failover lock); the one that gets it runs
one pass of :class:`engine.storage.retention.Retention`, the others skip this round. The pass asks before
every batch whether the lock is still held (a master whose lease is lost stops after its current short
transaction; its services are closed on fencing anyway), so two masters never work through the same
history at once, and if they did, every batch would still be safe (rows are locked SKIP LOCKED).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import asyncpg

from core import logs
from core.aio import BackgroundService
from engine.config import HistoryConfig
from engine.storage.blobs import BlobStore
from engine.storage.failures import DB_FAILURES
from engine.storage.retention import Removed, Retention
from registry import RegistryUnavailable
from registry.lock import Lock

log = logs.get(__name__)

LOCK_NAME = "retention"
#: seconds after a master registers before its first try (a restart does not start with a pass)
FIRST_DELAY_CAP = 60.0


class RetentionService(BackgroundService):
    task_name = "retention"

    def __init__(
        self,
        pool: asyncpg.Pool,
        cfg: HistoryConfig,
        lock: Callable[[], Lock | None],
        metrics: Any = None,
        blobs: BlobStore | None = None,
    ) -> None:
        self.pool = pool
        #: where archived task logs are: those of the instances a pass removes are deleted with them
        self.blobs = blobs
        self.cfg = cfg
        self.lock = lock
        self.metrics = metrics
        #: what the last pass this master ran removed (None before the first)
        self.last: Removed | None = None

    async def _run(self) -> None:
        await asyncio.sleep(min(self.cfg.interval_seconds, FIRST_DELAY_CAP))
        while True:
            if self.cfg.keep_days or self.cfg.audit_keep_days:
                await self.run_once()
            await asyncio.sleep(self.cfg.interval_seconds)

    async def run_once(self) -> Removed | None:
        """One pass if this master gets the lock; None when it did not (or could not ask etcd)."""
        lock = self.lock()
        if lock is None:
            return None
        try:
            if not await lock.try_acquire():
                return None
        except RegistryUnavailable as exc:
            log.info("retention skipped: registry unavailable", error=str(exc))
            return None
        job = Retention(self.pool, self.cfg.keep_days, self.cfg.audit_keep_days, self.cfg.batch_size,
                        go_on=lambda: lock.held, blobs=self.blobs)  # fmt: skip
        try:
            removed = await job.run()
        except DB_FAILURES as exc:
            log.warning("retention pass interrupted; the next one goes on", error=str(exc))
            removed = job.removed
        finally:
            try:
                await lock.release()
            except Exception as exc:  # lost with the lease meanwhile: etcd removed the key already
                log.info("retention lock not released", error=str(exc))
        self.last = removed
        if removed.total() or removed.kept:
            log.info("retention pass", instances=removed.instances, kept=removed.kept,
                     error_commands=removed.error_commands, schedule_fires=removed.schedule_fires,
                     backfills=removed.backfills, audit_rows=removed.audit_rows, log_archives=removed.log_archives,
                     batches=removed.batches)  # fmt: skip
        if self.metrics is not None:
            self.metrics.inc("retention_passes")
            self.metrics.inc("retention_removed_instances", removed.instances)
        return removed
