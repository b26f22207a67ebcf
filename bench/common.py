"""Shared benchmark helpers: private infrastructure in a temp dir, machine facts, percentiles."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

from engine.infra.etcd import EtcdServer
from engine.infra.ports import free_port


@contextmanager
def workdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="porpoise-bench-"))
    os.chmod(path, 0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextmanager
def private_etcd(base: Path) -> Iterator[EtcdServer]:
    server = EtcdServer(base / "etcd", free_port(), free_port(), base / "logs" / "etcd.log")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def exit_on_sigterm() -> None:
    """Turn SIGTERM into SystemExit so the benchmarks' finally blocks stop what they started."""
    import signal
    import sys

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


def machine() -> dict[str, object]:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False)
    return {
        "cpus": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 1024**3, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "commit": commit.stdout.strip() or "unknown",
    }
