"""Watching task processes from outside: when did each one really start and really die?

A task's own ledger row cannot say when a process killed with SIGKILL (with or without its worker)
stopped running: it never writes its end. So a task script opens a TCP connection to a
``TaskWatcher`` in the test process first thing, names itself on it, and keeps it open for its whole
life (its children inherit the descriptor). The kernel closes the connection when the last process
holding it exits, however it ends, so the watcher sees end-of-file at the moment the task's process
tree is gone, observed from outside the task and its worker.

Put ``WATCH_PREAMBLE % {"port": ...}`` (or a ``${name}`` placeholder for the port) at the top of a
SHELL task's script; it sends ``<label> <pid>``.

Times are ``time.time()`` of this machine (what PostgreSQL's ``clock_timestamp()`` reads too); each
event carries the time its ``select`` returned, so events seen together share a time (ties are not
ordered: compare with ``<``).
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time
from dataclasses import dataclass

#: bash: connect, name yourself (label, pid), keep the connection open as fd 9 for the process's life
WATCH_PREAMBLE = 'exec 9<>/dev/tcp/127.0.0.1/%(port)s || exit 1; echo "%(label)s $$" >&9\n'


@dataclass
class Life:
    """One task process as the watcher saw it (``time.time()`` seconds)."""

    label: str
    pid: int
    started: float  #: when its connection was accepted (at or after the process started)
    died: float | None = None  #: when its connection closed: the process and its children were gone


@dataclass
class _Conn:
    accepted: float
    buf: bytes = b""
    life: Life | None = None


class TaskWatcher:
    """A thread with a listening socket on loopback; ``lives`` maps (label, pid) to its Life."""

    def __init__(self) -> None:
        #: (label, pid) -> the process's Life; written by the watcher's thread under ``_lock``
        self.lives: dict[tuple[str, int], Life] = {}
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        self._listener.setblocking(False)
        self.port = self._listener.getsockname()[1]
        self._wake_r, self._wake_w = socket.socketpair()
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._listener, selectors.EVENT_READ, None)
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._thread = threading.Thread(target=self._run, name="task-watcher", daemon=True)
        self._stopping = False

    def start(self) -> TaskWatcher:
        self._thread.start()
        return self

    def close(self) -> None:
        self._stopping = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        self._thread.join(10)
        for key in list(self._sel.get_map().values()):
            with contextlib.suppress(OSError):
                key.fileobj.close()  # type: ignore[union-attr]
        self._sel.close()
        self._wake_w.close()

    def snapshot(self) -> dict[tuple[str, int], Life]:
        with self._lock:
            return {k: Life(v.label, v.pid, v.started, v.died) for k, v in self.lives.items()}

    def alive(self) -> list[Life]:
        with self._lock:
            return [v for v in self.lives.values() if v.died is None]

    def life(self, label: str) -> list[Life]:
        """Every process that named itself ``label``, oldest first."""
        with self._lock:
            found = [Life(v.label, v.pid, v.started, v.died) for v in self.lives.values() if v.label == label]
        return sorted(found, key=lambda x: x.started)

    def _run(self) -> None:
        while not self._stopping:
            events = self._sel.select(timeout=1.0)
            now = time.time()
            for key, _ in events:
                if key.data == "wake":
                    return
                if key.data is None:
                    self._accept(now)
                else:
                    self._read(key.fileobj, key.data, now)  # type: ignore[arg-type]

    def _accept(self, now: float) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            conn.setblocking(False)
            self._sel.register(conn, selectors.EVENT_READ, _Conn(now))

    def _read(self, conn: socket.socket, state: _Conn, now: float) -> None:
        try:
            data = conn.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if data:
            state.buf += data
            if state.life is None and b"\n" in state.buf:
                line = state.buf.split(b"\n", 1)[0].decode(errors="replace").split()
                if len(line) == 2 and line[1].isdigit():
                    state.life = Life(line[0], int(line[1]), state.accepted)
                    with self._lock:
                        self.lives[(state.life.label, state.life.pid)] = state.life
            return
        self._sel.unregister(conn)
        conn.close()
        if state.life is not None:
            with self._lock:
                state.life.died = now
