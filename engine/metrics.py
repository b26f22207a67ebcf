"""Every node's metrics (master, worker, API) in one prometheus_client registry per process.

The metrics a role exposes are declared in ``CATALOG`` (name, kind, help, labels), so every counter is
present from zero and ``docs/METRICS.md`` can be checked against it (tests/test_metrics.py). Besides
counters and histograms a node has callback gauges (read at scrape time), the event-loop lag probe and
the longest garbage-collection pause, and prometheus_client's process / platform / GC collectors."""

from __future__ import annotations

import asyncio
import collections
import gc
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from core import logs
from core.aio import cancel_and_wait

log = logs.get(__name__)

#: no ``<name>_created`` series next to every counter and histogram (one per counter is noise here)
prometheus_client.disable_created_metrics()

CONTENT_TYPE = prometheus_client.CONTENT_TYPE_LATEST

#: latency buckets (seconds) for what takes milliseconds normally and seconds when something is wrong
FAST = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: buckets (seconds) for what takes seconds to hours: task run and queue times
SLOW = (0.01, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0, 24 * 3600.0)


@dataclass(frozen=True)
class Spec:
    kind: str  # counter | histogram | gauge (a callback gauge, registered by the node)
    name: str
    help: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] = FAST


_SHARED = (
    Spec("histogram", "rpc_latency_seconds", "RPC calls this node made, by method and outcome", ("method", "outcome")),
    Spec("gauge", "event_loop_lag_seconds", "Event-loop lag over the last 60 s, by quantile", ("quantile",)),
    Spec("gauge", "event_loop_lag_10s_seconds", "Event-loop lag over the last 10 s, by quantile", ("quantile",)),
    Spec("gauge", "gc_pause_max_60s_seconds", "Longest garbage-collection pause in 60 s", ("generation",)),
    Spec("gauge", "up_seconds", "Seconds since this process started"),
    Spec("gauge", "clock_skew_seconds", "Each peer's wall clock less ours, from its last RPC answer", ("peer",)),
    Spec("counter", "clock_skew_alarms", "RPC answers from a peer whose clock was off ours past master.max_clock_skew"),
)
_DB = (Spec("histogram", "db_pool_wait_seconds", "Time spent waiting for a database connection from the pool"),)

CATALOG: dict[str, tuple[Spec, ...]] = {
    "master": (
        *_SHARED,
        *_DB,
        Spec("counter", "commands_claimed", "Commands turned into workflow instances"),
        Spec("counter", "commands_failed", "Commands moved to error_command"),
        Spec("counter", "overload_events", "Claim rounds skipped because this master was overloaded"),
        Spec("counter", "task_results", "Task results received from workers"),
        Spec("counter", "report_batches", "Report batches received from workers"),
        Spec("counter", "instances_failed_over", "Workflow instances taken over from dead masters"),
        Spec("counter", "schedule_fires", "Cron fire times turned into commands"),
        Spec("counter", "schedule_misfires_dropped", "Cron fire times dropped by the misfire policy"),
        Spec("counter", "retention_passes", "Retention passes this master ran (holding the retention job lock)"),
        Spec("counter", "retention_removed_instances", "Finished workflow instances the retention job removed"),
        Spec("counter", "dispatch_batches", "Dispatch calls sent to workers"),
        Spec("counter", "dispatch_errors", "Dispatch calls that failed"),
        Spec("counter", "dispatch_refusals", "Attempts a worker refused"),
        Spec("counter", "tasks_dispatched", "Attempts a worker accepted"),
        Spec("counter", "dispatch_doubts", "Attempts whose dispatch reply was lost (asked again)"),
        Spec("counter", "dispatch_doubts_confirmed", "Attempts in doubt the worker said it had"),
        Spec("counter", "dispatches_lost", "Attempts in doubt that went to fault tolerance"),
        Spec("histogram", "command_wait_seconds", "From a command's insert to its claim", buckets=SLOW),
        Spec("histogram", "dispatch_wait_seconds", "From an attempt ready to dispatch to a worker accepting it"),
        Spec("gauge", "actors", "Workflow instances this master owns (live actors)"),
        Spec("gauge", "dispatch_queue", "Attempts waiting for a worker"),
        Spec("gauge", "timers", "Timers on the state wheel"),
        Spec(
            "gauge",
            "gc_heap_frozen",
            "1 while the heap is frozen out of full collections (from a claim or takeover until as many actors ended)",
        ),
        Spec("gauge", "instances_finished", "Workflow instances finished here since start, by state", ("state",)),
        Spec("gauge", "instances_running", "Owned workflow instances, by state", ("state",)),
    ),
    "worker": (
        *_SHARED,
        Spec("counter", "dispatches_accepted", "Attempts this worker admitted"),
        Spec("counter", "dispatches_refused", "Attempts this worker refused"),
        Spec("counter", "tasks_finished", "Attempts that ended here, by state", ("state",)),
        Spec("histogram", "queue_time_seconds", "From an attempt admitted here to its process started", buckets=SLOW),
        Spec("histogram", "task_run_seconds", "Run time of attempts, by task type and state", ("type", "state"), SLOW),
        Spec("histogram", "report_delay_seconds", "From a report made to its acknowledgement by a master", ("kind",)),
        Spec("gauge", "report_backlog", "Reports not yet acknowledged by a master"),
        Spec("gauge", "tasks_running", "Attempts running here"),
        Spec("gauge", "slots_free", "Attempts this worker would admit now"),
    ),
    "api": (
        *_SHARED,
        *_DB,
        Spec(
            "histogram", "http_request_seconds", "API requests by route and status class", ("method", "route", "status")
        ),
        Spec("gauge", "event_streams", "Open event streams (live events, log follows)"),
    ),
}

#: the counters every task end can carry, present from zero
TASK_STATES = ("SUCCESS", "FAILURE", "KILL", "LOST")


class NodeMetrics:
    """One process's metrics. ``inc``/``observe`` name metrics from the role's catalogue (an unknown name
    is created on the fly with a warning: tests/test_metrics.py fails on any metric not in the catalogue)."""

    def __init__(self, role: str) -> None:
        self.role = role
        self.prefix = f"porpoise_{role}"
        self.registry = CollectorRegistry(auto_describe=True)
        prometheus_client.ProcessCollector(registry=self.registry)
        prometheus_client.PlatformCollector(registry=self.registry)
        prometheus_client.GCCollector(registry=self.registry)
        self.specs = {s.name: s for s in CATALOG.get(role, ())}
        self.counters: dict[str, Counter] = {}
        self.histograms: dict[str, Histogram] = {}
        self.gauges: dict[str, Callable[[], float | dict[str, float]]] = {}
        for spec in self.specs.values():
            if spec.kind == "counter":
                self.counters[spec.name] = Counter(
                    f"{self.prefix}_{spec.name}", spec.help, spec.labels, registry=self.registry
                )
            elif spec.kind == "histogram":
                self.histograms[spec.name] = Histogram(
                    f"{self.prefix}_{spec.name}", spec.help, spec.labels, registry=self.registry, buckets=spec.buckets
                )
        if "tasks_finished" in self.counters:
            for state in TASK_STATES:
                self.counters["tasks_finished"].labels(state=state)
        self.registry.register(_Callbacks(self))
        self.started = time.monotonic()
        #: (monotonic time, lag seconds) of the last 600 probes (60 s at the default interval)
        self.lag_samples: collections.deque[tuple[float, float]] = collections.deque(maxlen=600)
        #: (monotonic time, generation, pause seconds) of the last 1,000 garbage collections
        self.gc_pauses: collections.deque[tuple[float, int, float]] = collections.deque(maxlen=1000)
        self._gc_start = 0.0
        self._task: asyncio.Task[None] | None = None

    # -- recording --------------------------------------------------------------------------------

    def inc(self, name: str, n: float = 1, **labels: str) -> None:
        counter = self.counters.get(name)
        if counter is None:
            log.warning("metric not in the catalogue", metric=name)
            counter = self.counters[name] = Counter(
                f"{self.prefix}_{name}", "(not in the catalogue)", tuple(labels), registry=self.registry
            )
        (counter.labels(**labels) if labels else counter).inc(n)

    def observe(self, name: str, value: float, **labels: str) -> None:
        histogram = self.histograms.get(name)
        if histogram is None:
            log.warning("metric not in the catalogue", metric=name)
            histogram = self.histograms[name] = Histogram(
                f"{self.prefix}_{name}", "(not in the catalogue)", tuple(labels), registry=self.registry
            )
        (histogram.labels(**labels) if labels else histogram).observe(max(0.0, value))

    def gauge(self, name: str, fn: Callable[[], float | dict[str, float]]) -> None:
        """A gauge read at scrape time (a dict: one series per key, labelled by the spec's label)."""
        self.gauges[name] = fn

    def rpc_latency(self, method: str, seconds: float, outcome: str) -> None:
        self.observe("rpc_latency_seconds", seconds, method=method, outcome=outcome)

    def pool_wait(self, seconds: float) -> None:
        self.observe("db_pool_wait_seconds", seconds)

    def render(self) -> bytes:
        return prometheus_client.generate_latest(self.registry)

    # -- event-loop lag and gc pauses -------------------------------------------------------------

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


class _Callbacks(Collector):
    """The gauges read at scrape time: the node's callbacks, the lag quantiles, gc pauses, uptime."""

    def __init__(self, metrics: NodeMetrics) -> None:
        self.m = metrics

    def describe(self) -> list[Metric]:
        return []  # dynamic: not checked for name clashes at registration

    def collect(self) -> Iterator[Metric]:
        m = self.m
        for name, fn in sorted(m.gauges.items()):
            spec = m.specs.get(name)
            help_ = spec.help if spec else "(not in the catalogue)"
            value = fn()
            if isinstance(value, dict):
                label = spec.labels[0] if spec and spec.labels else "state"
                family = GaugeMetricFamily(f"{m.prefix}_{name}", help_, labels=[label])
                for key, v in sorted(value.items()):
                    family.add_metric([str(key)], float(v))
            else:
                family = GaugeMetricFamily(f"{m.prefix}_{name}", help_, value=float(value))
            yield family
        for name, window in (("event_loop_lag_seconds", None), ("event_loop_lag_10s_seconds", 10.0)):
            family = GaugeMetricFamily(f"{m.prefix}_{name}", m.specs[name].help, labels=["quantile"])
            for q in (0.5, 0.99):
                family.add_metric([str(q)], m.lag_quantile(q, window))
            yield family
        family = GaugeMetricFamily(
            f"{m.prefix}_gc_pause_max_60s_seconds", m.specs["gc_pause_max_60s_seconds"].help, labels=["generation"]
        )
        for generation in (0, 1, 2):
            family.add_metric([str(generation)], m.gc_pause_max(generation))
        yield family
        uptime = time.monotonic() - m.started
        yield GaugeMetricFamily(f"{m.prefix}_up_seconds", m.specs["up_seconds"].help, value=uptime)
