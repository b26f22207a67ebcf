"""The fork server ("zygote"): a helper process of the worker that imports a task runner's modules once
(the Spark Connect client: pyspark.sql.connect, pandas, pyarrow, grpc — seconds of start-up per task
otherwise) and forks each task from that state. The worker side is engine/worker/forkclient.py.

usage: python -m engine.worker.forkserver WORKER_PID MODULE...   (fd 0: the control socket)

The child becomes the task exactly as the normal path (``setpriv`` + ``python -m MODULE``) would start it,
before any of the task's code runs: its own session and process group (``setsid``: the worker's kill of the
group and the reaper's work unchanged), stdin /dev/null, stdout and stderr into the pipe the worker reads
(passed with the request, SCM_RIGHTS), no other descriptor, the tenant's uid and gid with no supplementary
group (``setgroups([])``, ``setgid``, ``setuid``: ``setpriv --reuid --regid --clear-groups``; dumpable
again afterwards, as after an ``exec``), the exec dir as working directory, and the environment the worker
computed for it (engine/worker/taskenv.py) instead of ours; then ``MODULE.main([MODULE's file, *args])``
runs in it and its return value, ``SystemExit`` or uncaught exception becomes the exit code as with
``python -m``.

What a task inherits is this server's memory, so nothing private may be in it: the server starts with an
environment of passed-through variables only (none of the worker's secrets), and it never reads a task's
particulars (arguments, directory, environment, user): the worker writes them into a socket of that task's
own, passed with the request and read by the child only. So no task finds another's in its memory.

Lifetime: the server dies with the worker (``PR_SET_PDEATHSIG``, and the control socket's end of file:
it kills its children, reaps them and exits); each child dies with the server (``PR_SET_PDEATHSIG``, set
after the uid change, which clears it): a task forked but not yet known to the worker's reaper cannot
outlive the server, which the reaper kills as a child of the worker. The server stays single-threaded
(the parent-death signal follows the thread that forked).

Protocol: one ``SOCK_SEQPACKET`` socket pair, one JSON object per message.

- worker -> server: ``{"op": "spawn", "id": N, "module": M}`` with two descriptors attached: the task's
  output pipe (write end) and the task's own socket, from which the child reads ``{"args": [...], "cwd": D,
  "env": {...}, "uid": U | null, "gid": G | null}`` (the worker wrote it and closed its end);
- server -> worker: ``{"op": "ready", "pid": P}`` once its imports are done; per request ``{"op":
  "started", "id": N, "pid": P}`` with a pidfd of the task attached, or ``{"op": "failed", "id": N,
  "error": "..."}``; ``{"op": "exit", "pid": P, "code": C}`` when a task ended (C as ``subprocess``
  reports it: ``-signal`` when killed by one). The remaining processes of its group are killed before it
  is reaped (the executor does so right after anyway; here its pid still holds the group id, so no
  recycled pid is hit).
"""

from __future__ import annotations

import array
import atexit
import contextlib
import ctypes
import importlib
import json
import os
import selectors
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from types import ModuleType
from typing import Any

#: largest control message
MAX_MESSAGE = 65536
#: largest task particulars (its environment above all) the worker sends: less than a socket's buffer holds
SPEC_LIMIT = 100_000
#: longest error text a ``failed`` answer carries
ERROR_LIMIT = 500
#: exit code of a child whose set-up failed before the task's code ran (a shell's "cannot execute")
SETUP_FAILED = 126
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}, {value})")


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """Have the kernel send ``sig`` to this process when the thread that forked it ends."""
    _prctl(_PR_SET_PDEATHSIG, sig)


def exit_code(main: Callable[[list[str]], Any], argv: list[str]) -> int:
    """Run ``main(argv)`` and what a Python interpreter does at its end: the exit code ``python -m``
    would report (a returned or ``SystemExit`` code; 1 and a traceback on stderr for an exception), after
    the threads it started and the ``atexit`` functions (the Connect client's among them)."""
    try:
        code = _code(main(argv))
    except SystemExit as exc:
        code = _code(exc.code)
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        # what Py_FinalizeEx does first: threading's exit hooks (a thread pool's workers told to end),
        # then every non-daemon thread joined; then the atexit functions
        threading._shutdown()  # type: ignore[attr-defined]
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
    return code


def _code(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    print(value, file=sys.stderr)  # sys.exit("message"): printed, exit code 1
    return 1


class Server:
    #: descriptors a request carries, and its largest size
    request_fds = 2
    max_message = MAX_MESSAGE

    def __init__(self, sock: socket.socket, modules: dict[str, ModuleType]) -> None:
        self.sock = sock
        self.modules = modules
        #: pids of the tasks forked and not reaped yet
        self.children: set[int] = set()
        #: set by a signal handler: the loop ends (its tasks killed) at its next wake-up
        self.stopping = False
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        signal.set_wakeup_fd(self._wake_w)
        signal.signal(signal.SIGCHLD, lambda _sig, _frame: None)  # the wakeup byte is what matters

    def _send(self, fds: list[int] | None = None, **msg: Any) -> None:
        with contextlib.suppress(OSError):  # the worker is gone: the end of file follows
            socket.send_fds(self.sock, [json.dumps(msg).encode()], fds or [])

    def serve(self) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self.sock, selectors.EVENT_READ)
        selector.register(self._wake_r, selectors.EVENT_READ)
        self._send(op="ready", pid=os.getpid())
        try:
            while True:
                for key, _ in selector.select():
                    if key.fileobj is self.sock:
                        if not self._request():
                            return
                    else:
                        with contextlib.suppress(BlockingIOError):
                            os.read(self._wake_r, 4096)
                        self._reap()
                if self.stopping:
                    return
        finally:
            self._kill_all()

    def _request(self) -> bool:
        """Handle one request; False at the end of file (the worker closed its end, or died)."""
        try:
            data, fds, flags = _receive(self.sock, self.max_message, self.request_fds)
        except ConnectionError:
            return False
        msg: Any = None
        try:
            if not data:
                return False
            if flags & socket.MSG_TRUNC:
                raise ValueError(f"a request over {self.max_message} bytes")
            msg = json.loads(data)
            rid = msg.get("id")
            if flags & socket.MSG_CTRUNC or len(fds) != self.request_fds:
                self._send(op="failed", id=rid, error=f"a request with {self.request_fds} descriptors expected")
            else:
                self._launch(rid, msg, fds)
            return True
        except Exception as exc:  # a bad request or a failed fork: that request fails, the server goes on
            rid = msg.get("id") if isinstance(msg, dict) else None
            self._send(op="failed", id=rid, error=repr(exc)[:ERROR_LIMIT])  # an answer stays small
            return True
        finally:
            for fd in fds:
                os.close(fd)

    def _launch(self, rid: int, msg: dict[str, Any], fds: list[int]) -> None:
        """Start the task request ``rid`` asks for (``fds``: its output pipe, its particulars' socket) and tell
        the worker; raises (the request fails) or sends ``failed`` when it cannot."""
        if msg.get("module") not in self.modules:
            self._send(op="failed", id=rid, error=f"module {msg.get('module')!r} is not preloaded here")
            return
        out, spec = fds
        self._started(rid, self._fork(msg["module"], out, spec))

    def _fork(self, module: str, out: int, spec: int) -> int:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        me = os.getpid()
        pid = os.fork()
        if pid == 0:  # the task; never returns
            code = SETUP_FAILED
            try:
                code = self._become(self.modules[module], out, spec, me)
            except BaseException:
                with contextlib.suppress(Exception):
                    os.write(2, f"[porpoise] fork server: task set-up failed: {traceback.format_exc()}".encode())
            finally:
                os._exit(code)
        self.children.add(pid)
        return pid

    def _started(self, rid: int, pid: int) -> None:
        """Tell the worker, with a pidfd of the task: taken before we reap it, it names this process even
        once its pid is reused (the worker kills through it when we are gone)."""
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:  # cannot be while it is our unreaped child; if it were, it must not run unknown
            os.kill(pid, signal.SIGKILL)
            raise
        try:
            self._send([pidfd], op="started", id=rid, pid=pid)
        finally:
            os.close(pidfd)

    def _become(self, module: ModuleType, out: int, spec_fd: int, server: int) -> int:
        with os.fdopen(spec_fd, "rb", closefd=False) as fh:  # its own particulars, read by it alone
            spec = json.loads(fh.read())
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # our socket, our pipe, the request's descriptors
        os.chdir(spec["cwd"])  # as root, as Popen(cwd=) before setpriv
        if spec.get("uid") is not None:
            os.setgroups([])
            os.setgid(int(spec["gid"]))
            os.setuid(int(spec["uid"]))
            _prctl(_PR_SET_DUMPABLE, 1)  # as after an exec: its own /proc files are its user's
        die_with_parent()  # after the uid change, which clears it
        if os.getppid() != server:  # the server died before that: so do we
            os.kill(os.getpid(), signal.SIGKILL)
        os.environ.clear()
        os.environ.update(spec["env"])
        time.tzset()  # its TZ, not ours
        sys.path[0] = os.getcwd()  # as `python -m` started in the exec dir
        _reseed()
        sys.argv = [str(module.__file__), *spec["args"]]
        return exit_code(module.main, list(sys.argv))

    def _reap(self) -> None:
        while True:
            try:
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if info is None:
                return
            pid = info.si_pid
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)  # its group's stragglers, while its pid still holds the id
            _, status = os.waitpid(pid, 0)
            self.children.discard(pid)
            self._send(op="exit", pid=pid, code=os.waitstatus_to_exitcode(status))

    def _kill_all(self) -> None:
        """The worker is gone: no task of ours may run on unowned."""
        for pid in list(self.children):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in list(self.children):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        self.children.clear()


def _receive(sock: socket.socket, size: int, maxfds: int) -> tuple[bytes, list[int], int]:
    """One message and its descriptors, which close on exec (a process started here inherits none of them;
    ``socket.recv_fds`` drops the flag that says so before Python 3.12)."""
    fds = array.array("i")
    data, ancillary, flags, _ = sock.recvmsg(size, socket.CMSG_LEN(maxfds * fds.itemsize), socket.MSG_CMSG_CLOEXEC)
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - (len(payload) % fds.itemsize)])
    return data, list(fds), flags


def _reseed() -> None:
    """Every task forked from here would draw numpy's global random numbers from the same state (Python's
    own ``random`` reseeds itself in a forked child)."""
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        with contextlib.suppress(Exception):
            numpy_random.seed()


def main(argv: list[str]) -> int:
    worker = int(argv[1])
    die_with_parent()
    if os.getppid() != worker:  # the worker died while starting us
        return 1
    sock = socket.socket(fileno=os.dup(0))
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    modules = {}
    for name in argv[2:]:
        module = importlib.import_module(name)
        for extra in getattr(module, "PRELOAD", ()):
            importlib.import_module(extra)
        modules[name] = module
    os.chdir("/")  # hold no directory of the worker's
    if threading.active_count() > 1:  # a forked child would miss them (native ones, numpy's and pyarrow's
        # pools, are theirs to restart after a fork): refuse rather than fork from an inconsistent state
        print(f"fork server: {threading.active_count()} Python threads after the imports", file=sys.stderr)
        return 1
    Server(sock, modules).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
