"""The spawn limit: how many ``bash script.sh`` (a SHELL task's process, running ``true``) bare Python
starts and reaps per second on this machine, with as many in flight as the engine benchmark lets the
worker run. No scheduler, no logs, no database: the ceiling the engine's fan-out throughput is measured
against (``throughput_tasks_per_s`` / ``spawn_limit_per_s``), in the same run, so the ratio means the
same on a quiet and on a loaded machine.
"""

from __future__ import annotations

import collections
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.common import main, rounded, workdir

SIZES = {"tiny": {"spawns": 50}, "quick": {"spawns": 1000}, "full": {"spawns": 3000}}
#: processes in flight at once (the worker runs hundreds of tasks at once; a few dozen already keep both
#: cores busy with bash start-ups)
IN_FLIGHT = 32


def spawn_limit(spawns: int, in_flight: int = IN_FLIGHT) -> dict[str, float]:
    """Start ``spawns`` ``bash script.sh`` processes (``true``), at most ``in_flight`` at once, each in the
    directory holding its script and with its output to /dev/null, and reap them; processes per second."""
    with workdir() as base:
        script = Path(base) / "script.sh"
        script.write_text("true\n")
        running: collections.deque[subprocess.Popen[bytes]] = collections.deque()
        failed = 0
        started = time.perf_counter()
        for _ in range(spawns):
            if len(running) >= in_flight:
                failed += running.popleft().wait() != 0
            running.append(
                subprocess.Popen(
                    ["bash", "script.sh"],
                    cwd=base,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.STDOUT,
                )
            )
        while running:
            failed += running.popleft().wait() != 0
        seconds = time.perf_counter() - started
    if failed:
        raise RuntimeError(f"spawn limit: {failed} of {spawns} bash processes failed")
    return {"spawn_limit_processes": spawns, "spawn_limit_per_s": spawns / seconds, "spawn_limit_seconds": seconds}


def run(size: str = "full") -> dict[str, Any]:
    return rounded({"benchmark": "spawn", "size": size} | spawn_limit(SIZES[size]["spawns"]))


if __name__ == "__main__":
    main(run)
