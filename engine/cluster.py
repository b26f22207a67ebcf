"""Local multi-process cluster (``make cluster MASTERS=3 WORKERS=2`` / ``make stop``).

Detached: ``start`` returns once every process is up and leaves them running; ``stop`` stops
exactly the processes recorded in the run directory.
"""

from __future__ import annotations

from pathlib import Path

from engine import logs
from engine.config import Config
from engine.infra.stack import Stack

log = logs.get(__name__)


def start(cfg: Config, run_dir: Path, masters: int, workers: int) -> Stack:
    stack = Stack(run_dir, cfg)
    try:
        stack.start_infra()
        for i in range(masters):
            stack.start_node("master", f"master-{i + 1}")
        for i in range(workers):
            stack.start_node("worker", f"worker-{i + 1}")
    except BaseException:
        stack.stop_started()
        raise
    return stack


def stop(cfg: Config, run_dir: Path) -> list[str]:
    if not (run_dir / "state.json").exists():
        return []
    return Stack(run_dir, cfg).stop_all()


def status(cfg: Config, run_dir: Path) -> list[tuple[str, int, bool]]:
    if not (run_dir / "state.json").exists():
        return []
    return [(r.name, r.pid, r.alive()) for r in Stack(run_dir, cfg).records()]
