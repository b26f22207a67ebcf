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

import array
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
from engine.master.arrivals import Arrivals
from engine.master.commands import DefinitionCache, Starting
from engine.master.gcpolicy import GcPolicy
from engine.master.store import CommitUnknown, FencedOut, MasterStore, WriteBatch
from engine.master.workflow_messages import Attempt, WorkerLost
from engine.states import TaskState, WorkflowState
from engine.storage.failures import DB_FAILURES
from engine.tasks.registry import LOGIC_TYPES
from engine.workflows.definitions import WorkflowSpec
from engine.workflows.model import DefinitionError
from registry import MASTER, WORKER, ChangeKind, NodeChange, NodeId, RegistryNode, RegistryUnavailable
from registry.heartbeat import Heartbeat
from registry.keys import nodes_prefix, parse_node_key
from rpc import RpcClient
from rpc.errors import BadRequest, RpcError
from rpc.messages import HostUpdate, HostUpdates

log = logs.get(__name__)

#: seconds a takeover waits for the host updates it sends (together) to the instances' workers, plus
#: HOST_UPDATE_PER_INSTANCE for each instance a call names (a worker re-targets them one by one)
HOST_UPDATE_TIMEOUT = 3.0
HOST_UPDATE_PER_INSTANCE = 0.002

#: seconds a takeover waits for our own actor of the instance it takes again to stop
ACTOR_STOP_TIMEOUT = 3.0

#: instances taken over in one transaction (set-based statements: thousands cost about what one did)
TAKEOVER_BATCH = 5000

#: instances named in one host update call to a worker
HOST_UPDATE_BATCH = 5000

#: actors of taken-over instances started between two yields to the event loop
ACTOR_START_CHUNK = 100
#: actors looked at per slice of the sweep's look for attempts on lost workers (the loop let go in between)
SWEEP_SLICE = 2000

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
        arrivals: Arrivals | None = None,
        gc: GcPolicy | None = None,
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
        #: instances being taken over, their actors not started yet (shared with the report handlers, which
        #: hold their reports until the actor exists)
        self.arrivals = arrivals or Arrivals()
        #: the master's garbage collection policy: the actors a takeover starts are frozen out of the full
        #: collections' walk, as claimed ones are (else each full collection walks every taken-over actor)
        self.gc = gc
        self._kick = asyncio.Event()
        #: workers that did not answer a host update in the current sweep (its instances are asked again later)
        self._silent: set[str] = set()
        #: instances of ours to take again under a fresh epoch (their actor crashed, or a takeover could not
        #: ask every worker): instance id -> the epoch it held
        self._retake: dict[int, int] = {}
        #: instances of ours the last undriven sweep read without an actor (id -> epoch), and the claims'
        #: generation (Starting) when that read ended
        self._undriven: dict[int, int] = {}
        self._undriven_read = 0
        #: of those, the ones retaken because these workers did not answer: instance id -> the workers
        self._unsure: dict[int, frozenset[str]] = {}
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

    def retake(self, instance_id: int, epoch: int, silent: frozenset[str] = frozenset()) -> None:
        """Our actor of this instance failed (e.g. the database went away mid-write): take the instance
        back from the database state as soon as the database answers. With ``silent``: its takeover could
        not ask these workers about its attempts on them; taken again to ask them while one is registered
        (once all have left, the worker-lost path settles those running attempts: :meth:`_due`)."""
        self._retake[instance_id] = epoch
        if silent:
            self._unsure[instance_id] = silent
        else:
            self._unsure.pop(instance_id, None)
        self._kick.set()

    def _due(self, retakes: list[tuple[int, int]], live_workers: set[str]) -> list[tuple[int, int]]:
        """The retakes to make now. One asked for only because workers holding its running attempts did not
        answer is dropped once all of them have left, our actor drives the instance (its task runs) and no
        attempt of it is active on them any more: the worker-lost path settled those attempts under the
        actor's epoch, and a retake would stop the actor, find an attempt it had queued for a live worker
        but not sent yet on no worker and mark it lost with it (run again). One kept for a SUBMITTED attempt
        of the old owner's is always made: only asking settles it (an actor never sends an attempt it
        inherited); so is one whose actor still has an attempt on a silent worker (a worker-lost event it
        never got: it did not exist yet, or the worker came back at the same address)."""
        due = []
        for instance_id, epoch in retakes:
            silent = self._unsure.get(instance_id)
            actor = self.actors.get(instance_id)
            if (
                silent
                and not silent & live_workers
                and actor is not None
                and actor.task is not None
                and not any(a.host in silent and a.state is not TaskState.SUBMITTED_SUCCESS for a in actor.run.active())
            ):
                log.info("workers that did not answer have left: not taking our instance again",
                         workflow_instance_id=instance_id, workers=sorted(silent))  # fmt: skip
                del self._retake[instance_id]
                del self._unsure[instance_id]
                continue
            due.append((instance_id, epoch))
        return due

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
        for host in sorted(await self._hosts_gone(node, live_workers)):
            self.worker_lost(host)
        retakes = self._due(list(self._retake.items()), live_workers)
        if retakes:
            await self._take_many([(i, self.me, e) for i, e in retakes], live_workers)  # raises while the DB is down
            for instance_id, epoch in retakes:
                if self._retake.get(instance_id) == epoch:
                    del self._retake[instance_id]
                    self._unsure.pop(instance_id, None)
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

    async def _hosts_gone(self, node: RegistryNode, live_workers: set[str]) -> set[str]:
        """The hosts an attempt of ours runs on that are not live workers, as etcd says after the look: a worker
        that registered while the look let the loop go (and was sent attempts meanwhile) is live, not lost."""
        lost = await self._lost_hosts(live_workers)
        if lost:
            _, now_live = await self._live_nodes(node)
            lost -= now_live
        return lost

    async def _lost_hosts(self, live_workers: set[str]) -> set[str]:
        """The hosts, not among ``live_workers``, that an attempt of ours runs on. A look through every actor,
        a slice at a time with the loop let go in between: 100,000 actors held 100-200 ms in one go."""
        # the ids, not the actors: an array is no container the collector walks (a list of 100,000 actors
        # alive across the slices made each young collection touch every actor)
        ids = array.array("q", self.actors)
        lost: set[str] = set()
        for start in range(0, len(ids), SWEEP_SLICE):
            if start:
                await asyncio.sleep(0)
            lost.update(
                a.host
                for actor in map(self.actors.get, ids[start : start + SWEEP_SLICE])
                if actor is not None
                for a in actor.run.active()
                if a.host
                and a.host not in live_workers
                and a.state is not TaskState.SUBMITTED_SUCCESS
                and a.code not in actor.run.logic  # run by the master itself, not on a worker
            )
        return lost

    async def take_back_undriven(self, floor: int, live_workers: set[str]) -> int:
        """Take back the instances this incarnation owns (epoch at or above its ``floor``) that no actor
        drives and none is about to: a takeover or a claim whose commit landed although the master saw
        it fail (PostgreSQL restarted, or the commit's outcome was unknown) leaves one. Returns how many."""
        mark = self.starting.generation

        def no_actor(instance_id: int) -> bool:
            return instance_id not in self.actors and instance_id not in self._retake

        rows = await self.store.owned_where(floor, no_actor)
        # asked again once read: an actor may have started (or a retake been noted) while the pages came
        seen = {i: epoch for i, epoch in rows if no_actor(i)}
        before, before_read = self._undriven, self._undriven_read
        self._undriven, self._undriven_read = seen, self.starting.generation
        if not self.starting.quiet_since(mark):
            # a claim ran meanwhile: its instances may be in rows without their actor yet. Those the previous
            # sweep saw undriven too (at the same epoch) are not, unless a start under way began before that
            # sweep's read ended: so steady claiming never keeps an undriven instance waiting for good
            if not self.starting.open_since(before_read):
                return 0
            seen = {i: epoch for i, epoch in seen.items() if before.get(i) == epoch}
        undriven = [(i, self.me, epoch) for i, epoch in seen.items()]
        if undriven:
            first = [u[0] for u in undriven][:20]
            log.warning("instances of ours have no actor; taking them back", workflow_instance_ids=first,
                        count=len(undriven))  # fmt: skip
        return await self._take_many(undriven, live_workers)

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
                taken = await self._take_many([(int(r["id"]), host, int(r["epoch"])) for r in rows], workers)
                log.info("master failed over", taken=taken)
        finally:
            await lock.release()
        if self.metrics is not None and taken:
            self.metrics.inc("instances_failed_over", taken)
        return taken

    async def _take(self, instance_id: int, host: str, epoch: int, workers: set[str]) -> bool:
        """:meth:`_take_many` of one instance: whether it was taken."""
        return await self._take_many([(instance_id, host, epoch)], workers) == 1

    async def _take_many(self, found: list[tuple[int, str, int]], workers: set[str]) -> int:
        """Take over the instances ``found`` (id, owner, epoch as found), :data:`TAKEOVER_BATCH` per
        transaction, and drive them; returns how many were taken (moved by someone else meanwhile: not)."""
        taken = 0
        for i in range(0, len(found), TAKEOVER_BATCH):
            chunk = found[i : i + TAKEOVER_BATCH]
            replaced = [instance_id for instance_id, _, _ in chunk if instance_id in self.actors]
            if replaced:
                workers = await self._replace_actors(replaced, workers)
            ids = [instance_id for instance_id, _, _ in chunk]
            self.arrivals.expect(ids)  # their reports (the host updates send them here) wait for the actors
            try:
                rows = await self.store.take_over_many(chunk, workers)
                # the instances are ours from here on: whatever fails before their actors start, they are taken again
                try:
                    taken += await self._drive_many(rows, workers)
                except (*DB_FAILURES, CommitUnknown):
                    for row, _, _ in rows:
                        if int(row["id"]) not in self.actors:
                            self.retake(int(row["id"]), int(row["epoch"]))
                    raise
            finally:
                self.arrivals.arrived(ids)  # those not started (not ours, ended, failed): answered as usual
        return taken

    async def _replace_actors(self, instance_ids: list[int], workers: set[str]) -> set[str]:
        """Stop our actors of instances we are about to take again under a fresh epoch (a takeover that
        could not ask every worker is retaken while its actor drives the instance), before the takeover:
        what such an actor queued for a worker, or is about to send, then never leaves (``Dispatcher._live``).
        Left running, it would send an attempt the takeover finds on no worker, marks NEED_FAULT_TOLERANCE
        and runs again, under the epoch it replaced; a worker that never heard of the new one (it
        restarted since) takes it: two attempts of one task at once (invariant 3), a task group over its
        size. The actors stop together. Returns the live workers read again after the stops: a send
        already on its way goes to a worker registered by then, which the takeover must ask (its host
        update arrives before that send, which it then refuses, or after, and names the attempt: adopted)."""
        stops: list[asyncio.Future[None]] = []
        for instance_id in instance_ids:
            actor = self.actors[instance_id]
            log.info("stopping our actor of an instance taken again", workflow_instance_id=instance_id,
                     epoch=actor.info.epoch)  # fmt: skip
            stopping = asyncio.ensure_future(actor.stop())  # its first step ends its sends (Dispatcher._live)
            self._stopping.add(stopping)
            stopping.add_done_callback(self._stopping.discard)
            stops.append(stopping)
        _, pending = await asyncio.wait(stops, timeout=ACTOR_STOP_TIMEOUT)
        if pending:  # a call ignoring its cancellation: it sends nothing more, and the takeover fences its writes
            log.error("replaced workflow actors did not stop in time", count=len(pending))
        node = self.registry()
        if node is None:
            return workers
        return (await self._live_nodes(node))[1]

    async def _drive_many(
        self, taken: list[tuple[asyncpg.Record, list[asyncpg.Record], set[int]]], workers: set[str]
    ) -> int:
        """Mark what was lost with the old owner and start the taken-over instances' actors; an instance
        that cannot be driven (its definition is gone, its row unreadable) ends with the reason instead.
        Returns how many instances were taken (ended ones included)."""
        ready: list[tuple[InstanceInfo, asyncpg.Record, WorkflowSpec, list[Attempt], set[int]]] = []
        count = 0
        for n, (row, attempt_rows, group_waiting) in enumerate(taken):
            if n and not n % ACTOR_START_CHUNK:
                await asyncio.sleep(0)  # thousands of rows: the loop serves others between slices
            try:
                info = InstanceInfo.from_row(row)
                attempts = [Attempt.from_row(r) for r in attempt_rows]
            except (ValueError, TypeError, KeyError) as exc:
                count += await self._end_undrivable(int(row["id"]), int(row["epoch"]), f"unreadable instance: {exc!r}")
                continue
            try:
                version = int(row["workflow_definition_version"])
                spec = await self.cache.spec(int(row["workflow_definition_code"]), version)
            except DefinitionError as exc:
                count += await self._end_undrivable(info.id, info.epoch, str(exc))
                continue
            unknown = sorted({a.code for a in attempts if a.code not in spec.tasks})
            if unknown:
                reason = f"its attempts name tasks its definition does not have: {unknown[:5]}"
                count += await self._end_undrivable(info.id, info.epoch, reason)
                continue
            ready.append((info, row, spec, attempts, group_waiting))
        # logic tasks (sub-workflows, dependents ...) ran on the dead master: the new actor takes them up
        # attempts waiting in their task group's queue were never dispatched: they stay queued, in place
        asked = [
            (info, [a for a in attempts if spec.tasks[a.code].task_type not in LOGIC_TYPES and a.id not in waiting])
            for info, _, spec, attempts, waiting in ready
        ]
        verdicts = await self._adopt_many(asked, workers)
        lost_by = {info.id: lost for info, (lost, _) in zip((i for i, _ in asked), verdicts, strict=True) if lost}
        marked: set[int] = set()
        if lost_by:
            epochs = {info.id: info.epoch for info, *_ in ready if info.id in lost_by}
            ids = [a.id for lost in lost_by.values() for a in lost]
            marked = set(await self.store.mark_lost(epochs, ids, f"lost with master {self.me}'s takeover"))
        starts: list[tuple[InstanceInfo, WorkflowSpec, WorkflowState, list[Attempt], frozenset[int]]] = []
        for (info, row, spec, attempts, waiting), (lost, unsure) in zip(ready, verdicts, strict=True):
            if lost and not all(a.id in marked for a in lost):
                # fenced out meanwhile (or the attempts moved): the instance is someone else's now
                log.info("instance taken from us during its takeover", workflow_instance_id=info.id)
                continue
            for a in lost:
                a.state = TaskState.NEED_FAULT_TOLERANCE
            if unsure is None or unsure:  # ask again on the next sweep, under a fresh epoch
                self.retake(info.id, info.epoch, frozenset(unsure or ()))
            starts.append((info, spec, WorkflowState(row["state"]), attempts, frozenset(waiting)))
            log.info("instance taken over", workflow_instance_id=info.id, epoch=info.epoch, lost_attempts=len(lost))
        await self._start_actors(starts)
        return count + len(starts)

    async def _start_actors(
        self, starts: list[tuple[InstanceInfo, WorkflowSpec, WorkflowState, list[Attempt], frozenset[int]]]
    ) -> None:
        """Start the actors of a batch, yielding to the loop after every :data:`ACTOR_START_CHUNK`; the
        reports held for a chunk's instances (:class:`Arrivals`) go on once its actors exist. Their start-up
        reads queue on the pool, whose size bounds how many run at once."""
        for i in range(0, len(starts), ACTOR_START_CHUNK):
            if i:
                await asyncio.sleep(0)
            chunk = starts[i : i + ACTOR_START_CHUNK]
            for info, spec, state, attempts, waiting in chunk:
                self.start_actor(info, spec, state, attempts, group_waiting=waiting)
            self.arrivals.arrived(info.id for info, *_ in chunk)
            if self.gc is not None:
                self.gc.claimed(len(self.actors))

    async def _end_undrivable(self, instance_id: int, epoch: int, reason: str) -> int:
        """The instance cannot be driven (its definition is gone, its row unreadable): it ends FAILURE with
        the reason in its state history, rather than staying owned by a live master that never drives it.
        Returns 1 when it ended, 0 when it was taken from us meanwhile."""
        log.error("taken-over instance cannot be driven; it ends FAILURE", workflow_instance_id=instance_id,
                  error=reason)  # fmt: skip
        now = dt.datetime.now(dt.UTC).isoformat()
        desc = f"cannot be driven after a failover: {reason}"
        batch = WriteBatch(
            workflow_state=int(WorkflowState.FAILURE),
            workflow_finished=True,
            workflow_history=[{"time": now, "state": WorkflowState.FAILURE.name, "desc": desc}],
        )
        try:
            await self.store.write(instance_id, epoch, batch)
        except FencedOut as exc:
            log.info("instance taken from us during its takeover", workflow_instance_id=instance_id, error=str(exc))
            return 0
        return 1

    async def _adopt(
        self, info: InstanceInfo, attempts: list[Attempt], workers: set[str]
    ) -> tuple[list[Attempt], set[str] | None]:
        """:meth:`_adopt_many` of one instance."""
        return (await self._adopt_many([(info, attempts)], workers))[0]

    async def _adopt_many(
        self, items: list[tuple[InstanceInfo, list[Attempt]]], workers: set[str]
    ) -> list[tuple[list[Attempt], set[str] | None]]:
        """Point the live workers that may run the instances' attempts at us (host updates with the new
        epochs: from then on they refuse the dead owner's late orders; one call per worker for all its
        instances) and ask which attempts they know. Per instance of ``items``: (lost, unsure): ``unsure``
        is empty when sure, the workers that did not answer when a running attempt is on one of them, None
        when a SUBMITTED attempt may be on one (settled only by asking again, whoever leaves).

        An attempt on a worker that answered without knowing it, or a SUBMITTED one (its dispatch may
        have reached a worker before the dead master recorded where) that no live worker knows, was
        lost with the dead master: returned, to run again; a SUBMITTED one a worker knows becomes DISPATCH
        to that worker (in memory: its row catches up with its next report), so that worker's loss or a stop
        reaches it. ``unsure`` when a worker that might hold one did not answer: those attempts are kept and
        the instance is asked about again."""
        plans = []
        ask_by: dict[str, list[InstanceInfo]] = collections.defaultdict(list)
        for info, attempts in items:
            running = [a for a in attempts if a.state in _RUNNING_SOMEWHERE and a.host]
            submitted = [a for a in attempts if a.state is TaskState.SUBMITTED_SUCCESS]
            ask = {a.host for a in running} | (workers if submitted else set())
            for w in ask:
                ask_by[w].append(info)
            plans.append((running, submitted, ask))
        #: (task instance id, attempt) -> a live worker that said it has it
        known: dict[tuple[int, int], str] = {}
        silent = set(ask_by) & self._silent  # silent once in this sweep: not waited for again

        async def update(worker: str, infos: list[InstanceInfo]) -> None:
            try:
                for i in range(0, len(infos), HOST_UPDATE_BATCH):
                    part = infos[i : i + HOST_UPDATE_BATCH]
                    reply = await self._host_updates(worker, part)
                    known.update(((int(k[0]), int(k[1])), worker) for k in reply)
            except RpcError as exc:
                log.warning("host update failed", worker=worker, instances=len(infos), error=str(exc))
                silent.add(worker)
                self._silent.add(worker)

        # all at once: a silent worker costs the takeover one timeout, not one per worker in turn
        await asyncio.gather(*(update(w, ask_by[w]) for w in sorted(ask_by) if w not in silent))
        verdicts: list[tuple[list[Attempt], set[str] | None]] = []
        for running, submitted, ask in plans:
            lost = [a for a in running if a.host not in silent and (a.id, a.attempt) not in known]
            unsure: set[str] | None = {a.host for a in running if a.host in silent}
            if submitted and ask & silent:
                unsure = None  # a SUBMITTED attempt is settled only by asking: whoever leaves
            else:
                lost += [a for a in submitted if (a.id, a.attempt) not in known]
            for a in submitted:
                if (a.id, a.attempt) in known:  # dispatched there before its DISPATCH and host were written:
                    # driven as dispatched to that worker (its loss, a kill reach it), as if they had been
                    a.state, a.host = TaskState.DISPATCH, known[(a.id, a.attempt)]
            verdicts.append((lost, unsure))
        return verdicts

    async def _host_updates(self, worker: str, infos: list[InstanceInfo]) -> list[list[int]]:
        """One host update call for ``infos`` on ``worker``: the attempts it knows of them. A worker of
        an earlier release (no ``task.host_updates``) is asked one instance at a time, together."""
        msg = HostUpdates(self.me, [[i.id, i.epoch] for i in infos])
        try:
            timeout = HOST_UPDATE_TIMEOUT + HOST_UPDATE_PER_INSTANCE * len(infos)
            return (await self.rpc.call(worker, msg, timeout=timeout)).known
        except BadRequest as exc:
            if exc.status != 404:
                raise
        replies = await asyncio.gather(*(self.rpc.call(worker, HostUpdate(i.id, self.me, i.epoch),
                                                       timeout=HOST_UPDATE_TIMEOUT) for i in infos))  # fmt: skip
        return [k for r in replies for k in r.known]
