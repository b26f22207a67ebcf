"""Task log files: where they live, and reading them safely while they grow.

Path: ``<log_dir>/<definition code>/<workflow instance id>/<task instance id>-<attempt>.log``.
Requests name a path; it must resolve inside the log directory and end in ``.log``, or it is refused.
Reads run in a thread (files may sit on slow disks); replies are capped at ``MAX_REPLY_BYTES``.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from rpc.errors import BadRequest

MAX_REPLY_BYTES = 64 * 1024
MAX_LINE_BYTES = 16 * 1024


def log_path(
    log_dir: Path, definition_code: int, workflow_instance_id: int, task_instance_id: int, attempt: int
) -> Path:
    return log_dir / str(definition_code) / str(workflow_instance_id) / f"{task_instance_id}-{attempt}.log"


class LogFiles:
    def __init__(self, log_dir: Path) -> None:
        self.root = log_dir.resolve()

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

    async def range(self, path: str, skip: int, limit: int) -> tuple[list[str], int]:
        target = self.checked(path)
        return await asyncio.to_thread(_range, target, max(0, skip), max(0, min(limit, 10_000)))

    async def remove(self, path: str) -> bool:
        target = self.checked(path)
        return await asyncio.to_thread(_remove, target)


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


def _range(path: Path, skip: int, limit: int) -> tuple[list[str], int]:
    """Complete lines [skip, skip+limit); a trailing line still being written is not returned yet."""
    out: list[str] = []
    used = 0
    index = 0
    try:
        with open(path, "rb") as fh:
            for raw in fh:
                if not raw.endswith(b"\n"):
                    break  # partial line: the writer has not finished it
                if index >= skip:
                    if len(out) >= limit:
                        break
                    line = _clip(raw[:-1].decode(errors="replace"))
                    used += len(line) + 1
                    if used > MAX_REPLY_BYTES and out:
                        break
                    out.append(line)
                index += 1
    except FileNotFoundError:
        raise BadRequest(f"log {path} does not exist", 404) from None
    return out, skip + len(out)


def _remove(path: Path) -> bool:
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True
