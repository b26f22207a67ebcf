"""The worker's side of its fork server (engine/worker/forkserver.py): starts it, asks it for tasks, and
hands the executor a process object for each (``ForkedTask``, the same surface as spawn's ``Child``).

- Started lazily by the first task that can use it, or at the worker's start (``start_soon``); a task
  arriving while it starts waits for it (at most ``start_timeout``).
- Unavailable (it failed to start, died, or did not answer in time): ``spawn`` returns None and the
  executor starts the task the normal way; a new server is tried ``retry_after`` seconds later.
- The tasks it forked when it died: their processes die with it (parent-death signal; killed here too,
  through the pidfd each came with); each one's ``wait()`` returns once its process is gone, with
  ``lost`` saying why: the executor reports them LOST (run again elsewhere, as for a lost worker).
- ``close()``: end of file on its socket; it kills what it still runs, reaps it and exits.

A tenant spawner (engine/worker/spawnserver.py, ``ForkServer(tenant=...)``, one per tenant OS user in
``TenantSpawners``) speaks the same protocol: ``start`` instead of ``spawn``, an argv started instead of a
module forked. Its tasks have no parent-death signal: dropping it first kills what it started; and since its
tenant's tasks may stop it, a task process gone without its exit reported in EXIT_REPORT_TIMEOUT drops it.

Everything runs on the loop: the socket and the pidfds are watched with ``add_reader``, nothing blocks.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import itertools
import json
import os
import pwd
import signal
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from core import jsonbody, logs
from core.errors import PorpoiseError
from engine.worker.forkserver import SPEC_LIMIT
from engine.worker.spawn import PipeReader
from engine.worker.spawnserver import REQUEST_LIMIT

log = logs.get(__name__)

#: errors sending one request that concern that request only (too big for the socket, no memory now)
_REQUEST_ERRORS = frozenset({errno.EMSGSIZE, errno.ENOBUFS, errno.ENOMEM})
#: Linux's SO_SNDBUFFORCE (<asm-generic/socket.h>; Python's socket module does not name it)
_SO_SNDBUFFORCE = 32

#: where ``engine`` is imported from: the server runs the worker's own code
_CODE_ROOT = Path(__file__).resolve().parent.parent.parent
#: seconds the server gets for its imports (a loaded machine: tens of seconds)
START_TIMEOUT = 120.0
#: seconds a task waits for the server's answer before it is judged broken
REPLY_TIMEOUT = 30.0
#: seconds after a failure before a new server is started (meanwhile tasks start the normal way)
RETRY_AFTER = 60.0
#: seconds a closing server gets to kill its tasks and exit
CLOSE_TIMEOUT = 5.0
#: seconds a tenant spawner has to report the exit of a task whose process is gone (else it is stopped or
#: wedged: dropped, its tasks LOST)
EXIT_REPORT_TIMEOUT = 10.0


class ForkServerUnavailable(PorpoiseError):
    """The fork server cannot start this task (gone, not answering, or it refused): start it normally."""


class ForkedTask:
    """A task process the fork server forked: its output pipe read here, its exit code from the server."""

    def __init__(self, reader: PipeReader, forked: bool = True) -> None:
        #: forked by a fork server (else started by a tenant spawner: an ordinary process of its own)
        self.forked = forked
        self.pid = 0
        self.stdout = reader.stream
        #: stop reading the output (a process that left the task's group may hold the pipe open forever)
        self.close_stdout = reader.close
        self.returncode: int | None = None
        #: why this worker cannot tell how it ended (the fork server died), else ""
        self.lost = ""
        self._loop = asyncio.get_running_loop()
        self._exited: asyncio.Future[int] = self._loop.create_future()
        self._pidfd = -1
        #: a tenant spawner's task whose process is gone: the deadline for the spawner's report of its exit
        self._unreported: asyncio.TimerHandle | None = None

    async def wait(self) -> int:
        return await asyncio.shield(self._exited)

    def kill(self) -> None:
        if self._pidfd >= 0:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)

    def _started(self, pid: int, pidfd: int) -> None:
        self.pid, self._pidfd = pid, pidfd

    def _ended(self, code: int, lost: str = "") -> None:
        if self._unreported is not None:
            self._unreported.cancel()
        if self._pidfd >= 0:
            self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = -1
        if not self._exited.done():
            self.returncode, self.lost = code, lost
            self._exited.set_result(code)

    def _orphaned(self, why: str) -> None:
        """Its server is gone (so it dies, by the parent-death signal): killed through its pidfd, ended
        once its process is gone."""
        if self._pidfd < 0:
            self._ended(-signal.SIGKILL, why)
            return
        self.kill()
        self._loop.add_reader(self._pidfd, self._ended, -signal.SIGKILL, why)


class ForkServer:
    """One fork server of this worker (see the module docstring)."""

    def __init__(
        self,
        modules: Sequence[str],
        env: Mapping[str, str],
        start_timeout: float = START_TIMEOUT,
        retry_after: float = RETRY_AFTER,
        tenant: pwd.struct_passwd | None = None,
    ) -> None:
        #: the modules it preloads: the only ones it runs
        self.modules = tuple(modules)
        #: a tenant spawner (engine/worker/spawnserver.py) running as this OS user, instead of a fork server
        self.tenant = tenant
        #: its own environment (passed-through variables only: nothing of the worker's secrets)
        self.env = dict(env)
        self.start_timeout = start_timeout
        self.retry_after = retry_after
        self.proc: asyncio.subprocess.Process | None = None
        self._sock: socket.socket | None = None
        self._ready = asyncio.Event()
        self._starting: asyncio.Task[bool] | None = None
        #: request id -> (its answer, the task it starts)
        self._pending: dict[int, tuple[asyncio.Future[ForkedTask], ForkedTask]] = {}
        #: pid -> a task it runs
        self._tasks: dict[int, ForkedTask] = {}
        #: servers killed, to be awaited (a task falls back only once the one that may have forked it is gone)
        self._dying: list[asyncio.subprocess.Process] = []
        self._ids = itertools.count(1)
        self._sending = asyncio.Lock()
        self._retry_at = 0.0
        self._closed = False

    @property
    def name(self) -> str:
        return "tenant spawner" if self.tenant is not None else "fork server"

    @property
    def pid(self) -> int:
        """The running server's pid (0: none)."""
        return self.proc.pid if self.proc is not None and self._ready.is_set() else 0

    def start_soon(self) -> None:
        """Start the server in the background (the worker's start, when its Connect server is known)."""
        if self._starting is None and self._sock is None and not self._closed:
            self._starting = asyncio.create_task(self._start(), name="forkserver-start")

    async def _available(self) -> bool:
        if self._closed:
            return False
        if self._sock is not None and self._ready.is_set():
            return True
        if self._starting is None:
            if asyncio.get_running_loop().time() < self._retry_at:
                return False
            self._starting = asyncio.create_task(self._start(), name="forkserver-start")
        start = self._starting
        try:
            return await asyncio.shield(start)  # shared: one waiter's cancellation is not the start's
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if start.cancelled() and (current is None or not current.cancelling()):
                return False  # the start was cancelled (the worker stops), not this waiter
            raise

    async def _start(self) -> bool:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            try:
                args = (
                    ["engine.worker.spawnserver", str(os.getpid()), str(self.tenant.pw_uid), str(self.tenant.pw_gid)]
                    if self.tenant is not None
                    else ["engine.worker.forkserver", str(os.getpid()), *self.modules]
                )
                self.proc = await asyncio.create_subprocess_exec(
                    sys.executable, "-s", "-m", *args,
                    stdin=theirs.fileno(), stdout=subprocess.DEVNULL, cwd=_CODE_ROOT, env=self.env,
                    start_new_session=True,
                )  # fmt: skip
            finally:
                theirs.close()
            if self.tenant is not None:  # a request holds a task's particulars: room for the largest
                _room_for(ours, 2 * REQUEST_LIMIT)
            ours.setblocking(False)
            self._sock = ours
            self._ready.clear()
            asyncio.get_running_loop().add_reader(ours.fileno(), self._readable)
            await asyncio.wait_for(self._ready.wait(), self.start_timeout)
            if self._sock is None:
                raise ForkServerUnavailable("it exited while starting")
            if self.tenant is not None:
                log.info("tenant spawner ready", pid=self.proc.pid, user=self.tenant.pw_name)
            else:
                log.info("fork server ready", pid=self.proc.pid, modules=self.modules)
            return True
        except (OSError, TimeoutError, ForkServerUnavailable) as exc:
            why = "no answer" if isinstance(exc, TimeoutError) else str(exc)
            log.warning(f"{self.name} not started; tasks start the normal way", error=why, retry_in=self.retry_after)
            self._drop(f"not started: {why}")
            return False
        except BaseException:
            self._drop("cancelled while starting")
            raise
        finally:
            if self._sock is not ours:  # not started (or dropped already: closing again is a no-op)
                ours.close()
            self._starting = None

    async def spawn(
        self, module: str, args: list[str], cwd: Path, env: Mapping[str, str], user: pwd.struct_passwd | None
    ) -> ForkedTask | None:
        """Fork a task running ``module.main`` (see forkserver.py); None: start it the normal way."""
        if self.tenant is not None or module not in self.modules or not await self._available():
            return None
        spec = _spec_socket(
            {"args": args, "cwd": str(cwd), "env": dict(env),
             "uid": user.pw_uid if user else None, "gid": user.pw_gid if user else None}
        )  # fmt: skip
        if spec is None:
            return None
        rid = next(self._ids)
        return await self._request(rid, jsonbody.dumps({"op": "spawn", "module": module, "id": rid}), spec)

    async def start(self, argv: list[str], cwd: Path, env: Mapping[str, str]) -> ForkedTask | None:
        """A tenant spawner's: start ``argv`` as its tenant (see spawnserver.py); None: start it the normal way."""
        if self.tenant is None or not await self._available():
            return None
        rid = next(self._ids)
        data = jsonbody.dumps({"op": "spawn", "id": rid, "argv": argv, "cwd": str(cwd), "env": dict(env)})
        if len(data) > REQUEST_LIMIT:
            return None
        return await self._request(rid, data)

    async def _request(self, rid: int, data: bytes, spec: int | None = None) -> ForkedTask | None:
        """Send request ``rid`` (``data``; with the task's particulars' socket ``spec``, a fork server's
        request): its task once started."""
        read_end, write_end = os.pipe()
        task = ForkedTask(PipeReader(read_end), forked=self.tenant is None)
        answer: asyncio.Future[ForkedTask] = asyncio.get_running_loop().create_future()
        self._pending[rid] = (answer, task)
        sent = False
        try:
            try:
                await self._send(data, [write_end] if spec is None else [write_end, spec])
                sent = True
            finally:
                os.close(write_end)  # the server (and then the task) holds them now
                if spec is not None:
                    os.close(spec)
            async with asyncio.timeout(REPLY_TIMEOUT):  # lighter than wait_for, on every task's start
                return await asyncio.shield(answer)
        except TimeoutError:
            self._drop(f"no answer to a request in {REPLY_TIMEOUT:g}s")
        except ForkServerUnavailable as exc:
            log.warning(f"task not started by the {self.name}; starting it the normal way", error=str(exc))
        except asyncio.CancelledError:
            if sent:
                await self._abandon(answer)
            task.close_stdout()
            raise
        finally:
            self._pending.pop(rid, None)
            if answer.done() and not answer.cancelled():
                answer.exception()  # retrieved (failed by a drop while this request was still being sent)
        task.close_stdout()
        await self._gone()  # a server that may have forked it is dead, and so is what it forked
        return None

    async def _abandon(self, answer: asyncio.Future[ForkedTask]) -> None:
        """The caller gave up while the server forks: what it starts must not run unowned."""
        with contextlib.suppress(Exception, asyncio.CancelledError):
            task = await asyncio.wait_for(asyncio.shield(answer), REPLY_TIMEOUT)
            task.kill()
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(task.pid, signal.SIGKILL)

    async def _send(self, data: bytes, fds: list[int]) -> None:
        # one sender at a time: a full socket has one writer callback on the loop, which a second waiter
        # would replace (the first then waited for nothing until its timeout)
        async with self._sending:
            await self._send_now(data, fds)

    async def _send_now(self, data: bytes, fds: list[int]) -> None:
        loop = asyncio.get_running_loop()
        while True:
            sock = self._sock
            if sock is None:
                raise ForkServerUnavailable(f"the {self.name} is gone")
            try:
                socket.send_fds(sock, [data], fds)
                return
            except BlockingIOError:
                writable = loop.create_future()
                loop.add_writer(sock.fileno(), _wake, writable)
                try:
                    await asyncio.wait_for(writable, REPLY_TIMEOUT)
                finally:
                    if self._sock is sock:
                        loop.remove_writer(sock.fileno())
            except OSError as exc:
                if exc.errno in _REQUEST_ERRORS:  # this request's trouble (its size, memory): not the server's
                    raise ForkServerUnavailable(f"sending a request: {exc}") from None
                self._drop(f"sending a request: {exc}")
                raise ForkServerUnavailable(str(exc)) from None

    def _readable(self) -> None:
        sock = self._sock
        while sock is not None and sock is self._sock:
            try:
                data, fds, _, _ = socket.recv_fds(sock, 65536, 1)
            except BlockingIOError:
                return
            except OSError:
                data, fds = b"", []
            if not data:
                self._drop(f"the {self.name} exited")
                return
            try:
                self._on(json.loads(data), fds)
            except (ValueError, KeyError, TypeError) as exc:
                for fd in fds:
                    os.close(fd)
                self._drop(f"a bad message from the {self.name}: {exc!r}")
                return

    def _on(self, msg: dict[str, Any], fds: list[int]) -> None:
        op = msg["op"]
        if op == "ready":
            self._ready.set()
        elif op == "started":
            pending = self._pending.pop(msg["id"], None)
            pid = int(msg["pid"])
            if pending is None:  # cannot be: the request is gone; the task must not run unknown
                for fd in fds:
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
                    os.close(fd)
                return
            answer, task = pending
            task._started(pid, fds[0] if fds else -1)
            self._tasks[pid] = task
            if self.tenant is not None and task._pidfd >= 0:  # a process its tenant may stop: watched too
                asyncio.get_running_loop().add_reader(task._pidfd, self._gone_unreported, task)
            if not answer.done():
                answer.set_result(task)
        elif op == "failed":
            pending = self._pending.pop(msg["id"], None)
            if pending is not None and not pending[0].done():
                pending[0].set_exception(ForkServerUnavailable(str(msg.get("error"))))
        elif op == "exit":
            task = self._tasks.pop(int(msg["pid"]), None)
            if task is not None:
                task._ended(int(msg["code"]))

    def _gone_unreported(self, task: ForkedTask) -> None:
        """A tenant spawner's task process is gone: its exit must be reported soon (a task of the tenant may
        have stopped the spawner, whose tasks would then hang unreported)."""
        loop = asyncio.get_running_loop()
        loop.remove_reader(task._pidfd)
        if task.returncode is None and task._unreported is None:
            task._unreported = loop.call_later(EXIT_REPORT_TIMEOUT, self._exit_unreported, task)

    def _exit_unreported(self, task: ForkedTask) -> None:
        if task.returncode is None and self._tasks.get(task.pid) is task:
            self._drop(f"no exit reported {EXIT_REPORT_TIMEOUT:g}s after task {task.pid} ended")

    def _drop(self, why: str) -> None:
        """The server is gone or useless: kill it; its tasks end LOST; new tasks start normally for a while."""
        loop = asyncio.get_running_loop()
        sock, self._sock = self._sock, None
        if sock is not None:
            loop.remove_reader(sock.fileno())
            sock.close()
        proc, self.proc = self.proc, None
        if proc is not None:
            if proc.returncode is None:
                if self.tenant is not None:
                    _kill_started(proc.pid)
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
            self._dying.append(proc)
        self._ready.set()  # a start waiting for it sees no socket
        self._retry_at = loop.time() + self.retry_after
        pending, self._pending = self._pending, {}
        for answer, _task in pending.values():
            if not answer.done():
                answer.set_exception(ForkServerUnavailable(why))
        tasks, self._tasks = self._tasks, {}
        for task in tasks.values():
            task._orphaned(f"the {self.name} died ({why})")
        if proc is not None and not self._closed:
            log.warning(f"{self.name} lost", error=why, pid=proc.pid, tasks_lost=len(tasks))

    async def _gone(self) -> None:
        """Wait until every server killed so far has exited (at most CLOSE_TIMEOUT each)."""
        dying, self._dying = self._dying, []
        for proc in dying:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), CLOSE_TIMEOUT)

    async def close(self) -> None:
        """End of file on its socket: it kills its tasks, reaps them and exits; killed if it does not."""
        self._closed = True
        if self._starting is not None:
            self._starting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._starting
        proc, sock = self.proc, self._sock
        if sock is not None:
            self._sock = None
            asyncio.get_running_loop().remove_reader(sock.fileno())
            sock.close()
        if proc is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), CLOSE_TIMEOUT)
        self._drop("the worker stopped")  # whatever is left: killed, its tasks orphaned
        await self._gone()


class TenantSpawners:
    """The worker's tenant spawners: one per OS user its tasks run as, started by that user's first task."""

    #: seconds a spawner gets to start (a bare interpreter; the task waiting for it starts normally after)
    START_TIMEOUT = 20.0

    def __init__(self, env: Mapping[str, str], retry_after: float = RETRY_AFTER) -> None:
        self.env = dict(env)
        self.retry_after = retry_after
        #: (uid, gid) -> its spawner
        self.spawners: dict[tuple[int, int], ForkServer] = {}
        self._closed = False

    async def start(
        self, user: pwd.struct_passwd, argv: list[str], cwd: Path, env: Mapping[str, str]
    ) -> ForkedTask | None:
        """``argv`` started as ``user`` by its spawner; None: start it the normal way."""
        if self._closed:
            return None
        key = (user.pw_uid, user.pw_gid)
        spawner = self.spawners.get(key)
        if spawner is None:
            spawner = ForkServer(
                (), self.env, start_timeout=self.START_TIMEOUT, retry_after=self.retry_after, tenant=user
            )
            self.spawners[key] = spawner
        return await spawner.start(argv, cwd, env)

    async def close(self) -> None:
        self._closed = True
        spawners, self.spawners = list(self.spawners.values()), {}
        await asyncio.gather(*(spawner.close() for spawner in spawners))  # each waits for its own to exit


def _kill_started(pid: int) -> None:
    """Stop the tenant spawner ``pid`` (it starts nothing more) and kill what it started, each with its group:
    its tasks have no parent-death signal, and one it started but did not report yet is known to nobody."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGSTOP)
    for threads in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            for child in threads.read_text().split():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(int(child), signal.SIGKILL)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(child), signal.SIGKILL)


def _room_for(sock: socket.socket, size: int) -> None:
    """A send buffer of at least ``size`` bytes (root may pass net.core.wmem_max; a request that still does
    not fit fails alone: _REQUEST_ERRORS)."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, _SO_SNDBUFFORCE, size)
    except OSError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, size)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _spec_socket(spec: dict[str, Any]) -> int | None:
    """A socket holding a task's particulars, its writing end closed: the descriptor to pass (None: too big)."""
    data = jsonbody.dumps(spec)
    if len(data) > SPEC_LIMIT:
        return None
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with ours:
        ours.setblocking(False)
        try:
            complete = ours.send(data) == len(data)
        except BlockingIOError:
            complete = False
    if not complete:
        theirs.close()
        return None
    return theirs.detach()
