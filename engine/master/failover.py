"""Master and worker failover, driven by registry watches and a periodic sweep.

Masters: an unfinished instance whose owner is not a live master — or is a later incarnation at the
same address (the instance's epoch is below the epoch floor that incarnation publishes in its
heartbeat) — is orphaned. A live master holding the dead host's failover lock takes each orphan over in
one transaction (fresh epoch; attempts on workers that are gone become NEED_FAULT_TOLERANCE; an alert),
tells every live worker still running one of its attempts to report here (host update; an attempt the
worker does not know was lost with the dead master and runs again), and starts an actor from the
database state. A worker's REMOVED event, or the sweep finding attempts on a worker that is gone, posts
WorkerLost to the owning actors: those attempts become NEED_FAULT_TOLERANCE and run again elsewhere —
once, because each instance has exactly one owner.

The sweep also runs right after registration and whenever a master disappears, so a cluster that lost
every master recovers as soon as one is back, and an event lost during an etcd outage is not fatal.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime as dt
from collections.abc import Callable
from typing import Any

import asyncpg

from core import logs
from core.aio import BackgroundService
from core.errors import StorageError
from engine.master.actor import InstanceInfo
from engine.master.commands import DefinitionCache, Starting
from engine.master.store import CommitUnknown, FencedOut, MasterStore, TaskUpdate, WriteBatch
from engine.master.workflow_messages import Attempt, WorkerLost
from engine.states import TaskState, WorkflowState
from engine.storage.failures import DB_FAILURES
from engine.tasks.registry import LOGIC_TYPES
from engine.workflows.model import DefinitionError
from registry import MASTER, WORKER, ChangeKind, NodeChange, NodeId, RegistryNode, RegistryUnavailable
from registry.heartbeat import Heartbeat
from registry.keys import nodes_prefix, parse_node_key
from rpc import RpcClient
from rpc.errors import RpcError
from rpc.messages import HostUpdate

log = logs.get(__name__)

#: seconds a takeover waits for the host updates it sends (together) to the instance's workers
HOST_UPDATE_TIMEOUT = 3.0

#: seconds a takeover waits for our own actor of the instance it takes again to stop
ACTOR_STOP_TIMEOUT = 3.0

#: attempts a live worker may be running (SUBMITTED ones were only in the dead master's dispatch queue)
_RUNNING_SOMEWHERE = frozenset({TaskState.DISPATCH, TaskState.RUNNING_EXECUTION, TaskState.DELAY_EXECUTION})


def still_orphaned(rows: list[Any], floors: dict[str, int]) -> list[Any]:
    """Those of ``rows`` (id, host, epoch) whose owner is not a live master (``floors``: live master ->
    its epoch floor), or is an earlier incarnation at a live master's address (epoch below its floor)."""
    return [r for r in rows if r["host"] not in floors or r["epoch"] < floors[r["host"]]]


class FailoverService(BackgroundService):
    task_name = "failover"

    def __init__(
        self,
        me: str,
        store: MasterStore,
        cache: DefinitionCache,
        rpc: RpcClient,
        registry: Callable[[], RegistryNode | None],
        actors: dict[int, Any],
        start_actor: Callable[..., Any],
        interval: float,
        metrics: Any = None,
        starting: Starting | None = None,
    ) -> None:
        self.me = me
        self.store = store
        self.cache = cache
        self.rpc = rpc
        self.registry = registry
        self.actors = actors
        self.start_actor = start_actor
        self.interval = interval
        self.metrics = metrics
        #: claims in flight (shared with the command poller): their instances are ours before an actor drives them
        self.starting = starting or Starting()
        self._kick = asyncio.Event()
        #: workers that did not answer a host update in the current sweep (its instances are asked again later)
        self._silent: set[str] = set()
        #: instances of ours to take again under a fresh epoch (their actor crashed, or a takeover could not
        #: ask every worker): instance id -> the epoch it held
        self._retake: dict[int, int] = {}
        #: stops of our actors replaced by a takeover that have not ended yet
        self._stopping: set[asyncio.Future[None]] = set()

    def start(self) -> None:
        super().start()
        self._kick.set()

    def on_membership(self, change: NodeChange) -> None:
        if change.kind is not ChangeKind.REMOVED:
            return
        if change.info.node.role == MASTER:
            if change.info.address != self.me:
                self._kick.set()
            return
        log.info("worker left", worker=change.info.address, incarnation=change.info.create_revision)
        self.worker_lost(change.info.address, change.info.create_revision)

    def retake(self, instance_id: int, epoch: int) -> None:
        """Our actor of this instance failed (e.g. the database went away mid-write): take the instance
        back from the database state as soon as the database answers."""
        self._retake[instance_id] = epoch
        self._kick.set()

    def worker_lost(self, host: str, incarnation: int = 0) -> None:
        """The worker at ``host`` is gone: its incarnation ``incarnation`` (0: whichever it was)."""
        for actor in list(self.actors.values()):
            if any(a.host == host for a in actor.run.active()):
                actor.post(WorkerLost(host, incarnation=incarnation))

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._kick.wait(), self.interval)
            self._kick.clear()
            try:
                await self.sweep()
            except (*DB_FAILURES, StorageError, RegistryUnavailable) as exc:
                log.warning("failover sweep failed; retrying", error=str(exc))
                if self._retake:
                    await asyncio.sleep(min(self.interval, 1.0))
                    self._kick.set()  # our own instances wait for the database: retry soon

    async def sweep(self) -> int:
        """Take over orphaned instances and re-run attempts of workers that are gone; returns how many
        instances this master took over."""
        node = self.registry()
        if node is None or not node.session.alive:
            return 0
        self._silent = set()
        floors, live_workers = await self._live_nodes(node)
        if self.me not in floors:
            return 0  # not (yet) visible as a live master ourselves: take nothing
        lost_hosts = {
            a.host
            for actor in self.actors.values()
            for a in actor.run.active()
            if a.host
            and a.host not in live_workers
            and a.state is not TaskState.SUBMITTED_SUCCESS
            and a.code not in actor.run.logic  # run by the master itself, not on a worker
        }
        for host in lost_hosts:
            self.worker_lost(host)
        for instance_id, epoch in list(self._retake.items()):
            await self._take(instance_id, self.me, epoch, live_workers)  # raises while the DB is down
            if self._retake.get(instance_id) == epoch:
                del self._retake[instance_id]
        await self.take_back_undriven(floors[self.me], live_workers)
        # The live masters are read again AFTER the orphans: a master that registered since the first
        # read (and took instances meanwhile, e.g. from a dead peer) is in the second, so its instances are
        # not taken from it; a takeover of an instance made after the orphans were read fails on its own
        # (host and epoch changed). A sweep that lasts (RPCs to workers) never uses a stale view of masters.
        candidates = await self.store.orphans(floors)
        if candidates:
            floors, live_workers = await self._live_nodes(node)
        by_host: dict[str, list[asyncpg.Record]] = collections.defaultdict(list)
        for row in still_orphaned(candidates, floors):
            by_host[row["host"]].append(row)
        taken = 0
        for host, rows in by_host.items():
            taken += await self._fail_over(node, host, rows, live_workers)
        return taken

    async def take_back_undriven(self, floor: int, live_workers: set[str]) -> int:
        """Take back the instances this incarnation owns (epoch at or above its ``floor``) that no actor
        drives and none is about to: a takeover or a claim whose commit landed although the master saw
        it fail (PostgreSQL restarted, or the commit's outcome was unknown) leaves one. Returns how many."""
        mark = self.starting.generation
        if self.starting.active:
            return 0
        rows = await self.store.owned(floor)
        if not self.starting.quiet_since(mark):
            return 0  # a claim ran meanwhile: its instances may be in rows without their actor yet
        taken = 0
        for row in rows:
            if row["id"] in self.actors or row["id"] in self._retake:
                continue
            log.warning("an instance of ours has no actor; taking it back", workflow_instance_id=row["id"])
            if await self._take(row["id"], self.me, row["epoch"], live_workers):
                taken += 1
        return taken

    @staticmethod
    async def _live_nodes(node: RegistryNode) -> tuple[dict[str, int], set[str]]:
        """(live master -> its epoch floor, live worker addresses), read from etcd itself: a view that is
        re-reading after an etcd hiccup may miss live nodes, and calling a live worker's attempts lost
        (or a live master's instances orphaned) would run work twice or take it needlessly."""
        root = node.cfg.root
        _, kvs = await node.client.get_prefix(nodes_prefix(root))
        floors: dict[str, int] = {}
        workers: set[str] = set()
        for kv in kvs:
            ident = parse_node_key(root, kv.key)
            if ident is None:
                continue
            if ident.role == WORKER:
                workers.add(ident.address)
                continue
            try:
                floors[ident.address] = Heartbeat.from_json(kv.value).epoch_floor
            except ValueError:
                floors[ident.address] = 0  # unreadable heartbeat: alive, but take nothing from it
        return floors, workers

    async def _fail_over(self, node: RegistryNode, host: str, rows: list[asyncpg.Record], workers: set[str]) -> int:
        lock = node.failover_lock(NodeId(MASTER, host))
        if not await lock.try_acquire():
            return 0  # another master is failing this host over; the next sweep re-checks
        taken = 0
        try:
            with logs.bound(dead_master=host):
                log.info("failing over master", instances=len(rows))
                for row in rows:
                    if await self._take(row["id"], host, row["epoch"], workers):
                        taken += 1
                log.info("master failed over", taken=taken)
        finally:
            await lock.release()
        if self.metrics is not None and taken:
            self.metrics.inc("instances_failed_over", taken)
        return taken

    async def _take(self, instance_id: int, host: str, epoch: int, workers: set[str]) -> bool:
        if instance_id in self.actors:
            workers = await self._replace_actor(instance_id, workers)
        result = await self.store.take_over(instance_id, host, epoch, workers)
        if result is None:
            return False  # moved by someone else meanwhile
        row, attempt_rows, group_waiting = result
        info = InstanceInfo.from_row(row)
        # the instance is ours from here on: whatever fails before its actor starts, it is taken again
        try:
            return await self._drive(info, row, [Attempt.from_row(r) for r in attempt_rows], group_waiting, workers)
        except FencedOut as exc:
            log.info("instance taken from us during its takeover", workflow_instance_id=info.id, error=str(exc))
            return False
        except (*DB_FAILURES, CommitUnknown):
            self.retake(info.id, info.epoch)
            raise

    async def _replace_actor(self, instance_id: int, workers: set[str]) -> set[str]:
        """Stop our actor of an instance we are about to take again under a fresh epoch (a takeover that
        could not ask every worker is retaken while its actor drives the instance), before the takeover:
        what that actor queued for a worker, or is about to send, then never leaves (``Dispatcher._live``).
        Left running, it would send an attempt the takeover finds on no worker, marks NEED_FAULT_TOLERANCE
        and runs again, under the epoch it replaced; a worker that never heard of the new one (it
        restarted since) takes it: two attempts of one task at once (invariant 3), a task group over its
        size. Returns the live workers read again after the stop: a send already on its way goes to a
        worker registered by then, which the takeover must ask (its host update arrives before that send,
        which it then refuses, or after, and names the attempt: adopted)."""
        actor = self.actors[instance_id]
        log.info("stopping our actor of an instance taken again", workflow_instance_id=instance_id,
                 epoch=actor.info.epoch)  # fmt: skip
        stopping = asyncio.ensure_future(actor.stop())  # its first step ends its sends (Dispatcher._live)
        self._stopping.add(stopping)
        stopping.add_done_callback(self._stopping.discard)
        _, pending = await asyncio.wait([stopping], timeout=ACTOR_STOP_TIMEOUT)
        if pending:  # a call ignoring its cancellation: it sends nothing more, and the takeover fences its writes
            log.error("replaced workflow actor did not stop in time", workflow_instance_id=instance_id)
        node = self.registry()
        if node is None:
            return workers
        return (await self._live_nodes(node))[1]

    async def _drive(
        self, info: InstanceInfo, row: asyncpg.Record, attempts: list[Attempt], group_waiting: set[int],
        workers: set[str],
    ) -> bool:  # fmt: skip
        """Mark what was lost with the old owner and start the taken-over instance's actor."""
        try:
            spec = await self.cache.spec(int(row["workflow_definition_code"]), int(row["workflow_definition_version"]))
        except DefinitionError as exc:
            await self._end_undrivable(info, str(exc))
            return True
        # logic tasks (sub-workflows, dependents ...) ran on the dead master: the new actor takes them up
        # attempts waiting in their task group's queue were never dispatched: they stay queued, in place
        on_workers = [
            a for a in attempts if spec.tasks[a.code].task_type not in LOGIC_TYPES and a.id not in group_waiting
        ]
        lost, unsure = await self._adopt(info, on_workers, workers)
        if lost:
            batch = WriteBatch(updates=[TaskUpdate(a.id, int(TaskState.NEED_FAULT_TOLERANCE)) for a in lost])
            await self.store.write(info.id, info.epoch, batch)
            for a in lost:
                a.state = TaskState.NEED_FAULT_TOLERANCE
        if unsure:
            self.retake(info.id, info.epoch)  # ask again on the next sweep, under a fresh epoch
        self.start_actor(info, spec, WorkflowState(row["state"]), attempts, group_waiting=frozenset(group_waiting))
        log.info("instance taken over", workflow_instance_id=info.id, epoch=info.epoch, lost_attempts=len(lost))
        return True

    async def _end_undrivable(self, info: InstanceInfo, reason: str) -> None:
        """The instance cannot be driven (its definition is gone): it ends FAILURE with the reason in its
        state history, rather than staying owned by a live master that never drives it."""
        log.error("taken-over instance cannot be driven; it ends FAILURE", workflow_instance_id=info.id, error=reason)
        now = dt.datetime.now(dt.UTC).isoformat()
        desc = f"cannot be driven after a failover: {reason}"
        batch = WriteBatch(
            workflow_state=int(WorkflowState.FAILURE),
            workflow_finished=True,
            workflow_history=[{"time": now, "state": WorkflowState.FAILURE.name, "desc": desc}],
        )
        await self.store.write(info.id, info.epoch, batch)

    async def _adopt(
        self, info: InstanceInfo, attempts: list[Attempt], workers: set[str]
    ) -> tuple[list[Attempt], bool]:
        """Point the live workers that may run the instance's attempts at us (host update with the new
        epoch: from then on they refuse the dead owner's late orders) and ask which attempts they know.

        An attempt on a worker that answered without knowing it, or a SUBMITTED one (its dispatch may
        have reached a worker before the dead master recorded where) that no live worker knows, was
        lost with the dead master: returned, to run again. ``unsure`` when a worker that might hold one
        did not answer: those attempts are kept and the instance is asked about again."""
        running = [a for a in attempts if a.state in _RUNNING_SOMEWHERE and a.host]
        submitted = [a for a in attempts if a.state is TaskState.SUBMITTED_SUCCESS]
        ask = {a.host for a in running} | (workers if submitted else set())
        known: set[tuple[int, int]] = set()
        silent = ask & self._silent  # silent once in this sweep: not waited for again
        ask -= silent
        msg = HostUpdate(info.id, self.me, info.epoch)

        async def update(worker: str) -> None:
            try:
                reply = await self.rpc.call(worker, msg, timeout=HOST_UPDATE_TIMEOUT)
            except RpcError as exc:
                log.warning("host update failed", worker=worker, workflow_instance_id=info.id, error=str(exc))
                silent.add(worker)
                self._silent.add(worker)
                return
            known.update((int(k[0]), int(k[1])) for k in reply.known)

        # all at once: a silent worker costs the takeover one timeout, not one per worker in turn
        await asyncio.gather(*(update(w) for w in sorted(ask)))
        lost = [a for a in running if a.host not in silent and (a.id, a.attempt) not in known]
        unsure = any(a.host in silent for a in running)
        if submitted and silent:
            unsure = True
        else:
            lost += [a for a in submitted if (a.id, a.attempt) not in known]
        return lost, unsure
