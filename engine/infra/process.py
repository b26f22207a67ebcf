"""Child processes the launcher starts, records, and later stops: exactly those, never a recycled pid."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

from core.errors import InfraError


@dataclass
class ProcessRecord:
    """What identifies a started process: its pid plus its start time (pids get recycled)."""

    name: str
    pid: int
    create_time: float
    argv: list[str]
    log: str
    stop_signal: int = int(signal.SIGTERM)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProcessRecord:
        return cls(**data)

    def process(self) -> psutil.Process | None:
        """The live process this record describes, or None (gone, zombie, or pid reused)."""
        try:
            proc = psutil.Process(self.pid)
            if abs(proc.create_time() - self.create_time) > 0.05:
                return None
            if proc.status() == psutil.STATUS_ZOMBIE:
                return None
            return proc
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return None

    def alive(self) -> bool:
        return self.process() is not None

    def signal(self, sig: int) -> bool:
        proc = self.process()
        if proc is None:
            return False
        try:
            proc.send_signal(sig)
        except psutil.NoSuchProcess:
            return False
        return True

    def stop(self, timeout: float) -> bool:
        """Signal the process to stop, wait, then SIGKILL it. Returns True if it had been alive."""
        proc = self.process()
        if proc is None:
            return False
        try:
            proc.send_signal(self.stop_signal)
            try:
                proc.wait(timeout)
            except psutil.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        except psutil.NoSuchProcess:
            pass
        return True


class ManagedProcess:
    """Starts one child in its own session (so the launcher, not the terminal, decides when it stops)."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        user: str | None = None,
        stop_signal: int = signal.SIGTERM,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.user = user
        self.stop_signal = stop_signal
        self.popen: subprocess.Popen[bytes] | None = None
        self.record: ProcessRecord | None = None

    def start(self) -> ProcessRecord:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child keeps the descriptor
        try:
            self.popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.cwd,
                user=self.user,
                group=self.user,
                extra_groups=[] if self.user else None,
                start_new_session=True,
            )
        except FileNotFoundError as exc:
            raise InfraError(f"{self.name}: cannot start {self.argv[0]}: {exc.strerror}") from exc
        finally:
            log.close()
        try:
            create_time = psutil.Process(self.popen.pid).create_time()
        except psutil.NoSuchProcess:
            create_time = time.time()
        self.record = ProcessRecord(
            name=self.name,
            pid=self.popen.pid,
            create_time=create_time,
            argv=self.argv,
            log=str(self.log_path),
            stop_signal=int(self.stop_signal),
        )
        return self.record

    def exited(self) -> int | None:
        """Exit code if the child has exited (reaped), else None."""
        return None if self.popen is None else self.popen.poll()

    def tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout: float) -> None:
        if self.record is not None:
            self.record.stop(timeout)
        if self.popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=1)


def wait_until(predicate: Any, timeout: float, interval: float = 0.05, what: str = "condition") -> None:
    """Poll ``predicate`` until true; raise InfraError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return
        if time.monotonic() >= deadline:
            raise InfraError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def in_netns(netns: str, argv: list[str], uid: int | None = None, gid: int | None = None) -> list[str]:
    """``argv`` run inside the network namespace ``netns`` (``ip netns add``; empty = this one) through
    ``nsenter``, which execs it (the pid stays the program's). Entering a namespace needs root, so a
    program that must run as another user gets ``uid``/``gid`` here, applied after entering."""
    if not netns:
        return argv
    ids = [] if uid is None else ["--setuid", str(uid), "--setgid", str(gid if gid is not None else uid)]
    return ["nsenter", f"--net=/run/netns/{netns}", *ids, "--", *argv]


def is_root() -> bool:
    return os.geteuid() == 0
