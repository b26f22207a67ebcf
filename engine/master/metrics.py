"""Master metrics in the Prometheus text format (counters, gauges, and event-loop lag)."""

from __future__ import annotations

import asyncio
import collections
import gc
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
        #: (monotonic time, generation, pause seconds) of the last 1,000 garbage collections
        self.gc_pauses: collections.deque[tuple[float, int, float]] = collections.deque(maxlen=1000)
        self._gc_start = 0.0

    def inc(self, name: str, n: int = 1) -> None:
        self.counters[name] += n

    def gauge(self, name: str, fn: Callable[[], float | dict[str, float]]) -> None:
        self.gauges[name] = fn

    def start_lag_probe(self, interval: float = 0.1) -> None:
        self._task = asyncio.create_task(self._probe(interval), name="loop-lag-probe")
        gc.callbacks.append(self._on_gc)

    async def close(self) -> None:
        task, self._task = self._task, None
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        await cancel_and_wait(task)

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        """How long each collection stopped the loop (a full one walks every live object)."""
        if phase == "start":
            self._gc_start = time.perf_counter()
        else:
            self.gc_pauses.append((time.monotonic(), info.get("generation", 0), time.perf_counter() - self._gc_start))

    def gc_pause_max(self, generation: int, window: float = 60.0) -> float:
        since = time.monotonic() - window
        return max((p for t, g, p in self.gc_pauses if g == generation and t >= since), default=0.0)

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
        lines.append(f"# TYPE {self.prefix}_gc_pause_max_60s_seconds gauge")
        for generation in (0, 1, 2):
            value = self.gc_pause_max(generation)
            lines.append(f'{self.prefix}_gc_pause_max_60s_seconds{{generation="{generation}"}} {value:.6f}')
        lines.append(f"# TYPE {self.prefix}_event_loop_lag_10s_seconds summary")
        for q in (0.5, 0.99):
            value = self.lag_quantile(q, 10.0)
            lines.append(f'{self.prefix}_event_loop_lag_10s_seconds{{quantile="{q}"}} {value:.6f}')
        return "\n".join(lines) + "\n"
