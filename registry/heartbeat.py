"""Node heartbeats: the JSON value of a node's registry key, sampled with psutil off the event loop,
and the registration that keeps it written under the node's session lease."""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any

import psutil

from core import logs
from core.aio import cancel_and_wait
from registry.errors import DuplicateNode, RegistryUnavailable
from registry.identity import Incarnation, Verdict, judge_holder
from registry.load import BUSY
from registry.session import Session

log = logs.get(__name__)


class ServerStatus(enum.IntEnum):
    NORMAL = 0
    ABNORMAL = 1  # overloaded: less free memory than reserved (masters send it nothing)
    BUSY = 2  # saturated: every exec slot taken, or cpus busy with the load over its limit
    DRAINING = 3  # a worker finishing its running tasks and taking no new ones (masters send it nothing)


@dataclass(frozen=True)
class Heartbeat:
    """What a node publishes about itself. Times are epoch milliseconds, memory/disk in GB."""

    startup_time: int
    report_time: int
    cpu_usage: float  # 0..1
    memory_usage: float  # 0..1
    load_average: float  # 1-minute
    available_memory_gb: float
    disk_available_gb: float
    pid: int
    status: int = ServerStatus.NORMAL
    host_weight: int = 100
    running_tasks: int = 0
    waiting_tasks: int = 0
    exec_slots: int = 0
    #: masters: every instance this incarnation owns has a fencing epoch above this (0 = not known yet);
    #: an unfinished instance of this host with a lower epoch belongs to a previous incarnation
    epoch_floor: int = 0
    #: this process's incarnation (registry.identity): a fresh uuid per process, the host name, the
    #: machine (boot id + pid namespace) and the process start time (seconds since boot: no wall-clock
    #: step moves it), so a node registering at the same
    #: address can tell its own dead previous incarnation from another live node
    node_id: str = ""
    host_name: str = ""
    machine: str = ""
    process_start: float = 0.0
    #: why the node takes no new work although it is up ("log disk nearly full: ...", a drain), or ""
    reason: str = ""

    def incarnation(self) -> Incarnation:
        return Incarnation(self.node_id, self.host_name, self.machine, self.pid, self.process_start)

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes | str) -> Heartbeat:
        """Parse a heartbeat; raises ValueError on anything that is not one."""
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("heartbeat is not a JSON object")
        kwargs: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in data:
                if f.default is not MISSING:  # optional field
                    continue
                raise ValueError(f"heartbeat lacks {f.name}")
            value = data[f.name]
            if f.type in ("str", str):
                if not isinstance(value, str):
                    raise ValueError(f"heartbeat field {f.name} is not a string")
                kwargs[f.name] = value
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"heartbeat field {f.name} is not a number")
            kwargs[f.name] = int(value) if f.type in ("int", int) else float(value)
        return cls(**kwargs)


@dataclass(frozen=True)
class LoadLimits:
    """Overload thresholds: 1-minute load average (-1 = 2 x cpu count), counted only while the CPUs are
    busy now (registry.load), and minimum free memory (GB)."""

    max_cpu_load_avg: float = -1
    reserved_memory_gb: float = 0.3

    def effective_max_load(self) -> float:
        return self.max_cpu_load_avg if self.max_cpu_load_avg > 0 else 2.0 * (os.cpu_count() or 1)


@dataclass(frozen=True)
class Overload:
    reason: str
    #: True: the cpus are saturated — a worker holds its concurrency where it is (a finishing task's
    #: slot may be refilled, none is added); False: memory is short — take nothing more
    hold: bool


@dataclass(frozen=True)
class HostSample:
    cpu_usage: float
    memory_usage: float
    load_average: float
    available_memory_gb: float
    disk_available_gb: float

    def overload(self, limits: LoadLimits, busy: float | None = None) -> Overload | None:
        """How this host is over its limits, or None. ``busy`` is the CPUs' busy share now
        (registry.load.CpuMeter; this sample's cpu usage when not known): a load average over the
        limit counts only while the CPUs are busy, for it lags the machine by a minute or more."""
        if self.available_memory_gb < limits.reserved_memory_gb:
            return Overload(
                f"overloaded: free memory {self.available_memory_gb:.2f} GB (reserved {limits.reserved_memory_gb} GB)",
                hold=False,
            )
        busy = self.cpu_usage if busy is None else busy
        if self.load_average > limits.effective_max_load() and busy >= BUSY:
            return Overload(
                f"overloaded: load average {self.load_average:.2f} (max {limits.effective_max_load():.2f}) "
                f"with the cpus {busy:.0%} busy",
                hold=True,
            )
        return None


_GB = 1024**3


def _sample_host(disk_path: str) -> HostSample:
    mem = psutil.virtual_memory()
    try:
        disk = psutil.disk_usage(disk_path).free / _GB
    except OSError:
        disk = 0.0
    return HostSample(
        cpu_usage=psutil.cpu_percent(interval=None) / 100.0,
        memory_usage=mem.percent / 100.0,
        load_average=os.getloadavg()[0],
        available_memory_gb=mem.available / _GB,
        disk_available_gb=disk,
    )


async def sample_host(disk_path: str = ".") -> HostSample:
    """Sample cpu, memory, load and disk in a thread (disk_usage may block on a slow filesystem)."""
    return await asyncio.to_thread(_sample_host, disk_path)


@dataclass
class TaskCounts:
    #: attempts holding an exec slot (those still being set up included)
    running: int = 0
    #: of those, the attempts whose process has not started yet
    waiting: int = 0
    #: exec slots (0: not a worker)
    slots: int = 0


class HeartbeatSource:
    """Builds this node's heartbeat from a host sample plus the counts the node reports."""

    def __init__(
        self,
        limits: LoadLimits,
        host_weight: int = 100,
        counts: Callable[[], TaskCounts] = TaskCounts,
        disk_path: str = ".",
        busy: Callable[[], float | None] = lambda: None,
    ) -> None:
        #: the CPUs' busy share now (CpuMeter.busy), None when not known
        self.busy = busy
        self.limits = limits
        self.host_weight = host_weight
        self.counts = counts
        self.disk_path = disk_path
        self.startup_time = int(time.time() * 1000)
        self.incarnation = Incarnation.current()
        self.last_sample: HostSample | None = None
        self.epoch_floor = 0

    def overload(self) -> Overload | None:
        """Whether this node should take no more work now: the last host sample with the CPUs' busy
        share now against the limits."""
        sample = self.last_sample
        return sample.overload(self.limits, self.busy()) if sample is not None else None

    def overload_reason(self) -> str:
        over = self.overload()
        return over.reason if over is not None else ""

    async def __call__(self) -> Heartbeat:
        sample = await sample_host(self.disk_path)
        self.last_sample = sample
        counts = self.counts()
        status = ServerStatus.NORMAL
        over = sample.overload(self.limits, self.busy())
        if over is not None and not over.hold:
            status = ServerStatus.ABNORMAL
        elif over is not None or (counts.slots and counts.running >= counts.slots):
            status = ServerStatus.BUSY
        return Heartbeat(
            startup_time=self.startup_time,
            report_time=int(time.time() * 1000),
            cpu_usage=round(sample.cpu_usage, 4),
            memory_usage=round(sample.memory_usage, 4),
            load_average=round(sample.load_average, 3),
            available_memory_gb=round(sample.available_memory_gb, 3),
            disk_available_gb=round(sample.disk_available_gb, 3),
            pid=os.getpid(),
            status=int(status),
            host_weight=self.host_weight,
            running_tasks=counts.running,
            waiting_tasks=counts.waiting,
            exec_slots=counts.slots,
            epoch_floor=self.epoch_floor,
            node_id=self.incarnation.node_id,
            host_name=self.incarnation.host_name,
            machine=self.incarnation.machine,
            process_start=self.incarnation.process_start,
        )


#: seconds past a foreign holder's lease expiry (as etcd stated it) before we give up on its key
HOLDER_GRACE = 2.0


def _holder(raw: bytes) -> Incarnation | None:
    try:
        return Heartbeat.from_json(raw).incarnation()
    except ValueError:
        return None


class Registration:
    """Keeps ``key`` = the node's heartbeat, bound to the session lease, refreshed every ``interval``.

    The key is created only if absent, and every later write and the final delete apply only to the
    key we created (its create revision), so a node never overwrites or removes another node's key
    (``registry.identity`` says why and how a held key is judged).
    """

    def __init__(
        self,
        session: Session,
        key: str,
        source: Callable[[], Awaitable[Heartbeat]],
        interval: float,
    ) -> None:
        self.session = session
        self.key = key
        self.source = source
        self.interval = interval
        self._task: asyncio.Task[None] | None = None
        self.last: Heartbeat | None = None
        #: create revision of our key (0 until registered)
        self.revision = 0

    async def start(self) -> None:
        """Create the key (raises DuplicateNode if another live node holds it, RegistryUnavailable if
        etcd refuses), then refresh it in the background.

        A key left by a previous incarnation of this node (same machine, its process gone, its lease
        not yet expired) is deleted first, as DolphinScheduler does, so observers see it leave and
        come back (REMOVED, ADDED) instead of a silent rebinding to the new lease. A key held by a
        node we cannot judge (another machine) is waited for until its lease has run out.
        """
        client = self.session.client
        self.last = await self.source()
        me = self.last.incarnation()
        deadline: float | None = None
        while True:
            self.session.require_alive()
            created, holder, revision = await client.put_if_absent(
                self.key, self.last.to_json(), lease=self.session.lease_id
            )
            if created:
                self.revision = revision
                break
            if holder is None:
                continue  # deleted between the compare and the read
            other = _holder(holder.value)
            verdict = judge_holder(other, me)
            if verdict is Verdict.REPLACE:
                assert other is not None
                log.info("replacing the key of a previous incarnation", key=self.key, pid=other.pid,
                         previous_node_id=other.node_id)  # fmt: skip
                await client.delete_if_created_at(self.key, holder.create_revision)
                continue
            if verdict is Verdict.LIVE_HERE:
                raise DuplicateNode(self._duplicate(other, "is running on this machine"))
            if deadline is None:
                left = await client.time_to_live(holder.lease) if holder.lease else 0
                deadline = time.monotonic() + max(left, 0) + HOLDER_GRACE
                log.warning("registry key held by another node: waiting for its lease to run out", key=self.key,
                            holder=_describe(other), lease_left_s=left)  # fmt: skip
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DuplicateNode(self._duplicate(other, "kept it past its lease's expiry"))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(client.wait_deleted(self.key, revision + 1), remaining)
        self._task = asyncio.create_task(self._refresh_loop(), name=f"heartbeat {self.key}")
        log.info("registered", key=self.key, node_id=me.node_id)

    def _duplicate(self, holder: Incarnation | None, how: str) -> str:
        return (
            f"{self.key} is held by another live node ({_describe(holder)}), which {how}: two nodes advertise "
            f"the same address; give each its own advertise_host or listen_port"
        )

    async def _write(self) -> None:
        self.last = await self.source()
        ours = await self.session.client.put_if_created_at(
            self.key, self.last.to_json(), self.session.lease_id, self.revision
        )
        if not ours and self.session.alive:
            # deleted (by an operator, or a node that judged us dead): peers saw us leave; stop acting
            self.session.fence(f"registry key {self.key} is no longer ours")

    async def refresh_now(self) -> None:
        with contextlib.suppress(RegistryUnavailable):
            await self._write()

    async def _refresh_loop(self) -> None:
        while self.session.alive:
            try:
                await asyncio.wait_for(self.session.lost.wait(), self.interval)
                return
            except TimeoutError:
                pass
            try:
                await self._write()
            except RegistryUnavailable as exc:
                log.warning("heartbeat refresh failed", key=self.key, error=str(exc))

    async def stop(self, delete: bool = True) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)
        if delete and self.revision and self.session.alive:
            with contextlib.suppress(RegistryUnavailable):
                await self.session.client.delete_if_created_at(self.key, self.revision)


def _describe(holder: Incarnation | None) -> str:
    if holder is None:
        return "its value is not a heartbeat"
    return f"host {holder.host_name or '?'}, pid {holder.pid}, node id {holder.node_id or '?'}"
