"""Report-until-acknowledged (invariant 4).

Every RUNNING and RESULT report is kept, keyed by (task instance, kind), and sent to the master that
currently owns its workflow instance until that master answers 200 — which it does only after it has
persisted the report. Failures back off exponentially (capped); a host update re-targets every pending
report of the instance and sends them at once. A RESULT acknowledged supersedes its RUNNING.

A RESULT is written to the spool (engine/worker/spool.py) while it is sent (the attempt counts as over
here once it is on disk) and removed from it once acknowledged and on disk; the next start of the worker
sends what the spool still holds (``restore``). A report whose master is gone (not a live master, not
answering) goes to a live master instead, which names the instance's owner: a worker restarted after its
results' master died still finds the new owner.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import heapq
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from core import logs, marks
from core.aio import BackgroundService, cancel_and_wait
from engine.worker.spool import Spool, Spooled
from rpc import RpcClient
from rpc.errors import BadRequest, RpcError
from rpc.messages import ReportReply, TaskReports, TaskResult, TaskRunning

log = logs.get(__name__)

#: owner epochs remembered (instances); older ones are forgotten first
EPOCHS_KEPT = 100_000
#: seconds a RUNNING report waits before it is sent: a task that ends sooner sends only its RESULT (which
#: carries the start time, host and log path), one RPC and one master transaction instead of two
RUNNING_DELAY = 0.02
#: most reports in one call
BATCH = 100
#: failed deliveries after which a report whose master is not a live one goes to a live master instead
REROUTE_AFTER = 2


@dataclass
class Pending:
    msg: TaskRunning | TaskResult
    due: float
    attempts: int = 0
    in_flight: bool = False
    #: when it was made (monotonic): the report-delay histogram
    made: float = field(default_factory=time.monotonic)


class Reporter(BackgroundService):
    task_name = "reporter"

    def __init__(
        self,
        rpc: RpcClient,
        retry_initial: float = 0.2,
        retry_max: float = 5.0,
        busy: Callable[[int], bool] = lambda _wf: False,
        running_delay: float = RUNNING_DELAY,
        spool: Spool | None = None,
        live_masters: Callable[[], list[str]] = lambda: [],
        hold_results: bool = False,
        on_acked: Callable[[str, float], None] = lambda _kind, _seconds: None,
    ) -> None:
        #: told of each acknowledged report: its kind ("running", "result") and how long it waited
        self.on_acked = on_acked
        self.running_delay = running_delay
        #: where results wait for their acknowledgement across a crash or restart (None: memory only)
        self.spool = spool
        #: addresses of the live masters (registry membership), to reach an owner a dead master names
        self.live_masters = live_masters
        #: test hook (worker.test_hold_results): results are spooled but never sent
        self.hold_results = hold_results
        self.rpc = rpc
        #: whether this worker still runs a task of the workflow instance (its owner entry is kept)
        self.busy = busy
        self.retry_initial = retry_initial
        self.retry_max = retry_max
        #: workflow instance id -> address of the master that owns it now
        self.masters: dict[int, str] = {}
        #: workflow instance id -> highest owner epoch seen (kept after the instance is forgotten)
        self.epochs: collections.OrderedDict[int, int] = collections.OrderedDict()
        #: (task instance id, attempt, kind) -> pending report, in send order
        self.pending: dict[tuple[int, int, str], Pending] = {}
        #: workflow instance id -> how many of its reports are pending (forget_instance in O(1))
        self._per_instance: collections.Counter[int] = collections.Counter()
        #: (due, seq, key, report) of reports waiting to be sent
        self._due: list[tuple[float, int, tuple[int, int, str], Pending]] = []
        self._seq = itertools.count()
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._sends: set[asyncio.Task[None]] = set()
        #: acknowledged results whose spool files are still to be removed, and the task removing them
        self._acked_files: list[tuple[int, int]] = []
        self._unlinker: asyncio.Task[None] | None = None
        #: results waiting for the next group commit to the spool (each with what its writer waits on: the
        #: error that kept the group off the disk, or None), and the task committing them
        self._to_spool: list[tuple[Spooled, asyncio.Future[Exception | None]]] = []
        #: results on their way to the spool (sent meanwhile): (task instance id, attempt) -> their write
        self._spooling: dict[tuple[int, int], asyncio.Future[Exception | None]] = {}
        self._committer: asyncio.Task[None] | None = None
        #: reports acknowledged (observability, tests)
        self.acked = 0

    async def close(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task, *self._sends)  # the reports in flight too, not only the loop
        if self._committer is not None:
            await asyncio.wait({self._committer}, timeout=5.0)  # the group on its way to the disk
        if self._unlinker is not None:
            await asyncio.wait({self._unlinker}, timeout=5.0)  # a file left behind is only sent again

    async def result(self, msg: TaskResult, master: str, on_sent: Callable[[], None] = lambda: None) -> None:
        """Spool a result and send it until acknowledged; returns once it is on disk. A result that finds the
        disk idle is sent while its group goes to the disk, not after: from then on the master's database or
        the spool holds it, whichever is first (a crash before either loses it, as one before the spool alone
        did), so the fsync is off the way from a task's end to the next task's start (a chain's step).
        Results that end while a group is being written go to the disk together in the next one (one file,
        one fsync: a group commit) and are sent once it is there, together (fewer, larger report batches
        while the worker is busy). ``on_sent`` is called when the result is handed to the sender (the master
        may hear of it from then on)."""
        marks.mark("worker report")
        wf = msg.workflow_instance_id
        written: asyncio.Future[Exception | None] | None = None
        at_once = self.spool is None or self._committer is None or self._committer.done()
        if self.spool is not None:
            entry = Spooled(self.masters.get(wf, master), self.epochs.get(wf, 0), msg)
            written = asyncio.get_running_loop().create_future()
            self._to_spool.append((entry, written))
            self._spooling[entry.key] = written  # acknowledged before it is on disk: removed once it is
            written.add_done_callback(functools.partial(self._spooled, entry.key))
            if at_once:  # the spool idle: this result starts the next group
                self._committer = asyncio.create_task(self._commit(), name="spool-commit")
        if at_once:
            self.report(msg, master)
            on_sent()
        if written is not None:
            error = await asyncio.shield(written)
            if error is not None:  # a full or broken disk must not lose the result: keep it in memory
                log.error(
                    "result not spooled, kept in memory only", error=str(error), task_instance_id=msg.task_instance_id
                )
        if not at_once:
            self.report(msg, master)
            on_sent()

    def _spooled(self, key: tuple[int, int], written: asyncio.Future[Exception | None]) -> None:
        if self._spooling.get(key) is written:
            del self._spooling[key]

    async def _commit(self) -> None:
        """Write the waiting results to the spool, a group at a time, until none waits."""
        assert self.spool is not None
        while self._to_spool:
            group, self._to_spool = self._to_spool, []
            error: Exception | None = None
            try:
                await asyncio.to_thread(self.spool.write_many, [entry for entry, _ in group])
            except Exception as exc:  # every writer hears of it (and keeps its result in memory)
                error = exc
            for _, written in group:
                if not written.done():
                    written.set_result(error)

    def restore(self, entries: list[Spooled]) -> None:
        """Results a previous run of this worker (or a dead one sharing the spool) left unacknowledged."""
        for e in entries:
            wf = e.result.workflow_instance_id
            if e.epoch >= self.epochs.get(wf, 0):
                self.note_owner(wf, e.master, e.epoch)
            self.report(e.result, e.master)
            log.info("spooled result to send again", task_instance_id=e.key[0], attempt=e.key[1], master=e.master)

    def stale(self, workflow_instance_id: int, epoch: int, valid_until_ms: int = 0) -> str:
        """Why an order (dispatch, kill) from the owner at ``epoch`` must be refused, or "": it comes from
        an owner older than one we know, or after the sender's lease may have expired."""
        if valid_until_ms and time.time() * 1000 > valid_until_ms:
            return "stale order: the sending master's lease may have expired"
        if epoch < self.epochs.get(workflow_instance_id, 0):
            return "stale owner: the workflow instance has moved to another master"
        return ""

    def note_owner(self, workflow_instance_id: int, master: str, epoch: int = 0) -> bool:
        """A dispatch or host update names the instance's owner at ``epoch``. False (and nothing changes)
        when a newer owner is already known: a master that lost the instance must not start work."""
        if self.stale(workflow_instance_id, epoch):
            return False
        self.epochs[workflow_instance_id] = epoch
        self.epochs.move_to_end(workflow_instance_id)
        while len(self.epochs) > EPOCHS_KEPT:
            self.epochs.popitem(last=False)
        self.masters[workflow_instance_id] = master
        return True

    def report(self, msg: TaskRunning | TaskResult, master: str) -> None:
        self.masters.setdefault(msg.workflow_instance_id, master)
        now = time.monotonic()
        if isinstance(msg, TaskResult):
            running = self.pending.get((msg.task_instance_id, msg.attempt, "running"))
            if running is not None and not running.in_flight:
                self._drop((msg.task_instance_id, msg.attempt, "running"))  # the result says it all
            self._add((msg.task_instance_id, msg.attempt, "result"), Pending(msg, due=now))
        else:
            self._add((msg.task_instance_id, msg.attempt, "running"), Pending(msg, due=now + self.running_delay))
        self._idle.clear()

    def _add(self, key: tuple[int, int, str], p: Pending) -> None:
        if key not in self.pending:
            self._per_instance[p.msg.workflow_instance_id] += 1
        self.pending[key] = p
        self._schedule(key, p)

    def _drop(self, key: tuple[int, int, str]) -> None:
        p = self.pending.pop(key, None)
        if p is not None:
            wf = p.msg.workflow_instance_id
            self._per_instance[wf] -= 1
            if self._per_instance[wf] <= 0:
                del self._per_instance[wf]

    def host_update(self, workflow_instance_id: int, master: str, epoch: int = 0) -> list[list[int]]:
        """Re-target the instance's reports; returns [task instance id, attempt] of its pending reports."""
        previous = self.masters.get(workflow_instance_id)
        if not self.note_owner(workflow_instance_id, master, epoch):
            log.warning("stale host update ignored", workflow_instance_id=workflow_instance_id, master=master)
            return []
        now = time.monotonic()
        for key, p in self.pending.items():
            if p.msg.workflow_instance_id == workflow_instance_id:
                p.due = now
                p.attempts = 0
                if not p.in_flight:
                    self._schedule(key, p)
        log.info("reports re-targeted", workflow_instance_id=workflow_instance_id, old=previous, new=master)
        self._wake.set()
        return [[p.msg.task_instance_id, p.msg.attempt] for p in self.pending.values()
                if p.msg.workflow_instance_id == workflow_instance_id]  # fmt: skip

    def host_updates(self, master: str, instances: list[tuple[int, int]]) -> list[list[int]]:
        """:meth:`host_update` of many (workflow instance id, epoch) in one pass over the pending reports."""
        accepted: set[int] = set()
        for workflow_instance_id, epoch in instances:
            if self.note_owner(workflow_instance_id, master, epoch):
                accepted.add(workflow_instance_id)
            else:
                log.warning("stale host update ignored", workflow_instance_id=workflow_instance_id, master=master)
        now = time.monotonic()
        known: list[list[int]] = []
        for key, p in self.pending.items():
            if p.msg.workflow_instance_id in accepted:
                p.due = now
                p.attempts = 0
                if not p.in_flight:
                    self._schedule(key, p)
                known.append([p.msg.task_instance_id, p.msg.attempt])
        log.info("reports re-targeted", instances=len(accepted), new=master)
        self._wake.set()
        return known

    def forget_instance(self, workflow_instance_id: int) -> None:
        """Drop the owner entry once nothing of the instance is pending or running here."""
        if self.busy(workflow_instance_id):
            return
        if not self._per_instance.get(workflow_instance_id):
            self.masters.pop(workflow_instance_id, None)

    async def flush(self, timeout: float) -> bool:
        """Wait until every pending report is acknowledged; False on timeout."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            return False
        return True

    def _schedule(self, key: tuple[int, int, str], p: Pending) -> None:
        heapq.heappush(self._due, (p.due, next(self._seq), key, p))
        self._wake.set()

    async def _run(self) -> None:
        """Send each pending report when it is due. The heap may hold outdated entries (a report replaced,
        re-timed or acknowledged): they are skipped when popped, so a wake costs O(log n), not a scan."""
        while True:
            self._wake.clear()
            now = time.monotonic()
            batches: dict[str, list[tuple[tuple[int, int, str], Pending]]] = collections.defaultdict(list)
            while self._due and self._due[0][0] <= now:
                due, _, key, p = heapq.heappop(self._due)
                if self.pending.get(key) is not p or p.in_flight or p.due != due:
                    continue
                if self.hold_results and key[2] == "result":
                    continue  # test hook: spooled, never sent (stays pending)
                p.in_flight = True
                batches[self._target(p)].append((key, p))
            for master, items in batches.items():
                for i in range(0, len(items), BATCH):
                    chunk = items[i : i + BATCH]
                    coro = self._send(master, *chunk[0]) if len(chunk) == 1 else self._send_batch(master, chunk)
                    task = asyncio.create_task(coro)
                    self._sends.add(task)
                    task.add_done_callback(self._sends.discard)
            timeout = max(0.0, self._due[0][0] - time.monotonic()) if self._due else None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)

    def _target(self, p: Pending) -> str:
        """Where a report goes: its instance's owner; once it failed to get there a few times and that
        owner is not a live master, any live master (it acknowledges, or names the owner)."""
        wf = p.msg.workflow_instance_id
        master = self.masters.get(wf, "")
        if p.attempts >= REROUTE_AFTER:
            live = self.live_masters()
            if live and master not in live:
                return sorted(live)[wf % len(live)]
        return master

    async def _send_batch(self, master: str, items: list[tuple[tuple[int, int, str], Pending]]) -> None:
        """Several reports for one master in one call; a master without the batch call gets them one by one."""
        running = [(k, p) for k, p in items if k[2] == "running"]
        results = [(k, p) for k, p in items if k[2] == "result"]
        msg = TaskReports([p.msg for _, p in running], [p.msg for _, p in results])  # type: ignore[misc]
        try:
            reply = await self.rpc.call(master, msg)
            replies: list[ReportReply | None] = list(reply.replies)
        except BadRequest as exc:
            if exc.status == 404:  # an older master: one call per report
                await asyncio.gather(*(self._send(master, k, p) for k, p in items))
                return
            log.error("master refused a batch of reports; will retry", error=str(exc))
            replies = [None] * len(items)
        except RpcError as exc:
            log.debug("reports not delivered", error=str(exc), master=master)
            replies = [None] * len(items)
        if len(replies) != len(items):
            replies = [None] * len(items)
        for (key, p), one in zip([*running, *results], replies, strict=True):
            self._settle(key, p, master, one)

    async def _send(self, master: str, key: tuple[int, int, str], p: Pending) -> None:
        reply: ReportReply | None
        try:
            reply = await self.rpc.call(master, p.msg)
        except BadRequest as exc:
            log.error("master refused a report; will retry", error=str(exc), task_instance_id=p.msg.task_instance_id)
            reply = None
        except RpcError as exc:
            log.debug("report not delivered", error=str(exc), task_instance_id=p.msg.task_instance_id)
            reply = None
        self._settle(key, p, master, reply)

    def _settle(self, key: tuple[int, int, str], p: Pending, master: str, reply: ReportReply | None) -> None:
        """Apply a master's answer to one report (None: no answer)."""
        acked = reply is not None and reply.ack
        if reply is not None and not acked and reply.owner and reply.owner != master:
            wf = p.msg.workflow_instance_id
            if reply.owner != self.masters.get(wf) or reply.epoch > self.epochs.get(wf, 0):
                # the instance moved to another master: send everything of it there
                self.host_update(wf, reply.owner, reply.epoch)
            # else a live master we were rerouted to names the owner we target already (gone, not yet
            # failed over): no news, so the backoff goes on (starting it again would spin until the takeover)
        p.in_flight = False
        if self.pending.get(key) is not p:
            return  # replaced meanwhile (a newer report of the same kind)
        if acked:
            self._drop(key)
            self.acked += 1
            self.on_acked(key[2], time.monotonic() - p.made)
            if key[2] == "result":
                self._drop((key[0], key[1], "running"))
                self._unspool((key[0], key[1]))
            if not self.pending:
                self._idle.set()
            self.forget_instance(p.msg.workflow_instance_id)
        else:
            p.attempts += 1
            p.due = time.monotonic() + min(self.retry_max, self.retry_initial * 2 ** (p.attempts - 1))
            self._schedule(key, p)

    def _unspool(self, key: tuple[int, int]) -> None:
        """Remove an acknowledged result's spool file (in a thread, batched with the others acked meanwhile);
        one still on its way to the disk once it is there."""
        if self.spool is None:
            return
        writing = self._spooling.get(key)
        if writing is not None:
            writing.add_done_callback(lambda _written: self._unspool(key))
            return
        self._acked_files.append(key)
        if self._unlinker is None or self._unlinker.done():
            self._unlinker = asyncio.create_task(self._remove_acked(), name="spool-unlink")

    async def _remove_acked(self) -> None:
        assert self.spool is not None
        while self._acked_files:
            batch, self._acked_files = self._acked_files, []
            try:
                await asyncio.to_thread(self.spool.remove, batch)
            except OSError as exc:  # left behind: sent again by the next start, acknowledged again
                log.warning("acknowledged results not removed from the spool", error=str(exc), count=len(batch))
