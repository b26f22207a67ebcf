"""Task log files: where they live, and reading them safely while they grow.

Path: ``<log_dir>/<definition code>/<instance id // 1000>/<instance id>-<task instance id>-<attempt>.log`` (logs
written by earlier versions under ``<definition code>/<workflow instance id>/`` stay readable at the paths recorded).
Requests name a path; it must resolve inside the log directory and end in ``.log``, or it is refused.
Reads run in a thread (files may sit on slow disks); replies are capped at ``MAX_REPLY_BYTES``.

Paging by line number stays cheap on huge logs: a :class:`LineIndex` per file remembers the byte offset
of every ``INDEX_EVERY``-th complete line and is extended only over what was appended since, so a page
deep in a 200 MB log is a seek plus at most ``INDEX_EVERY`` lines, and the line count (for opening a log
at its end) costs one pass over the new bytes.
"""

from __future__ import annotations

import asyncio
import base64
import errno
import os
import stat
import threading
from collections import OrderedDict
from pathlib import Path

from core.text import storable
from rpc.errors import BadRequest
from rpc.messages import LOG_APART, LOG_MISSING, LOG_OK, LOGS_PER_CALL_BYTES

MAX_REPLY_BYTES = 64 * 1024
#: workflow instance ids whose logs share a directory under their definition's
LOGS_PER_BUCKET = 1000
MAX_LINE_BYTES = 16 * 1024
INDEX_EVERY = 1000
#: bytes one search request reads at most (then it answers with where to go on): a search of a 200 MB log
#: never holds a worker thread for long
MAX_SEARCH_BYTES = 32 * 1024 * 1024
#: characters of a needle
MAX_NEEDLE = 200
#: files whose line index is kept (least recently used dropped)
INDEXED_FILES = 256
_CHUNK = 1 << 20
#: a task log this small (all of it written by this worker since it was created) is also kept in memory
#: while it is written, so its result's last lines are read from there, not from the file again
KEPT_BYTES = 64 * 1024


class LineIndex:
    """Byte offsets of lines 0, INDEX_EVERY, 2*INDEX_EVERY, ... of one file, and its count of complete
    lines; ``extend`` scans only the bytes appended since the last call (a shorter or replaced file
    starts the index over)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.offsets: list[int] = [0]
        self.lines = 0  # complete lines counted
        self.scanned = 0  # byte offset just after the last complete line counted
        self.identity: tuple[int, int] = (0, 0)  # (device, inode)

    def extend(self, fh: object) -> None:
        st = os.fstat(fh.fileno())  # type: ignore[attr-defined]
        if (st.st_dev, st.st_ino) != self.identity or st.st_size < self.scanned:
            self.offsets, self.lines, self.scanned, self.identity = [0], 0, 0, (st.st_dev, st.st_ino)
        fh.seek(self.scanned)  # type: ignore[attr-defined]
        pos = self.scanned  # file offset of the chunk read next
        while chunk := fh.read(_CHUNK):  # type: ignore[attr-defined]
            start = 0
            while (nl := chunk.find(b"\n", start)) >= 0:
                self.lines += 1
                start = nl + 1
                if self.lines % INDEX_EVERY == 0:
                    self.offsets.append(pos + start)
            if start:
                self.scanned = pos + start  # a partial last line is counted once its newline is written
            pos += len(chunk)


class CappedLog:
    """A task's log file opened for appending, kept to at most ``cap`` bytes (0: no limit).

    Writes go straight to the file (unbuffered, as before). When the file grows past the cap, its newest
    part (the last ``cap // 2`` bytes, from a line start) is copied in 1 MiB chunks to a new file, headed by
    a line saying how many bytes were dropped, which replaces the log (rename); the file then grows again.
    Each byte is copied at most once on its way out, so a capped log costs at most twice its writes, the
    file never holds more than the cap plus one write, and the worker never holds more than a chunk of it
    in memory. Readers notice the replacement (a new inode) and re-index. Called from a thread.

    A log this worker created and has written at most KEPT_BYTES to is also held in memory (``kept``), so
    :meth:`tail` needs no second read of the file (what it returns is what ``result_tail`` reads)."""

    def __init__(self, path: Path, cap: int = 0, first: str = "") -> None:
        self.path = path
        self.cap = cap
        self.fd = _append(path)
        self.size = os.lseek(self.fd, 0, os.SEEK_END)  # appended to: its end
        #: the whole file while this worker wrote all of it and it holds at most KEPT_BYTES, else None
        self.kept: bytearray | None = bytearray() if self.size == 0 else None
        #: bytes of the task's output dropped so far, and the length of the notice heading the file
        self.dropped = 0
        self._notice = 0
        if first:
            self.write(first.encode())

    def write(self, data: bytes) -> None:
        if self.fd < 0:
            raise ValueError(f"{self.path}: write to a closed log")
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view) :]
        self.size += len(data)
        if self.kept is not None:
            if self.size <= KEPT_BYTES:
                self.kept += data
            else:
                self.kept = None
        if self.cap and self.size > self.cap:
            self._keep_tail()

    def tail(self, lines: int, limit: int) -> str:
        """The log's last lines as ``result_tail`` gives them: from memory while it is kept there."""
        if self.kept is None:
            return result_tail(self.path, lines, limit)
        return _result_tail(_last_lines(bytes(self.kept), lines), limit)

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    def _keep_tail(self) -> None:
        keep = max(1, self.cap // 2)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(self.path, "rb") as src:
            src.seek(max(0, self.size - keep))
            head = src.read(_CHUNK)
            nl = head.find(b"\n")
            if 0 <= nl < len(head) - 1:
                head = head[nl + 1 :]  # start the kept part at a line
            start = src.tell() - len(head)
            self.dropped += start - self._notice
            notice = (
                f"[porpoise] log truncated: the first {self.dropped} bytes of output were dropped"
                f" (worker.max_log_bytes = {self.cap}); the newest output follows\n"
            ).encode()
            with open(tmp, "wb") as dst:
                dst.write(notice)
                dst.write(head)
                while chunk := src.read(_CHUNK):
                    dst.write(chunk)
                size = dst.tell()
        os.replace(tmp, self.path)
        self.kept = None
        old, self.fd = self.fd, _append(self.path)
        os.close(old)
        self.size, self._notice = size, len(notice)


#: a log opened for appending (a raw descriptor: two system calls where a file object made four)
_APPEND = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC


def _append(path: Path) -> int:
    """The file opened for appending (a descriptor); its directory is made when missing (the first task of
    a thousand instance ids of a definition here; again when the log janitor removed it empty just then)."""
    for _ in range(3):
        try:
            return os.open(path, _APPEND, 0o666)
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
    return os.open(path, _APPEND, 0o666)


def log_path(
    log_dir: Path, definition_code: int, workflow_instance_id: int, task_instance_id: int, attempt: int
) -> Path:
    # one join (each ``/`` parses its path again: a worker builds one of these per task); no directory per
    # instance (making one costs the kernel a new inode, 0.13-0.7 ms here, in the way of every run's first task),
    # one per thousand instance ids (a definition's directory stays small however many runs its logs keep)
    return log_dir.joinpath(
        str(definition_code),
        str(workflow_instance_id // LOGS_PER_BUCKET),
        f"{workflow_instance_id}-{task_instance_id}-{attempt}.log",
    )


class LogFiles:
    def __init__(self, log_dir: Path) -> None:
        self.root = log_dir.resolve()
        self._indexes: OrderedDict[Path, LineIndex] = OrderedDict()
        self._indexes_lock = threading.Lock()

    def _index(self, path: Path) -> LineIndex:
        with self._indexes_lock:
            index = self._indexes.pop(path, None) or LineIndex()
            self._indexes[path] = index
            while len(self._indexes) > INDEXED_FILES:
                self._indexes.popitem(last=False)
            return index

    def checked(self, path: str) -> Path:
        candidate = Path(path)
        if not candidate.is_absolute():
            candidate = self.root / candidate
        resolved = candidate.resolve()
        if resolved.suffix != ".log" or not resolved.is_relative_to(self.root):
            raise BadRequest(f"log path {path!r} is not a task log under {self.root}", 400)
        return resolved

    async def tail(self, path: str, lines: int) -> list[str]:
        target = self.checked(path)
        return await asyncio.to_thread(_tail, target, max(0, min(lines, 10_000)))

    async def range(self, path: str, skip: int, limit: int, from_end: bool = False) -> tuple[list[str], int, int]:
        """Complete lines from ``skip`` (or the last ``limit`` ones): (lines, first line number, total)."""
        target = self.checked(path)
        limit = max(0, min(limit, 10_000))
        return await asyncio.to_thread(_range, target, self._index(target), max(0, skip), limit, from_end)

    async def search(self, path: str, needle: str, after: int, limit: int) -> tuple[list[list[object]], int, bool, int]:
        """Lines from ``after`` on containing ``needle`` (case-insensitive): (hits as [line number, text], the
        line to go on from, whether the end was reached, complete lines in the file). Bounded: at most
        ``limit`` hits, MAX_SEARCH_BYTES read and MAX_REPLY_BYTES answered per call."""
        target = self.checked(path)
        if not needle or len(needle) > MAX_NEEDLE:
            raise BadRequest(f"search text must be 1 to {MAX_NEEDLE} characters", 400)
        limit = max(1, min(limit, 1000))
        return await asyncio.to_thread(_search, target, self._index(target), needle, max(0, after), limit)

    async def remove(self, path: str) -> bool:
        target = self.checked(path)
        return await asyncio.to_thread(_remove, target)

    async def together(self, paths: list[str], cap: int) -> list[list[str]]:
        """log.downloads: ended logs for the archiver, a page at a time, in one trip to a thread (the paths
        checked there too, :func:`smalls`); a path this worker refuses is left to be read apart (log.download
        answers why)."""
        if len(paths) > MAX_LOGS_PER_CALL:
            raise BadRequest(f"at most {MAX_LOGS_PER_CALL} logs per call", 400)
        return await asyncio.to_thread(self._together, paths, max(0, cap))

    def _together(self, paths: list[str], cap: int) -> list[list[str]]:
        targets: list[Path | None] = []
        for path in paths:
            try:
                targets.append(self.checked(path))
            except (BadRequest, OSError, ValueError):
                targets.append(None)
        return smalls(targets, cap, LOGS_PER_CALL_BYTES)

    async def small(self, target: Path, cap: int) -> bytes | None:
        """A :meth:`checked` log's bytes when it holds at most ``cap`` (one trip to a thread: most task logs
        are this small), None when it is larger (to be streamed); BadRequest 404 when it does not exist."""
        return await asyncio.to_thread(_small, target, cap)


def _clip(line: str) -> str:
    return line if len(line) <= MAX_LINE_BYTES else line[:MAX_LINE_BYTES] + " …[line truncated]"


def _tail(path: Path, lines: int) -> list[str]:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            block, data = 8192, b""
            while size > 0 and data.count(b"\n") <= lines and len(data) < MAX_REPLY_BYTES * 4:
                step = min(block, size)
                size -= step
                fh.seek(size)
                data = fh.read(step) + data
    except FileNotFoundError:
        raise BadRequest(f"log {path} does not exist", 404) from None
    return _last_lines(data, lines)


def _last_lines(data: bytes, lines: int) -> list[str]:
    """The last ``lines`` lines of ``data`` (the end of a file, holding more than ``lines`` newlines or all
    of it), each clipped, MAX_REPLY_BYTES of them at most."""
    text = data.decode(errors="replace").splitlines()
    out: list[str] = []
    used = 0
    for raw in reversed(text[-lines:] if lines else []):
        line = _clip(raw)
        used += len(line) + 1
        if used > MAX_REPLY_BYTES:
            break
        out.append(line)
    return list(reversed(out))


def result_tail(path: Path, lines: int, limit: int) -> str:
    """The last ``lines`` lines of a finished attempt's log, at most ``limit`` bytes of them (whole lines
    from the end; a longer last line is cut to its end), for its result report; "" without a log."""
    try:
        found = _tail(path, lines)
    except (BadRequest, OSError):
        return ""
    return _result_tail(found, limit)


def _result_tail(found: list[str], limit: int) -> str:
    out: list[str] = []
    used = 0
    for line in reversed(found):
        data = line.encode()
        if used + len(data) + 1 > limit:
            if not out:
                out.append(data[-(limit - 1) :].decode(errors="ignore"))
            break
        used += len(data) + 1
        out.append(line)
    return storable("\n".join(reversed(out)))  # a NUL the task printed: no database stores it


def _range(path: Path, index: LineIndex, skip: int, limit: int, from_end: bool) -> tuple[list[str], int, int]:
    """Complete lines [skip, skip+limit) (from_end: the last ``limit``); a line still being written is not
    returned yet. Returns the lines, the number of the first, and the complete lines in the file."""
    out: list[str] = []
    used = 0
    try:
        with open(path, "rb") as fh, index.lock:
            index.extend(fh)
            total = index.lines
            if from_end:
                skip = max(0, total - limit)
            checkpoint = min(skip // INDEX_EVERY, len(index.offsets) - 1)
            fh.seek(index.offsets[checkpoint])
            line_no = checkpoint * INDEX_EVERY
            for raw in fh:
                if line_no >= total or not raw.endswith(b"\n"):
                    break  # past what was indexed, or a partial line: the writer has not finished it
                if line_no >= skip:
                    if len(out) >= limit:
                        break
                    line = _clip(raw[:-1].decode(errors="replace"))
                    used += len(line) + 1
                    if used > MAX_REPLY_BYTES and out:
                        break
                    out.append(line)
                line_no += 1
    except FileNotFoundError:
        raise BadRequest(f"log {path} does not exist", 404) from None
    return out, skip, total


def _search(
    path: Path, index: LineIndex, needle: str, after: int, limit: int
) -> tuple[list[list[object]], int, bool, int]:
    # bytes compared lower-cased: ASCII case folding, and no decoding of the lines that do not match
    wanted = needle.lower().encode()
    hits: list[list[object]] = []
    used = read = 0
    try:
        with open(path, "rb") as fh, index.lock:
            index.extend(fh)
            total = index.lines
            checkpoint = min(after // INDEX_EVERY, len(index.offsets) - 1)
            fh.seek(index.offsets[checkpoint])
            line_no = checkpoint * INDEX_EVERY
            for raw in fh:
                if line_no >= total or not raw.endswith(b"\n"):
                    break
                if line_no >= after:
                    if len(hits) >= limit or read >= MAX_SEARCH_BYTES or used > MAX_REPLY_BYTES:
                        return hits, line_no, False, total
                    read += len(raw)
                    if wanted in raw.lower():
                        line = _clip(raw[:-1].decode(errors="replace"))
                        used += len(line) + 16
                        hits.append([line_no, line])
                line_no += 1
    except FileNotFoundError:
        raise BadRequest(f"log {path} does not exist", 404) from None
    return hits, max(line_no, after), True, total


#: log.downloads: logs per call (the bytes of their contents in one answer: rpc.messages.LOGS_PER_CALL_BYTES)
MAX_LOGS_PER_CALL = 64


def smalls(targets: list[Path | None], cap: int, budget: int) -> list[list[str]]:
    """In a thread: each :meth:`LogFiles.checked` log (None: refused) as [state, base64 of its bytes]: whole
    when it holds at most ``cap`` bytes and the answer's bytes stay within ``budget``, else to be read apart."""
    out: list[list[str]] = []
    for target in targets:
        if target is None:
            out.append([LOG_APART, ""])
            continue
        try:
            data = _small(target, min(cap, budget))
        except BadRequest:
            out.append([LOG_MISSING, ""])
            continue
        except OSError:  # anything else (a socket in a log's place): log.download answers for it
            out.append([LOG_APART, ""])
            continue
        if data is None:
            out.append([LOG_APART, ""])
            continue
        budget -= len(data)
        out.append([LOG_OK, base64.b64encode(data).decode("ascii")])
    return out


def _small(path: Path, cap: int) -> bytes | None:
    try:
        # non-blocking: opening a FIFO put in a log's place must not hold the thread (a regular file's reads
        # ignore the flag); anything but a regular file is refused as the old is_file() check refused it
        # and not through a symbolic link put in a log's place after the path was checked
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
    except (FileNotFoundError, IsADirectoryError):
        raise BadRequest(f"log {path} does not exist", 404) from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO):  # a symbolic link, a socket: not a log
            raise BadRequest(f"log {path} does not exist", 404) from None
        raise
    with open(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise BadRequest(f"log {path} does not exist", 404)
        data = fh.read(cap + 1)
    return data if len(data) <= cap else None


def _remove(path: Path) -> bool:
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True
