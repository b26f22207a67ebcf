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

Results are committed in groups, as a write-ahead log does: ``write_many`` stores every result handed to
it (the reporter hands over all that ended while the previous commit was on disk) in one file, written
atomically (temporary file, one fsync, rename, fsync of the directory), named after its first result
(``<task instance>-<attempt>.json``). A file holds a list of results, each with the owner it was meant for
(master address and epoch). The spool keeps in memory which of a file's results are not acknowledged yet;
``remove`` forgets acknowledged ones and unlinks a file once none of its results is left (not fsynced: a
removal lost in a crash only sends an acknowledged result again, which the master acknowledges again).
A result written again (the same attempt) supersedes the earlier copy; on ``open`` the newer file wins.
Every method does file system calls: run it in a thread (they may run in several at once).
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import json
import os
import threading
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from core import logs
from rpc import codec
from rpc.errors import BadRequest
from rpc.messages import TaskResult

log = logs.get(__name__)

LOCK = ".lock"
SUFFIX = ".json"

Key = tuple[int, int]


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
        #: file name -> keys of its results not acknowledged yet; key -> the file holding its newest copy
        self._files: dict[str, set[Key]] = {}
        self._where: dict[Key, str] = {}
        self._names = itertools.count(1)
        #: write_many and remove may run in two threads at once
        self._mutex = threading.Lock()

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
        found: dict[Key, Spooled] = {}
        for path in sorted(self.slot.glob(f"*{SUFFIX}"), key=_mtime):
            try:
                entries = _decode(path.read_bytes())
            except (ValueError, BadRequest) as exc:
                log.error("unreadable spool file set aside", path=str(path), error=str(exc))
                path.rename(path.with_suffix(".bad"))
                continue
            self._files[path.name] = set()
            for entry in entries:
                found.pop(entry.key, None)  # a newer copy: sent in this file's place in the order
                found[entry.key] = entry
                if (superseded := self._track(entry.key, path.name)) is not None:
                    self._unlink([superseded])  # every result in it has a newer copy
        if found:
            log.info("spooled results found", count=len(found), files=len(self._files), slot=str(self.slot))
        return list(found.values())

    def _track(self, key: Key, name: str) -> str | None:
        """``key``'s newest copy is in file ``name``; the file that held it before, if that now holds nothing."""
        old = self._where.get(key)
        self._where[key] = name
        self._files[name].add(key)
        if old is None or old == name:
            return None
        keys = self._files[old]
        keys.discard(key)
        if keys:
            return None
        del self._files[old]
        return old

    def _adopt(self, other: Path) -> None:
        fd = _try_lock(other, create=False)
        if fd < 0:
            return  # a live worker's slot
        assert self.slot is not None
        try:
            moved = 0
            for path in other.glob(f"*{SUFFIX}"):
                target = self.slot / path.name
                while target.exists():  # a file of the same name here: both kept
                    target = self.slot / f"{path.stem}.a{next(self._names)}{SUFFIX}"
                os.rename(path, target)
                moved += 1
            if moved:
                os.fsync(self._dir_fd)
                log.info("spooled results adopted from a free slot", slot=str(other), count=moved)
        finally:
            os.close(fd)

    def write(self, entry: Spooled) -> None:
        """Store ``entry`` durably (replacing an earlier copy of the same attempt's result)."""
        self.write_many([entry])

    def write_many(self, entries: Sequence[Spooled]) -> None:
        """Store ``entries`` durably, all in one file: one fsync for the group (a group commit). Each
        replaces an earlier copy of the same attempt's result; a file left holding none is removed."""
        assert self.slot is not None, "spool not opened"
        if not entries:
            return
        latest = {e.key: e for e in entries}
        body = json.dumps(
            [{"master": e.master, "epoch": e.epoch, "result": codec.encode(e.result)} for e in latest.values()],
            separators=(",", ":"),
        ).encode()
        with self._mutex:
            name = file_name(*entries[0].key)
            while name in self._files:  # that name holds results still (an earlier group or copy)
                name = f"{name.removesuffix(SUFFIX)}.{next(self._names)}{SUFFIX}"
            tmp = self.slot / f"{name}.tmp"
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
            self._files[name] = set()
            emptied = [old for key in latest if (old := self._track(key, name)) is not None]
            self._unlink(emptied)

    def remove(self, keys: Iterable[Key]) -> None:
        """Forget acknowledged results; a file goes once none of its results is left (a file that is gone
        already is fine)."""
        if self.slot is None:
            return
        with self._mutex:
            emptied = []
            for key in keys:
                name = self._where.pop(key, None)
                if name is None:
                    continue
                left = self._files[name]
                left.discard(key)
                if not left:
                    del self._files[name]
                    emptied.append(name)
            self._unlink(emptied)

    def _unlink(self, names: list[str]) -> None:
        assert self.slot is not None
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.slot / name)

    def held(self) -> int:
        """Results held (not acknowledged yet)."""
        return len(self._where)

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


def _decode(raw: bytes) -> list[Spooled]:
    """A spool file's results: a list of them (a group), or one (the format of a file per result)."""
    data = json.loads(raw)
    items = data if isinstance(data, list) else [data]
    return [_decode_one(item) for item in items]


def _decode_one(data: object) -> Spooled:
    if not isinstance(data, dict) or not isinstance(data.get("master"), str) or not isinstance(data.get("epoch"), int):
        raise ValueError("not a spooled result (master, epoch, result)")
    return Spooled(data["master"], data["epoch"], codec.decode(TaskResult, data.get("result")))
