"""The worker's result spool: every result a task attempt produced stays on the worker's disk until a
master has acknowledged it, so a worker that crashes (or stops) between a task's end and the report's
delivery sends it when it starts again instead of letting the attempt run twice (invariant 4).

Layout: ``<root>/<namespace>/<slot>/<task instance>-<attempt>.json``. The namespace is the cluster's
registry root, so a spool never feeds another cluster's masters (tests run many clusters side by side).
A slot is a directory a worker holds for its lifetime with an exclusive ``flock`` on ``<slot>/.lock``
(released by the kernel however the worker ends): workers sharing a spool directory each hold their own;
a starting worker takes the first free slot and moves into it the files of every other free slot (the
spools of dead workers), so a worker restarted at another address, or another worker on the machine,
sends what a dead one left.

A file holds the result and the owner it was meant for (master address and epoch); it is written
atomically (temporary file, fsync, rename, fsync of the directory) and removed once acknowledged. Every
method does file system calls: run it in a thread.
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from engine import logs
from rpc import codec
from rpc.errors import BadRequest
from rpc.messages import TaskResult

log = logs.get(__name__)

LOCK = ".lock"
SUFFIX = ".json"


@dataclass(frozen=True)
class Spooled:
    """A result and the owner of its workflow instance when it was spooled."""

    master: str
    epoch: int
    result: TaskResult

    @property
    def key(self) -> tuple[int, int]:
        return self.result.task_instance_id, self.result.attempt


def file_name(task_instance_id: int, attempt: int) -> str:
    return f"{task_instance_id}-{attempt}{SUFFIX}"


class Spool:
    def __init__(self, root: Path, namespace: str) -> None:
        #: the slots of this cluster (registry root)
        self.dir = root / urllib.parse.quote(namespace.strip("/") or "/", safe="")
        #: the slot this worker holds, once opened
        self.slot: Path | None = None
        self._lock_fd = -1
        self._dir_fd = -1

    def open(self) -> list[Spooled]:
        """Take a slot, adopt the files of free ones, and return what the spool holds, oldest first."""
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        for i in itertools.count():
            slot = self.dir / str(i)
            fd = _try_lock(slot)
            if fd >= 0:
                self.slot, self._lock_fd = slot, fd
                break
        assert self.slot is not None
        self._dir_fd = os.open(self.slot, os.O_RDONLY | os.O_DIRECTORY)
        for other in sorted(self.dir.iterdir()):
            if other != self.slot and other.is_dir():
                self._adopt(other)
        for tmp in self.slot.glob("*.tmp"):  # a write the previous holder did not finish: never sent
            tmp.unlink(missing_ok=True)
        found = []
        for path in sorted(self.slot.glob(f"*{SUFFIX}"), key=_mtime):
            try:
                found.append(_decode(path.read_bytes()))
            except (ValueError, BadRequest) as exc:
                log.error("unreadable spool file set aside", path=str(path), error=str(exc))
                path.rename(path.with_suffix(".bad"))
        if found:
            log.info("spooled results found", count=len(found), slot=str(self.slot))
        return found

    def _adopt(self, other: Path) -> None:
        fd = _try_lock(other, create=False)
        if fd < 0:
            return  # a live worker's slot
        assert self.slot is not None
        try:
            moved = 0
            for path in other.glob(f"*{SUFFIX}"):
                os.rename(path, self.slot / path.name)
                moved += 1
            if moved:
                os.fsync(self._dir_fd)
                log.info("spooled results adopted from a free slot", slot=str(other), count=moved)
        finally:
            os.close(fd)

    def write(self, entry: Spooled) -> None:
        """Store ``entry`` durably (replacing an earlier copy of the same attempt's result)."""
        assert self.slot is not None, "spool not opened"
        name = file_name(*entry.key)
        tmp = self.slot / f"{name}.tmp"
        body = json.dumps(
            {"master": entry.master, "epoch": entry.epoch, "result": codec.encode(entry.result)},
            separators=(",", ":"),
        ).encode()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view = memoryview(body)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, self.slot / name)
        os.fsync(self._dir_fd)  # the rename itself survives a machine crash

    def remove(self, keys: Iterable[tuple[int, int]]) -> None:
        """Forget acknowledged results (a file that is gone already is fine)."""
        if self.slot is None:
            return
        for key in keys:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.slot / file_name(*key))

    def files(self) -> list[Path]:
        return sorted(self.slot.glob(f"*{SUFFIX}")) if self.slot is not None else []

    def close(self) -> None:
        """Let go of the slot (its files stay for the next holder)."""
        for attr in ("_dir_fd", "_lock_fd"):
            fd = getattr(self, attr)
            if fd >= 0:
                setattr(self, attr, -1)
                os.close(fd)


def _try_lock(slot: Path, create: bool = True) -> int:
    """An fd holding ``slot``'s lock, or -1 when another process holds it (or it has no lock file)."""
    if create:
        slot.mkdir(exist_ok=True, mode=0o700)
    try:
        fd = os.open(slot / LOCK, os.O_RDWR | (os.O_CREAT if create else 0), 0o600)
    except FileNotFoundError:
        return -1
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return -1
    return fd


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0


def _decode(raw: bytes) -> Spooled:
    data = json.loads(raw)
    if not isinstance(data, dict) or not isinstance(data.get("master"), str) or not isinstance(data.get("epoch"), int):
        raise ValueError("not a spooled result (master, epoch, result)")
    return Spooled(data["master"], data["epoch"], codec.decode(TaskResult, data.get("result")))
