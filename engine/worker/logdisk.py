"""Upkeep of the worker's log directory: the free-space guard and the removal of old task logs.

The guard (``disk_short``) is evaluated in a thread with every heartbeat (``statvfs`` may block on a slow
file system); admission reads the last answer, so a full disk refuses dispatches with its reason and the
heartbeat shows it (status ABNORMAL, ``reason``), which masters and ``porpoise cluster`` see.

``LogJanitor`` removes, once an hour, task logs not written for ``worker.log_keep_days`` and the
directories they leave empty. A log being written is never removed (its attempt is running here).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable
from pathlib import Path

from core import logs
from core.aio import BackgroundService

log = logs.get(__name__)

#: seconds between two sweeps of the log directory
SWEEP_INTERVAL = 3600.0


def disk_short(path: Path, min_free_bytes: int, min_free_percent: float) -> str:
    """Why the file system holding ``path`` is too full for new task logs, or ""."""
    where = path
    while not where.exists() and where.parent != where:
        where = where.parent  # made with the first task log: its file system is its nearest ancestor's
    try:
        st = os.statvfs(where)
    except OSError as exc:
        return f"log disk not readable ({path}: {exc.strerror})"
    free = st.f_bavail * st.f_frsize
    total = st.f_blocks * st.f_frsize
    if free < min_free_bytes:
        return (
            f"log disk nearly full: {_size(free)} free in {path},"
            f" below worker.min_free_disk_bytes ({_size(min_free_bytes)})"
        )
    if total and free * 100 < total * min_free_percent:
        return (
            f"log disk nearly full: {free * 100 / total:.1f} % free in {path},"
            f" below worker.min_free_disk_percent ({min_free_percent:g} %)"
        )
    return ""


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:.0f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def remove_old_logs(root: Path, keep_seconds: float, busy: set[Path], now: float | None = None) -> int:
    """Remove ``*.log`` files (and ``*.log.tmp`` ones) under ``root`` last written more than ``keep_seconds`` ago
    (except ``busy`` ones), then the directories left empty; the number of files removed."""
    cutoff = (time.time() if now is None else now) - keep_seconds
    removed = 0
    for dirpath, _, filenames in os.walk(root, topdown=False):
        here = Path(dirpath)
        for name in filenames:
            path = here / name
            # a ``.log.tmp`` is a capped log's copy that a worker's end cut short (CappedLog._keep_tail)
            if not name.endswith((".log", ".log.tmp")) or path in busy or path.with_suffix("") in busy:
                continue
            try:
                if path.stat().st_mtime < cutoff:
                    path.unlink()
                    removed += 1
            except FileNotFoundError:
                continue
        if here != root:
            with contextlib.suppress(OSError):
                here.rmdir()  # only when empty (a task starting in it makes it again)
    return removed


class LogJanitor(BackgroundService):
    task_name = "log-janitor"

    def __init__(self, root: Path, keep_days: float, busy: Callable[[], set[Path]]) -> None:
        self.root = root
        self.keep_days = keep_days
        self.busy = busy

    async def sweep(self) -> int:
        removed = await asyncio.to_thread(remove_old_logs, self.root, self.keep_days * 86400, self.busy())
        if removed:
            log.info("old task logs removed", removed=removed, keep_days=self.keep_days)
        return removed

    async def _run(self) -> None:
        if not self.keep_days:
            return
        while True:
            try:
                await self.sweep()
            except OSError as exc:
                log.warning("old task logs not removed", error=str(exc))
            await asyncio.sleep(SWEEP_INTERVAL)
