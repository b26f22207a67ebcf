"""Dispatcher: the master's priority queue of task attempts waiting for a worker.

Order is DolphinScheduler's (workflow priority, workflow instance id, task priority, task instance id).
For each attempt the worker group's live workers are ranked by the configured host selector; a
refusal or an RPC failure moves on to the next worker; when every worker refused, the attempt waits
and is retried when membership changes or after a short backoff. An accepted dispatch is reported to
the owning actor (which records DISPATCH and the host). Attempts queued at the same moment that go
to the same worker travel in one ``task.dispatch_batch`` call; each is admitted or refused on its own
and a refused one tries the other workers alone.
"""

from __future__ import annotations

import asyncio
import dataclasses
import heapq
import time
from collections.abc import Callable
from typing import Any

from engine import logs
from engine.aio import cancel_and_wait
from engine.master.actor import DispatchRequest
from engine.master.selectors import SELECTORS, Candidate
from engine.master.workflow import TaskDispatched
from registry import NodeInfo, ServerStatus
from rpc import RpcClient
from rpc.errors import BadRequest, RpcError
from rpc.messages import DispatchBatchReply, DispatchReply, TaskDispatchBatch

log = logs.get(__name__)

#: most attempts taken from the queue at once (and sent to one worker in one call)
BATCH = 50


class Dispatcher:
    def __init__(
        self,
        rpc: RpcClient,
        workers: Callable[[str], list[NodeInfo]],
        selector: str = "lower_weight",
        concurrency: int = 64,
        retry_delay: float = 0.5,
        metrics: Any = None,
        *,
        valid_until: Callable[[], int],
    ) -> None:
        self.rpc = rpc
        #: epoch ms until which our lease is certainly valid, 0 when it may be gone (Master._valid_until_ms)
        self.valid_until = valid_until
        self.workers = workers
        self.selector_kind = selector
        self.selectors: dict[str, Any] = {}
        self.retry_delay = retry_delay
        self.metrics = metrics
        self._heap: list[DispatchRequest] = []
        self._waiting: list[DispatchRequest] = []
        self._wake = asyncio.Event()
        self._slots = asyncio.Semaphore(concurrency)
        self._task: asyncio.Task[None] | None = None
        self._retry_task: asyncio.Task[None] | None = None
        self._sends: set[asyncio.Task[None]] = set()
        self.paused = False

    def __len__(self) -> int:
        return len(self._heap) + len(self._waiting)

    def submit(self, request: DispatchRequest) -> None:
        heapq.heappush(self._heap, request)
        self._wake.set()

    def membership_changed(self) -> None:
        """Workers came or went: give waiting attempts another chance now."""
        self._requeue_waiting()

    def _requeue_waiting(self) -> None:
        waiting, self._waiting = self._waiting, []
        for r in waiting:
            heapq.heappush(self._heap, r)
        if waiting:
            self._wake.set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="dispatcher")
        self._retry_task = asyncio.create_task(self._retry_loop(), name="dispatcher-retry")

    async def close(self) -> None:
        tasks = (self._task, self._retry_task, *self._sends)
        self._task = self._retry_task = None
        await cancel_and_wait(*tasks)

    async def _retry_loop(self) -> None:
        while True:
            await asyncio.sleep(self.retry_delay)
            if self._waiting:
                self._requeue_waiting()

    async def _run(self) -> None:
        while True:
            while not self._heap or self.paused:
                self._wake.clear()
                await self._wake.wait()
            batch = []
            while self._heap and len(batch) < BATCH:  # what is queued now, in priority order
                request = heapq.heappop(self._heap)
                if request.actor.task is not None:  # else the actor ended (fenced, finished): drop
                    batch.append(request)
            for coro in self._plan(batch):
                await self._slots.acquire()
                task = asyncio.create_task(coro)
                self._sends.add(task)
                task.add_done_callback(self._sent)

    def _plan(self, batch: list[DispatchRequest]) -> list[Any]:
        """Pick a worker for each attempt; attempts for the same worker travel in one call."""
        if len(batch) == 1:
            return [self._send(batch[0])]
        by_host: dict[str, list[DispatchRequest]] = {}
        singles = []
        by_group: dict[str, list[Candidate]] = {}
        for request in batch:
            group = request.worker_group
            if group not in by_group:
                by_group[group] = self.candidates(group)
            if not by_group[group]:
                singles.append(request)  # no worker: the single path parks it
                continue
            host = self._selector(group).select(by_group[group]).address
            by_host.setdefault(host, []).append(request)
        coros = [self._send(r) for r in singles]
        for host, requests in by_host.items():
            coros.append(self._send(requests[0], host) if len(requests) == 1 else self._send_batch(host, requests))
        return coros

    async def _send_batch(self, host: str, requests: list[DispatchRequest]) -> None:
        valid_until = self.valid_until()
        if not valid_until:
            self._waiting.extend(requests)  # as in _send: no order may leave while our lease is in doubt
            return
        self._count("dispatch_batches")
        batch = TaskDispatchBatch([r.message for r in requests], valid_until_ms=valid_until)
        try:
            reply = await self.rpc.call(host, batch, DispatchBatchReply)
            assert isinstance(reply, DispatchBatchReply)
            replies: list[DispatchReply | None] = list(reply.replies)
        except BadRequest as exc:
            if exc.status != 404:
                raise
            await asyncio.gather(*(self._send(r, host) for r in requests))  # an older worker: one by one
            return
        except RpcError as exc:
            log.warning("dispatch failed", worker=host, error=str(exc), tasks=len(requests))
            self._count("dispatch_errors")
            replies = [None] * len(requests)
        if len(replies) != len(requests):
            replies = [None] * len(requests)
        again = []
        for request, one in zip(requests, replies, strict=True):
            if one is not None and one.accepted:
                self._accepted(request, host)
            else:
                if one is not None:
                    self._count("dispatch_refusals")
                again.append(request)
        # refused or not delivered: each tries the other workers on its own
        await asyncio.gather(*(self._send(r, tried={host}) for r in again))

    def _sent(self, task: asyncio.Task[None]) -> None:
        self._sends.discard(task)
        self._slots.release()

    def candidates(self, group: str) -> list[Candidate]:
        now = int(time.time() * 1000)
        out = []
        for w in self.workers(group):
            hb = w.heartbeat
            if hb.status == ServerStatus.ABNORMAL:
                continue
            out.append(
                Candidate(
                    address=w.address,
                    cpu_usage=hb.cpu_usage,
                    memory_usage=hb.memory_usage,
                    load_average=hb.load_average,
                    host_weight=hb.host_weight,
                    waiting_tasks=hb.waiting_tasks,
                    running_tasks=hb.running_tasks,
                    exec_slots=hb.exec_slots,
                    uptime_ms=max(1, now - hb.startup_time),
                )
            )
        return out

    def _selector(self, group: str) -> Any:
        sel = self.selectors.get(group)
        if sel is None:
            sel = self.selectors[group] = SELECTORS[self.selector_kind]()
        return sel

    def _accepted(self, request: DispatchRequest, host: str) -> None:
        self._count("tasks_dispatched")
        request.actor.post(
            TaskDispatched(request.message.task_instance_id, request.message.attempt, host, "dispatch accepted")
        )

    async def _send(self, request: DispatchRequest, first: str = "", tried: set[str] | None = None) -> None:
        """Send one attempt: to ``first`` if given, else to the selector's pick; on refusal to the others."""
        tried = set(tried or ())
        candidates = self.candidates(request.worker_group)
        while True:
            remaining = [c for c in candidates if c.address not in tried]
            if not remaining:
                break
            if first and first not in tried:
                host = first
            else:
                host = self._selector(request.worker_group).select(remaining).address
            tried.add(host)
            valid_until = self.valid_until()
            if not valid_until:
                # our lease may be running out (etcd unreachable?): wait; if it is lost, the actors stop
                # and the instance's next owner dispatches the attempt anew (invariant 3)
                break
            message = dataclasses.replace(request.message, valid_until_ms=valid_until)
            try:
                reply = await self.rpc.call(host, message, DispatchReply)
            except RpcError as exc:
                log.warning(
                    "dispatch failed",
                    worker=host,
                    error=str(exc),
                    task_instance_id=request.message.task_instance_id,
                )
                self._count("dispatch_errors")
                continue
            assert isinstance(reply, DispatchReply)
            if reply.accepted:
                self._accepted(request, host)
                return
            self._count("dispatch_refusals")
            log.debug(
                "worker refused",
                worker=host,
                reason=reply.reason,
                task_instance_id=request.message.task_instance_id,
            )
        if not candidates:
            log.debug(
                "no worker in group",
                group=request.worker_group,
                task_instance_id=request.message.task_instance_id,
            )
        self._waiting.append(request)

    def _count(self, name: str) -> None:
        if self.metrics is not None:
            self.metrics.inc(name)
