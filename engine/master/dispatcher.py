"""Dispatcher: the master's priority queue of task attempts waiting for a worker.

Order is DolphinScheduler's (workflow priority, workflow instance id, task priority, task instance id).
For each attempt the worker group's live workers are ranked by the configured host selector; a
refusal, or an RPC failure that proves the request never reached the worker (connection refused),
moves on to the next worker; when every worker refused, the attempt waits and is retried when
membership changes or after a short backoff.

A send that may have reached the worker (a timeout or a reset after the request was written: see
``rpc.errors``) leaves the attempt *in doubt* there: it may be running. It is recorded as dispatched to
that worker (so the worker-lost path covers it: if the worker goes, the attempt becomes
NEED_FAULT_TOLERANCE and runs again as the next attempt), and never sent to another worker before the
doubt is resolved by ``_resolve``: a report from the worker, or the worker's answer to the same
dispatch sent again (idempotent per attempt: "already running / finished", or admitted now). Only a
refusal the worker gives once every copy sent to it has expired (``valid_until_ms``: it would refuse a
late copy) proves the attempt is not there; the attempt then runs again (``DispatchLost``).

An accepted dispatch is reported to the owning actor (which records DISPATCH and the host). Attempts
queued at the same moment that go to the same worker travel in one ``task.dispatch_batch`` call; each
is admitted or refused on its own and a refused one tries the other workers alone. A batch the worker
refuses whole (a 4xx: too large, not authenticated, not understood) is sent again one attempt at a time,
as refusals are: never dropped.

Flow control: every dispatch reply says how many more attempts the worker would take now
(``free_slots``: exec slots left, or none while it holds its concurrency on saturated cpus). That is
this master's credit with the worker: sends spend it, replies restate it, and a worker with none is
not sent to until one of our attempts on it ends (then it is sent one attempt, whose reply says how
many more). Attempts wait here instead of being refused over the wire: a 5,000-task burst on one
400-slot worker used to cost ~45,000 refused dispatch messages. Until a worker has said, its credit
is the free slots of its heartbeat; a full worker none of whose results we await (its slots are
other masters') is probed with one attempt every ``retry_delay``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import heapq
import time
from collections.abc import Callable
from typing import Any

from core import logs, marks
from core.aio import cancel_and_wait
from engine.clocks import now_ms
from engine.master.actor import DispatchRequest
from engine.master.selectors import SELECTORS, Candidate
from engine.master.workflow_messages import DispatchLost, TaskDispatched, TaskResultEvent
from engine.states import TaskState
from registry import NodeInfo, ServerStatus
from rpc import RpcClient
from rpc.errors import BadRequest, RpcError
from rpc.messages import DispatchReply, TaskDispatchBatch

log = logs.get(__name__)

#: most attempts taken from the queue at once (and sent to one worker in one call)
BATCH = 50
#: retry periods without a result from a full worker after which it is probed all the same
QUIET = 10
#: ms after the last copy of a dispatch in doubt expired before a worker's refusal proves it never took
#: it: the clock difference between master and worker this allows (as the lease margin of the expiry)
DOUBT_MARGIN_MS = 1000
#: longest pause (seconds) between questions to a worker about dispatches in doubt there
DOUBT_MAX_DELAY = 5.0


def _local_deadline(valid_until_ms: int) -> float:
    """An epoch-ms validity just computed from our wall clock, as a time.monotonic() deadline."""
    return time.monotonic() + (valid_until_ms - now_ms()) / 1000


@dataclasses.dataclass
class _Doubt:
    """Attempts sent to ``host`` that it may have taken: the send failed after the request was written."""

    host: str
    requests: list[DispatchRequest]
    #: until when (time.monotonic()) a copy sent so far may still be admitted there: its valid_until_ms
    #: put on our monotonic clock when sent, so a step of our wall clock later moves no expiry
    expires_at: float
    #: the revision that created the worker's registry key then: a later registration at its address (a
    #: restart, or a re-registration after a lost lease, which kills its tasks) is asked nothing
    incarnation: int | None


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
        #: worker group -> its attempts no worker has room for (a heap: best first)
        self._waiting: dict[str, list[DispatchRequest]] = {}
        #: worker address -> the groups we sent it attempts of (whose waiting attempts its freed slots serve)
        self._host_groups: dict[str, set[str]] = {}
        #: worker address -> attempts it would still take from us (absent: never said)
        self._credit: dict[str, int] = {}
        #: worker address -> free slots by its last heartbeat: the credit until it says otherwise
        self._hint: dict[str, int] = {}
        #: worker address -> our attempts running there (their results will give credit back)
        self._ours: dict[str, int] = {}
        #: worker address -> when it last gave credit back (monotonic)
        self._heard: dict[str, float] = {}
        #: worker address -> attempts sent to it whose reply has not come
        self._inflight: dict[str, int] = {}
        #: worker address -> the reason of its last refusal (written only when a refusal makes an attempt
        #: wait: what "why isn't it running?" shows; engine/master/waiting.py)
        self.refusals: dict[str, str] = {}
        self._wake = asyncio.Event()
        self._slots = asyncio.Semaphore(concurrency)
        self._task: asyncio.Task[None] | None = None
        self._retry_task: asyncio.Task[None] | None = None
        self._sends: set[asyncio.Task[None]] = set()
        #: one task per group of dispatches in doubt, asking their worker until it is known
        self._doubts: set[asyncio.Task[None]] = set()
        self.paused = False

    def __len__(self) -> int:
        return len(self._heap) + sum(len(w) for w in self._waiting.values())

    def submit(self, request: DispatchRequest) -> None:
        heapq.heappush(self._heap, request)
        self._wake.set()

    def membership_changed(self) -> None:
        """Workers came or went: forget what they said and give waiting attempts another chance now."""
        self._credit.clear()
        for group in list(self._waiting):
            self._requeue_waiting(group)

    def freed(self, host: str) -> None:
        """An attempt on ``host`` ended (its result came): it has a slot free again. How many it has
        in all only its next reply says (others may have ended too, or been taken by other masters),
        so a worker thought full gets one attempt, whose reply tells the rest."""
        self._ours[host] = max(self._ours.get(host, 0) - 1, 0)
        self._heard[host] = time.monotonic()
        if self._room(host) <= 0:
            self._credit[host] = 1
        self._refill(host)

    def _refill(self, host: str) -> None:
        """``host`` has room: give it waiting attempts of its groups."""
        room = self._room(host)
        if room > 0:
            for group in self._host_groups.get(host, ()):
                self._requeue_waiting(group, min(room, BATCH))

    def _room(self, host: str) -> int:
        credit = self._credit.get(host)
        return credit if credit is not None else self._hint.get(host, BATCH)

    def _spend(self, host: str, n: int) -> None:
        self._credit[host] = self._room(host) - n
        self._inflight[host] = self._inflight.get(host, 0) + n

    def _said(self, host: str, n: int, free_slots: int | None) -> None:
        """A reply to ``n`` attempts came (None: no reply) with the worker's own count of attempts it
        would take now (-1: it does not say: an older worker) — less what is on its way to it still."""
        inflight = self._inflight[host] = max(self._inflight.get(host, 0) - n, 0)
        if free_slots is not None:
            self._credit[host] = free_slots - inflight if free_slots >= 0 else BATCH
            self._refill(host)

    def _requeue_waiting(self, group: str, limit: int | None = None) -> None:
        """Move the group's best ``limit`` waiting attempts (all by default) back to the queue."""
        waiting = self._waiting.get(group)
        if not waiting:
            return
        if limit is None or limit >= len(waiting):
            moved = waiting
            del self._waiting[group]
        else:
            moved = [heapq.heappop(waiting) for _ in range(limit)]
        for r in moved:
            heapq.heappush(self._heap, r)
        if moved:
            self._wake.set()

    def place(self, task_instance_id: int, group: str) -> str:
        """Where an attempt is here: "waiting" (no worker had room), "queued" (about to be sent) or ""
        (not here: being sent, or not handed over yet). A scan, for a user's question only."""
        if any(r.message.task_instance_id == task_instance_id for r in self._waiting.get(group, ())):
            return "waiting"
        if any(r.message.task_instance_id == task_instance_id for r in self._heap):
            return "queued"
        return ""

    def _wait(self, request: DispatchRequest) -> None:
        heapq.heappush(self._waiting.setdefault(request.worker_group, []), request)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="dispatcher")
        self._retry_task = asyncio.create_task(self._retry_loop(), name="dispatcher-retry")

    async def close(self) -> None:
        tasks = (self._task, self._retry_task, *self._sends, *self._doubts)
        self._task = self._retry_task = None
        await cancel_and_wait(*tasks)

    async def _retry_loop(self) -> None:
        while True:
            await asyncio.sleep(self.retry_delay)
            if not self._waiting:
                continue
            now = time.monotonic()
            for host, credit in self._credit.items():
                # a full worker is asked again with one attempt when no result of ours is coming that
                # would free a slot (the slots are other masters', or we have not heard for a while)
                quiet = now - self._heard.get(host, 0.0) > QUIET * self.retry_delay
                if credit <= 0 and (not self._ours.get(host) or quiet):
                    self._credit[host] = 1
            for group in list(self._waiting):
                room = sum(max(self._room(c.address), 0) for c in self.candidates(group))
                self._requeue_waiting(group, room)  # a group without workers stays parked

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
        """Pick a worker with room for each attempt; attempts for the same worker travel in one call;
        attempts no worker has room for wait here."""
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
            open_ = [c for c in by_group[group] if self._room(c.address) > len(by_host.get(c.address, ()))]
            if not open_:
                self._wait(request)
                continue
            host = self._selector(group).select(open_).address
            by_host.setdefault(host, []).append(request)
            self._host_groups.setdefault(host, set()).add(group)
        coros = [self._send(r) for r in singles]
        for host, requests in by_host.items():
            self._spend(host, len(requests))  # now, not when the send runs: the next plan must see it
            if len(requests) == 1:
                coros.append(self._send(requests[0], host, spent=True))
            else:
                coros.append(self._send_batch(host, requests))
        return coros

    async def _send_batch(self, host: str, requests: list[DispatchRequest]) -> None:
        """Send attempts planned (and their credit spent) for ``host`` in one call."""
        valid_until = self.valid_until()
        live = self._live(requests)
        if len(live) < len(requests):
            self._said(host, len(requests) - len(live), None)
            requests = live
            if not requests:
                return
        if not valid_until:
            self._said(host, len(requests), None)
            for r in requests:  # as in _send: no order may leave while our lease is in doubt
                self._wait(r)
            return
        self._count("dispatch_batches")
        batch = TaskDispatchBatch([r.message for r in requests], valid_until_ms=valid_until)
        incarnation = self._incarnation(host, requests[0].worker_group)
        try:
            marks.mark("master dispatch")
            reply = await self.rpc.call(host, batch)
            replies: list[DispatchReply | None] = list(reply.replies)
            self._said(host, len(requests), reply.free_slots)
        except BadRequest as exc:
            # refused before any handler ran (404: an older worker without batches; 413: over its body
            # limit; 401, 400: its secret or its messages differ): nothing was taken, so each attempt is
            # sent on its own, to this worker first, then the others, and waits if all refuse
            self._said(host, len(requests), None)
            if exc.status != 404:
                log.warning("dispatch batch refused", worker=host, error=str(exc), tasks=len(requests))
                self._count("dispatch_refusals")
            await asyncio.gather(*(self._send(r, host) for r in requests))
            return
        except RpcError as exc:
            self._said(host, len(requests), None)
            log.warning("dispatch failed", worker=host, error=str(exc), tasks=len(requests))
            self._count("dispatch_errors")
            if exc.maybe_delivered:
                self._in_doubt(host, incarnation, requests, valid_until, exc)
                return
            replies = [None] * len(requests)
        if len(replies) != len(requests):  # the worker handled the call; what it took is unknown
            error = f"{len(replies)} replies to {len(requests)} attempts"
            self._in_doubt(host, incarnation, requests, valid_until, error)
            return
        again = []
        for request, one in zip(requests, replies, strict=True):
            if one is not None and one.accepted:
                self._accepted(request, host, one.incarnation)
            else:
                if one is not None:
                    self._count("dispatch_refusals")
                    self.refusals[host] = one.reason
                again.append(request)
        # refused, or certainly not delivered: each tries the other workers on its own
        await asyncio.gather(*(self._send(r, tried={host}) for r in again))

    def _sent(self, task: asyncio.Task[None]) -> None:
        self._sends.discard(task)
        self._slots.release()

    def candidates(self, group: str) -> list[Candidate]:
        now = now_ms()
        out = []
        for w in self.workers(group):
            hb = w.heartbeat
            if hb.status in (ServerStatus.ABNORMAL, ServerStatus.DRAINING):
                continue
            if hb.exec_slots > 0:
                self._hint[w.address] = max(hb.exec_slots - hb.running_tasks, 1)
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

    def _accepted(self, request: DispatchRequest, host: str, incarnation: int = 0) -> None:
        self._count("tasks_dispatched")
        if self.metrics is not None:
            self.metrics.observe("dispatch_wait_seconds", time.monotonic() - request.ready_at)
        self._ours[host] = self._ours.get(host, 0) + 1
        m = request.message
        request.actor.post(TaskDispatched(m.task_instance_id, m.attempt, host, "dispatch accepted", incarnation))

    async def _send(
        self, request: DispatchRequest, first: str = "", tried: set[str] | None = None, spent: bool = False
    ) -> None:
        """Send one attempt: to ``first`` if given (its credit already spent when ``spent``), else to the
        selector's pick; on refusal to the others."""
        tried = set(tried or ())
        candidates = self.candidates(request.worker_group)
        while True:
            remaining = [
                c for c in candidates
                if c.address not in tried and (self._room(c.address) > 0 or (spent and c.address == first))
            ]  # fmt: skip
            if not remaining:
                break
            if first and first not in tried:
                host = first
            else:
                host = self._selector(request.worker_group).select(remaining).address
            tried.add(host)
            if not (spent and host == first):
                self._spend(host, 1)
            valid_until = self.valid_until()
            if not self._live([request]):
                self._said(host, 1, None)
                return  # its actor ended meanwhile (finished, or stopped when our lease was lost)
            if not valid_until:
                # our lease may be running out (etcd unreachable?): wait; if it is lost, the actors stop
                # and the instance's next owner dispatches the attempt anew (invariant 3)
                self._said(host, 1, None)
                break
            message = dataclasses.replace(request.message, valid_until_ms=valid_until)
            self._host_groups.setdefault(host, set()).add(request.worker_group)
            incarnation = self._incarnation(host, request.worker_group)
            try:
                marks.mark("master dispatch")
                reply = await self.rpc.call(host, message)
            except RpcError as exc:
                self._said(host, 1, None)
                log.warning(
                    "dispatch failed",
                    worker=host,
                    error=str(exc),
                    task_instance_id=request.message.task_instance_id,
                )
                self._count("dispatch_errors")
                if exc.maybe_delivered:  # it may run there: no other worker before we know
                    self._in_doubt(host, incarnation, [request], valid_until, exc)
                    return
                continue
            assert isinstance(reply, DispatchReply)
            self._said(host, 1, reply.free_slots)
            if reply.accepted:
                self._accepted(request, host, reply.incarnation)
                return
            self._count("dispatch_refusals")
            self.refusals[host] = reply.reason
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
        self._wait(request)

    # -- dispatches in doubt -----------------------------------------------------------------------

    def _in_doubt(
        self, host: str, incarnation: int | None, requests: list[DispatchRequest], valid_until: int, error: object
    ) -> None:
        """The send of ``requests`` to ``host`` (registered at ``incarnation`` when sent) may have been
        delivered: record them as dispatched there (the worker-lost path then covers them) and ask the
        worker until their fate is known."""
        self._count("dispatch_doubts", len(requests))
        for r in requests:
            log.warning(
                "dispatch in doubt: asking the worker again before any other",
                worker=host,
                task_instance_id=r.message.task_instance_id,
                attempt=r.message.attempt,
                error=str(error),
            )
            self._ours[host] = self._ours.get(host, 0) + 1  # its result gives the slot back, as if accepted
            r.actor.post(TaskDispatched(r.message.task_instance_id, r.message.attempt, host, "dispatch in doubt"))
        doubt = _Doubt(host, list(requests), _local_deadline(valid_until), incarnation)
        task = asyncio.create_task(self._resolve(doubt), name=f"dispatch-doubt-{host}")
        self._doubts.add(task)
        task.add_done_callback(self._doubts.discard)

    def _incarnation(self, host: str, group: str) -> int | None:
        """The create revision of the registry key of the worker at ``host`` (None: none is registered)."""
        for w in self.workers(group):
            if w.address == host:
                return w.create_revision
        return None

    @staticmethod
    def _live(requests: list[DispatchRequest]) -> list[DispatchRequest]:
        """Those whose actor still runs and whose run still wants them sent. Checked right before every
        send, with no await between it and the lease check: a send planned before our lease was lost
        (waiting for a send slot, or for a worker's refusal before trying the next) must not leave under
        the lease we registered anew, with the old epoch, once the instance is another master's (a worker
        that never heard of the new owner would take it: one attempt running twice). An attempt of a run
        that stopped meanwhile is not sent either: it ends KILL (``_unwanted``)."""
        live = []
        for r in requests:
            if r.actor.task is None:
                continue
            if r.actor.run.wants_dispatch(r.message.task_instance_id, r.message.attempt):
                live.append(r)
            else:
                Dispatcher._unwanted(r)
        return live

    @staticmethod
    def _unwanted(request: DispatchRequest) -> None:
        """``request`` leaves the queue unsent because its run no longer wants it (it stopped): the attempt
        ends KILL (a report for an attempt the run has moved past is ignored there)."""
        m = request.message
        log.info("dispatch cancelled: its workflow is stopping", task_instance_id=m.task_instance_id, attempt=m.attempt)
        request.actor.post(TaskResultEvent(m.task_instance_id, m.attempt, TaskState.KILL, -1, 0, now_ms(),
                                           message="stopped before it was dispatched"))  # fmt: skip

    def cancel(self, actor: Any) -> None:
        """Drop ``actor``'s queued attempts its run no longer wants sent (a stop): each ends KILL. Attempts
        already on their way are not here: they are checked again before each send, and an accepted one
        is killed where it runs."""

        def keep(r: DispatchRequest) -> bool:
            if r.actor is not actor or r.actor.task is None:
                return True  # another run's; an ended actor's is dropped when popped
            if r.actor.run.wants_dispatch(r.message.task_instance_id, r.message.attempt):
                return True
            self._unwanted(r)
            return False

        self._heap = [r for r in self._heap if keep(r)]
        heapq.heapify(self._heap)
        for group in list(self._waiting):
            left = [r for r in self._waiting[group] if keep(r)]
            if left:
                heapq.heapify(left)
                self._waiting[group] = left
            else:
                del self._waiting[group]

    @staticmethod
    def _undecided(requests: list[DispatchRequest]) -> list[DispatchRequest]:
        """Those whose actor still waits to hear where they are (no report, no worker-lost verdict)."""
        return [
            r for r in requests
            if r.actor.task is not None and r.actor.run.awaits_dispatch(r.message.task_instance_id, r.message.attempt)
        ]  # fmt: skip

    async def _resolve(self, doubt: _Doubt) -> None:
        """Ask ``doubt.host`` about its attempts in doubt (the same dispatch again) until each is known:
        accepted (running, finished, or taken now), a report came, or a refusal given after every copy
        expired (not there, and a late copy would be refused: ``DispatchLost``). A worker that is gone (or
        restarted) is asked nothing more: the worker-lost path decides, as for any attempt on it."""
        host, pending, delay = doubt.host, doubt.requests, self.retry_delay
        group = pending[0].worker_group
        with logs.bound(worker=host):
            while True:
                pending = self._undecided(pending)
                if not pending:
                    return
                await asyncio.sleep(delay)
                delay = min(delay * 2, DOUBT_MAX_DELAY)
                pending = self._undecided(pending)
                if not pending:
                    return
                if doubt.incarnation is None or self._incarnation(host, group) != doubt.incarnation:
                    log.warning("worker gone with dispatches in doubt: worker failover decides", tasks=len(pending))
                    return
                valid_until = self.valid_until()
                if not valid_until:
                    continue  # our lease is in doubt: send nothing (if it is lost, the next owner decides)
                sent = time.monotonic()
                replies = await self._ask(host, pending, valid_until)
                if isinstance(replies, RpcError):
                    if replies.maybe_delivered:
                        # this copy may be there too
                        doubt.expires_at = max(doubt.expires_at, _local_deadline(valid_until))
                    continue
                undecided = []
                for r, reply in zip(pending, replies, strict=True):
                    m = r.message
                    if reply.accepted:
                        self._count("dispatch_doubts_confirmed")
                        log.info("dispatch in doubt confirmed", task_instance_id=m.task_instance_id,
                                 attempt=m.attempt, reason=reply.reason)  # fmt: skip
                    elif sent > doubt.expires_at + DOUBT_MARGIN_MS / 1000:
                        self._count("dispatches_lost")
                        self._ours[host] = max(self._ours.get(host, 0) - 1, 0)
                        log.warning("dispatch in doubt was not taken: it runs again",
                                    task_instance_id=m.task_instance_id, attempt=m.attempt,
                                    reason=reply.reason)  # fmt: skip
                        r.actor.post(DispatchLost(m.task_instance_id, m.attempt, host, f"not taken: {reply.reason}"))
                    else:
                        undecided.append(r)  # a copy sent earlier may still arrive and be taken
                pending = undecided

    async def _ask(
        self, host: str, requests: list[DispatchRequest], valid_until: int
    ) -> list[DispatchReply] | RpcError:
        """Send ``requests`` to ``host`` again; its replies, or the error when the call failed."""
        try:
            if len(requests) == 1:
                message = dataclasses.replace(requests[0].message, valid_until_ms=valid_until)
                one = await self.rpc.call(host, message)
                self._said(host, 0, one.free_slots)
                return [one]
            batch = TaskDispatchBatch([r.message for r in requests], valid_until_ms=valid_until)
            reply = await self.rpc.call(host, batch)
            self._said(host, 0, reply.free_slots)
        except RpcError as exc:
            log.info("worker not answering about dispatches in doubt", error=str(exc), tasks=len(requests))
            return exc
        if len(reply.replies) != len(requests):
            return RpcError(f"{len(reply.replies)} replies to {len(requests)} attempts", maybe_delivered=True)
        return list(reply.replies)

    def _count(self, name: str, n: int = 1) -> None:
        if self.metrics is not None:
            self.metrics.inc(name, n)
