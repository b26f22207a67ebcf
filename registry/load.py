"""How busy the CPUs are right now, for the overload guard.

The guard (``max_cpu_load_avg``: masters stop claiming, workers refuse dispatches) follows
DolphinScheduler and compares the kernel's 1-minute load average with a limit. That figure decays by
e^(-t/60): after a burst of short tasks it stays above the limit for a minute or more while the CPUs
have nothing to do — measured here, a worker refused work through a throughput run with the machine
64 % idle. A 5-second average of the run queue instead throttled every burst (the run queue of 400
starting tasks is far above 2 x cores) and left the machine 40 % idle.

So the guard holds work back only while both are true: the load average is over the limit AND the
CPUs are busy now (at least ``BUSY`` of the last ``period`` seconds). Work is refused while the machine
is saturated, and taken again within a sampling period of the CPUs having room.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import psutil

from core.aio import BackgroundService

#: the share of CPU time over the last period above which the CPUs count as busy
BUSY = 0.9


def cpu_times() -> tuple[float, float]:
    """(total, idle) CPU seconds since boot, over all CPUs."""
    t = psutil.cpu_times()
    idle = t.idle + getattr(t, "iowait", 0.0)
    return sum(t), idle


class CpuMeter(BackgroundService):
    """The busy share of all CPUs over the last ``period`` seconds, sampled off the event loop."""

    task_name = "cpu-meter"

    def __init__(self, period: float = 0.5, read: Callable[[], tuple[float, float]] = cpu_times) -> None:
        if period <= 0:
            raise ValueError("the sampling period must be positive")
        self.period = period
        self._read = read
        self._last: tuple[float, float] | None = None
        #: None until two samples exist
        self.busy: float | None = None

    def add(self, total: float, idle: float) -> None:
        if self._last is not None:
            d_total, d_idle = total - self._last[0], idle - self._last[1]
            if d_total > 0:
                self.busy = min(max(1.0 - d_idle / d_total, 0.0), 1.0)
        self._last = (total, idle)

    async def sample(self) -> None:
        self.add(*await asyncio.to_thread(self._read))

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(OSError, RuntimeError):
                await self.sample()
            await asyncio.sleep(self.period)
