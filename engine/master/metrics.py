"""Master metrics in the Prometheus text format (counters, gauges, and event-loop lag)."""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable

from engine.aio import cancel_and_wait


class Metrics:
    def __init__(self, prefix: str = "porpoise_master") -> None:
        self.prefix = prefix
        self.counters: collections.Counter[str] = collections.Counter()
        self.gauges: dict[str, Callable[[], float | dict[str, float]]] = {}
        #: (monotonic time, lag seconds) of the last 600 probes (60 s at the default interval)
        self.lag_samples: collections.deque[tuple[float, float]] = collections.deque(maxlen=600)
        self._task: asyncio.Task[None] | None = None

    def inc(self, name: str, n: int = 1) -> None:
        self.counters[name] += n

    def gauge(self, name: str, fn: Callable[[], float | dict[str, float]]) -> None:
        self.gauges[name] = fn

    def start_lag_probe(self, interval: float = 0.1) -> None:
        self._task = asyncio.create_task(self._probe(interval), name="loop-lag-probe")

    async def close(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)

    async def _probe(self, interval: float) -> None:
        while True:
            start = time.perf_counter()
            await asyncio.sleep(interval)
            self.lag_samples.append((time.monotonic(), max(0.0, time.perf_counter() - start - interval)))

    def lag_quantile(self, q: float, window: float | None = None) -> float:
        """Quantile of the event-loop lag over the kept samples, or over the last ``window`` seconds."""
        since = time.monotonic() - window if window is not None else float("-inf")
        ordered = sorted(lag for t, lag in self.lag_samples if t >= since)
        if not ordered:
            return 0.0
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    def render(self) -> str:
        lines = []
        for name, value in sorted(self.counters.items()):
            lines += [f"# TYPE {self.prefix}_{name}_total counter", f"{self.prefix}_{name}_total {value}"]
        for name, fn in sorted(self.gauges.items()):
            value = fn()
            lines.append(f"# TYPE {self.prefix}_{name} gauge")
            if isinstance(value, dict):
                lines += [f'{self.prefix}_{name}{{state="{k}"}} {v}' for k, v in sorted(value.items())]
            else:
                lines.append(f"{self.prefix}_{name} {value}")
        lines.append(f"# TYPE {self.prefix}_event_loop_lag_seconds summary")
        for q in (0.5, 0.99):
            lines.append(f'{self.prefix}_event_loop_lag_seconds{{quantile="{q}"}} {self.lag_quantile(q):.6f}')
        lines.append(f"# TYPE {self.prefix}_event_loop_lag_10s_seconds summary")
        for q in (0.5, 0.99):
            value = self.lag_quantile(q, 10.0)
            lines.append(f'{self.prefix}_event_loop_lag_10s_seconds{{quantile="{q}"}} {value:.6f}')
        return "\n".join(lines) + "\n"
