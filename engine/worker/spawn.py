"""Starting a task process cheaply from the event loop.

uvloop's ``create_subprocess_exec`` forks the whole worker (page tables of every mapping copied while
the loop waits): about 4.8 ms per task measured here with a 60 MB worker, a quarter of the worker's
time at 100 tasks/s. ``subprocess.Popen`` uses vfork when it can (no preexec function, no uid / gid
change; ``start_new_session`` is fine): about 0.2 ms, run in a thread so the loop never waits on it.
The child's exit is watched through a pidfd on the loop (Linux >= 5.3) and its output through
``connect_read_pipe``, so no child watcher is needed.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from core.aio import acquire_in_thread
from engine.tasks.base import MAX_STDIN


class TaskProcess(Protocol):
    """A task's process as the executor sees it: a :class:`Child` started here, or a task the fork server
    forked (engine/worker/forkclient.py ``ForkedTask``)."""

    pid: int
    stdout: asyncio.StreamReader
    close_stdout: Callable[[], None]
    #: why this worker cannot tell how the task ended (the fork server that was its parent died; the
    #: process is gone): reported LOST, run again elsewhere; "" otherwise
    lost: str

    @property
    def returncode(self) -> int | None: ...

    async def wait(self) -> int: ...

    def kill(self) -> None: ...


class Child:
    """The subset of ``asyncio.subprocess.Process`` the executor uses."""

    lost = ""

    def __init__(
        self, popen: subprocess.Popen[bytes], stdout: asyncio.StreamReader, close_stdout: Callable[[], None]
    ) -> None:
        self._popen = popen
        self.pid = popen.pid
        self.stdout = stdout
        #: stop reading the output (a process that left the task's group may hold the pipe open forever)
        self.close_stdout = close_stdout
        self._exited: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        pidfd = os.pidfd_open(self.pid)

        def exited() -> None:
            loop.remove_reader(pidfd)
            os.close(pidfd)
            code = self._popen.wait()  # the pidfd is readable: the child is a zombie, this reaps it at once
            if not self._exited.done():
                self._exited.set_result(code)

        loop.add_reader(pidfd, exited)

    async def wait(self) -> int:
        return await asyncio.shield(self._exited)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self._popen.kill()


async def spawn(argv: list[str], cwd: Path, env: dict[str, str], stdin: bytes = b"") -> Child:
    """Start ``argv`` in a new session (its own process group), stdout and stderr into one pipe read by
    the loop; stdin from /dev/null, or a pipe already holding ``stdin`` and closed at our end (so writing
    never waits for the task)."""
    _check_stdin(stdin)
    # a start cancelled while the thread creates the process must not leave it running, unowned
    return adopt(await acquire_in_thread(_discard, start, argv, cwd, env, stdin))


def start(argv: list[str], cwd: Path, env: dict[str, str], stdin: bytes = b"") -> subprocess.Popen[bytes]:
    """The process of :func:`spawn`, created (blocking: called in a thread); :func:`adopt` it on the loop."""
    _check_stdin(stdin)
    source = _devnull()
    if stdin:
        source, ours = os.pipe()
        try:
            os.write(ours, stdin)  # all of it: the pipe is empty and holds MAX_STDIN
        finally:
            os.close(ours)
    try:
        return subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=source,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    finally:
        if stdin:
            os.close(source)


def adopt(popen: subprocess.Popen[bytes]) -> Child:
    """A process :func:`start` created, its output read and its exit watched by the running loop."""
    assert popen.stdout is not None
    # Our own descriptor for the pipe, closed exactly once by us: handing the file object to the loop
    # (uvloop closes the descriptor, the file object closes it again later) closed a reused number.
    fd = os.dup(popen.stdout.fileno())
    popen.stdout.close()
    popen.stdout = None
    reader = PipeReader(fd)
    child = Child(popen, reader.stream, reader.close)
    child._watch()
    return child


def _check_stdin(stdin: bytes) -> None:
    if len(stdin) > MAX_STDIN:
        raise ValueError(f"a task's standard input holds at most {MAX_STDIN} bytes")


@functools.cache
def _devnull() -> int:
    """/dev/null opened once per worker, read-only, for every task's standard input (``subprocess.DEVNULL``
    opens and closes it per process)."""
    return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)


async def _discard(popen: subprocess.Popen[bytes]) -> None:
    await asyncio.to_thread(discard, popen)


def discard(popen: subprocess.Popen[bytes]) -> None:
    """End a process :func:`start` created that nobody will own (its whole group), and reap it (blocking)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(popen.pid, signal.SIGKILL)
    popen.wait()
    if popen.stdout is not None:
        popen.stdout.close()


class PipeReader:
    """Feeds a non-blocking pipe into a StreamReader from the loop; closes the descriptor once."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.loop = asyncio.get_running_loop()
        self.stream = asyncio.StreamReader(limit=2**20, loop=self.loop)
        os.set_blocking(fd, False)
        self.loop.add_reader(fd, self._readable)

    def _readable(self) -> None:
        try:
            chunk = os.read(self.fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if chunk:
            self.stream.feed_data(chunk)
        else:
            self.close()

    def close(self) -> None:
        if self.fd < 0:
            return
        self.loop.remove_reader(self.fd)
        os.close(self.fd)
        self.fd = -1
        self.stream.feed_eof()
