"""The tenant spawner: a helper process of the worker that runs as one tenant's OS user and starts that
tenant's task processes, so a task runs as its tenant after a single ``exec``.

usage: python -m engine.worker.spawnserver WORKER_PID UID GID   (fd 0: the control socket)

Why: the worker runs as root and a task as its tenant. Started from the worker, the uid change needs
either ``setpriv`` in front of the task (a second ``exec``: the task's start-up CPU doubled, 1.4 -> 2.8 ms
measured for ``bash script.sh`` here) or ``fork`` instead of ``vfork`` (Python's ``subprocess`` does not
use ``vfork`` with a uid change; a fork of the worker costs more still). Started from a process that
already is the tenant, ``os.posix_spawn`` (glibc: ``clone`` with ``CLONE_VM | CLONE_VFORK``, then the
``exec``) starts it and the task's own program is the only one executed; it costs this process half the
CPU of ``subprocess.Popen`` (110 against 220 us per start, measured here).

The task starts as on the normal path (``setpriv --reuid --regid --clear-groups`` + ``argv``): its own
session and process group, stdin /dev/null, stdout and stderr into the pipe the worker reads (passed with
the request), no other descriptor, the tenant's uid and gid with no supplementary group, the exec dir as
working directory and the environment the worker computed for it, SIGPIPE and SIGXFSZ at their default
action (as ``subprocess`` restores them). A request carries the particulars itself (``{"op": "spawn",
"id": N, "argv": [...], "cwd": D, "env": {...}}``, at most REQUEST_LIMIT bytes) and one descriptor, the
task's output pipe: no socket of its own per task as the fork server needs (whose children share its
memory), since this process holds only its own tenant's particulars. The answers and the lifetime are the
fork server's (engine/worker/forkserver.py: ``started`` with a pidfd, ``exit`` with the code, every task
killed at the end of file); the worker's side is engine/worker/forkclient.py.

Trust: the worker acts on what this process says (pids, pidfds, exit codes) as root, and the tenant's own
tasks run with its uid. So it becomes the tenant itself, dropping root's uid, gid and groups before it reads
any request: the kernel marks a process that changed its uid this way non-dumpable (and we say so again),
so a process of the same user can neither trace it nor read its memory or its /proc files. It holds the
particulars (argv, environment) of its own tenant's tasks only: one spawner per tenant. A task of the tenant
can signal it, harming only its tenant's tasks on this worker (which it could kill directly anyway):
SIGTERM ends it, killing its tasks; SIGKILL ends it at once, and the worker kills its known tasks through
their pidfds and reports them LOST (a task started at that very moment, not yet reported, is known to
nobody and runs on); SIGSTOP stops it, and the worker drops it (its tasks LOST) once a task's process is
gone for forkclient.EXIT_REPORT_TIMEOUT without its exit reported.

Lifetime: these tasks cannot carry a parent-death signal (``vfork`` allows no code in the child). Ours is
SIGTERM, handled: the worker's death ends the loop, which kills every task started here, one not yet
reported included. A spawner the worker drops (no answer, no exit report, the worker stops) is stopped
first, then what it started is killed with each group, then it (forkclient ``_kill_started``); past the
reaper's deadline (a stopped worker) the reaper does the same to every child of the worker
(engine/worker/reaper.py).
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
import sys
from typing import Any

from engine.worker.forkserver import _PR_SET_DUMPABLE, SPEC_LIMIT, Server, _prctl, die_with_parent

#: largest request (the task's particulars travel in it)
REQUEST_LIMIT = SPEC_LIMIT + 1024
#: signals a task starts with at their default action, as ``subprocess`` restores them (Python ignores
#: SIGPIPE: a task inheriting that would see EPIPE errors where a shell pipeline's writer should just end)
_DEFAULT_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ)


class ExecServer(Server):
    """Starts each requested ``argv`` as a new process (``posix_spawn``: ``vfork`` + ``exec``) instead of
    forking a module. A request carries the task's particulars itself and one descriptor, its output pipe."""

    request_fds = 1
    max_message = REQUEST_LIMIT

    def __init__(self, sock: socket.socket) -> None:
        super().__init__(sock, {})
        self._devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)

    def _launch(self, rid: int, msg: dict[str, Any], fds: list[int]) -> None:
        (out,) = fds
        argv = [str(a) for a in msg["argv"]]
        env = {str(k): str(v) for k, v in msg["env"].items()}
        os.chdir(str(msg["cwd"]))
        try:
            pid = os.posix_spawn(
                _program(argv[0], env),
                argv,
                env,
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, self._devnull, 0),
                    (os.POSIX_SPAWN_DUP2, out, 1),
                    (os.POSIX_SPAWN_DUP2, out, 2),
                ],
                setsid=True,
                setsigdef=_DEFAULT_SIGNALS,
            )  # every other descriptor of ours closes on exec (the request's: received so)
        finally:
            os.chdir("/")  # hold no exec dir
        self.children.add(pid)
        self._started(rid, pid)


def _program(name: str, env: dict[str, str]) -> str:
    """The file ``name`` executes: found on the task's PATH as ``subprocess`` finds it."""
    if os.sep in name:
        return name
    for directory in os.get_exec_path(env):
        path = os.path.join(directory, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    # the name stays out of the message: it is the task's, and the answer carrying the message is bounded
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), name)


def become(uid: int, gid: int) -> None:
    """This process as ``uid``/``gid`` with no supplementary group, not dumpable (see the module docstring)."""
    if uid == 0:
        raise ValueError("a tenant spawner never runs as root")
    _prctl(_PR_SET_DUMPABLE, 0)
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    _prctl(_PR_SET_DUMPABLE, 0)  # the uid change set it from fs.suid_dumpable: never 1 here
    if os.getuid() != uid or os.geteuid() != uid or os.getgid() != gid or os.getgroups() not in ([], [gid]):
        raise OSError(f"could not become uid {uid} gid {gid}")


def main(argv: list[str]) -> int:
    worker, uid, gid = int(argv[1]), int(argv[2]), int(argv[3])
    sock = socket.socket(fileno=os.dup(0))
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.chdir("/")  # hold no directory of the worker's
    become(uid, gid)
    server = ExecServer(sock)
    # the worker's death ends the loop, which kills every task started here (a task started but not yet
    # known to the worker's reaper included: these tasks have no parent-death signal of their own)
    signal.signal(signal.SIGTERM, lambda _sig, _frame: setattr(server, "stopping", True))
    die_with_parent(signal.SIGTERM)  # after the uid change, which clears it
    if os.getppid() != worker:  # the worker died while starting us
        return 1
    with contextlib.closing(sock):
        server.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
