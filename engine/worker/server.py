"""The worker process: registry presence under its group, the RPC endpoints masters and the API call
(dispatch, kill, host update, logs, drain), the executor, the reporter and its spool.

Stopping (SIGTERM) is phased: take no new tasks (dispatches refused, the heartbeat says DRAINING so
masters send nothing), let the running ones finish for ``worker.drain_timeout``, kill what is left and
report it LOST (run again elsewhere, no retry consumed), wait up to ``worker.report_flush_timeout`` for
the masters to acknowledge the pending reports, then deregister. What is still unacknowledged stays in
the spool: the next start sends it before it registers (see ``on_started``)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from core import logs, marks
from core.errors import ConfigError
from engine.node import Node
from engine.secretbox import Keyring
from engine.tasks.spark import CONNECT_RUNNER
from engine.worker.executor import DRAIN_REQUESTED, SHUTTING_DOWN, Executor, TaskRun
from engine.worker.forkclient import ForkServer, TenantSpawners
from engine.worker.logdisk import LogJanitor, disk_short
from engine.worker.logfiles import LogFiles
from engine.worker.reaper import Reaper
from engine.worker.reporter import Reporter
from engine.worker.resources import ResourceCache
from engine.worker.spool import Spool
from engine.worker.taskenv import TaskPolicy, passed_through
from registry import WORKER, Heartbeat, HeartbeatSource, LoadLimits, NodeId, ServerStatus, TaskCounts
from registry.errors import RegistryUnavailable
from rpc.errors import BadRequest
from rpc.messages import (
    DispatchBatchReply,
    DispatchReply,
    HostUpdate,
    HostUpdateReply,
    HostUpdates,
    KillReply,
    LogContents,
    LogDownload,
    LogDownloads,
    LogHits,
    LogLines,
    LogRange,
    LogRemove,
    LogRemoved,
    LogSearch,
    LogView,
    TaskDispatch,
    TaskDispatchBatch,
    TaskKill,
    TaskResult,
    WorkerDrain,
    WorkerDrainReply,
)

log = logs.get(__name__)

#: seconds of our lease a task start must still have (a start this close to expiry is not made)
START_MARGIN = 0.5
#: a log at most this large is downloaded from memory, read in one trip to a thread (larger ones are streamed)
SMALL_LOG_BYTES = 256 * 1024


class WorkerHeartbeat(HeartbeatSource):
    """The host's heartbeat, with status DRAINING while the worker takes no new tasks, and ABNORMAL with
    the reason while its log disk is nearly full (checked with each heartbeat, in a thread)."""

    def __init__(
        self,
        *args: Any,
        draining: Callable[[], str] = lambda: "",
        log_disk: Callable[[], str] = lambda: "",
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.draining = draining
        self.log_disk = log_disk
        #: why the log disk takes no new task logs, or "" (as of the last heartbeat)
        self.disk_reason = ""

    async def __call__(self) -> Heartbeat:
        hb = await super().__call__()
        self.disk_reason = await asyncio.to_thread(self.log_disk)
        if self.draining():
            return dataclasses.replace(hb, status=int(ServerStatus.DRAINING), reason=self.draining())
        if self.disk_reason:
            return dataclasses.replace(hb, status=int(ServerStatus.ABNORMAL), reason=self.disk_reason)
        return hb


class Worker(Node):
    role = "worker"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        w = self.cfg.worker
        log_dir = Path(w.log_dir).resolve()
        self.limits = LoadLimits(w.max_cpu_load_avg, w.reserved_memory_gb)
        self.source = WorkerHeartbeat(
            self.limits,
            host_weight=w.host_weight,
            counts=self.counts,
            busy=lambda: self.cpu.busy,
            draining=lambda: self.executor.draining,
            log_disk=lambda: disk_short(log_dir, w.min_free_disk_bytes, w.min_free_disk_percent),
        )
        self.log_files = LogFiles(log_dir)
        self.janitor = LogJanitor(log_dir, w.log_keep_days, self._logs_written)
        self.spool = Spool(Path(w.spool_dir).resolve(), self.cfg.registry.root)
        self.reporter = Reporter(
            self.rpc,
            busy=self._busy_with,
            spool=self.spool,
            live_masters=self._live_masters,
            hold_results=w.test_hold_results,
            on_acked=lambda kind, seconds: self.metrics.observe("report_delay_seconds", seconds, kind=kind),
        )
        self.reaper = Reaper(self.cfg.registry.lease_ttl, children_of=os.getpid())
        policy = TaskPolicy.of(w)
        #: forks Spark Connect tasks from a pre-imported runner (its environment: passed-through variables)
        self.forkserver = (
            ForkServer([CONNECT_RUNNER], passed_through(os.environ, policy.passthrough))
            if w.spark_connect_prefork
            else None
        )
        #: start the tasks run as a tenant from a process of that tenant (engine/worker/spawnserver.py)
        self.spawners = TenantSpawners(passed_through(os.environ, policy.passthrough)) if w.tenant_spawner else None
        self.executor = Executor(
            slots=w.exec_slots,
            log_dir=log_dir,
            exec_dir=Path(w.exec_dir).resolve(),
            address="",  # known once the listener is bound
            reporter=self.reporter,
            overloaded=self.source.overload,
            reaper=self.reaper,
            may_start=self._may_start,
            on_ended=self._ended,
            policy=policy,
            plugin_options={"spark_connect_url": w.spark_connect_url},
            max_log_bytes=w.max_log_bytes,
            disk_full=lambda: self.source.disk_reason,
            keyring=Keyring.from_config(self.cfg.secrets),
            forkserver=self.forkserver,
            spawners=self.spawners,
            resources=ResourceCache(
                Path(self.cfg.storage.cache_dir).resolve(),
                self.cfg.storage.cache_max_bytes,
                self.rpc,
                idle_timeout=max(self.cfg.rpc.timeout, 60.0),
            ),
        )
        self.metrics.gauge("report_backlog", lambda: len(self.reporter.pending))
        self.metrics.gauge("tasks_running", lambda: len(self.executor.runs))
        self.metrics.gauge("slots_free", self.executor.free_slots)
        if w.allow_root_tenant:
            log.warning(
                "worker.allow_root_tenant is on: tasks may run as root or as this worker's own user "
                "(the default tenant), with access to its configuration and secrets"
            )
        for msg_cls, handler in (
            (TaskDispatch, self.on_dispatch),
            (TaskDispatchBatch, self.on_dispatch_batch),
            (TaskKill, self.on_kill),
            (HostUpdate, self.on_host_update),
            (HostUpdates, self.on_host_updates),
            (LogView, self.on_log_view),
            (LogRange, self.on_log_range),
            (LogDownload, self.on_log_download),
            (LogDownloads, self.on_log_downloads),
            (LogSearch, self.on_log_search),
            (LogRemove, self.on_log_remove),
            (WorkerDrain, self.on_drain),
        ):
            self.rpc_server.register(msg_cls, handler)

    def _busy_with(self, workflow_instance_id: int) -> bool:
        return self.executor.busy_with(workflow_instance_id)

    def _logs_written(self) -> set[Path]:
        return {run.log_path.resolve() for run in self.executor.runs.values()}

    def _live_masters(self) -> list[str]:
        return [m.address for m in self.registry.membership.masters()] if self.registry is not None else []

    # -- node hooks -------------------------------------------------------------------------------

    def listen(self) -> tuple[str, int, str]:
        w = self.cfg.worker
        return w.listen_host, w.listen_port, w.advertise_host

    def advertise_port(self) -> int:
        return self.cfg.worker.advertise_port

    def node_id(self) -> NodeId:
        return NodeId(WORKER, self.address, self.cfg.worker.group)

    def counts(self) -> TaskCounts:
        ex = self.executor
        return TaskCounts(running=ex.holding(), waiting=ex.waiting(), slots=self.cfg.worker.exec_slots)

    def heartbeat_source(self) -> HeartbeatSource:
        return self.source

    async def on_started(self) -> None:
        w = self.cfg.worker
        self.executor.address = self.address
        await asyncio.to_thread(self.executor.dirs.reset)
        try:
            left = await asyncio.to_thread(self.spool.open)
        except OSError as exc:
            raise ConfigError(f"worker.spool_dir: cannot keep results in {self.spool.dir}: {exc}") from exc
        await self.reaper.start()
        if self.forkserver is not None and w.spark_connect_url:
            self.forkserver.start_soon()  # ready for the first Connect task, started in the background
        self.reporter.restore(left)
        self.reporter.start()
        self.janitor.start()
        if left:
            # Send what an earlier run left before registering: our registration deletes a key an earlier
            # incarnation at this address left, and its REMOVED event makes the masters run that
            # incarnation's attempts again — those whose results we hold must be persisted first. Past
            # one lease TTL the earlier key has expired on its own: no reason to wait longer.
            ttl = self.cfg.registry.lease_ttl
            if not await self.reporter.flush(ttl):
                log.warning("spooled results not acknowledged yet; registering", pending=len(self.reporter.pending))

    async def on_fenced(self) -> None:
        # Our lease is gone: masters will fail our tasks over. Stop taking work and kill what runs,
        # so no attempt keeps running beside its replacement (invariant 3).
        await self.executor.kill_all(lost=True)

    async def on_registered(self) -> None:
        assert self.registry is not None
        # tasks die with the lease: the reaper kills them when renewals stop (paused or dead worker). Its
        # deadline is the last one it was told (from our start, or from a lease now lost): tell it this
        # lease's before taking work, not at the first renewal a keep-alive interval later
        session = self.registry.session
        self.reaper.renewed(session.remaining())
        session.renewed.append(self.reaper.renewed)
        self.executor.accepting = True

    async def on_shutdown(self) -> None:
        w = self.cfg.worker
        self.executor.draining = SHUTTING_DOWN
        await self._publish_heartbeat()  # masters stop sending now, not at the next heartbeat
        await self.executor.shutdown(w.drain_timeout)
        if not await self.reporter.flush(w.report_flush_timeout):
            log.warning(
                "stopping with unacknowledged reports; the spool keeps the results for the next start",
                pending=len(self.reporter.pending),
            )
            if self.registry is not None:
                # Leave our key to expire with the lease instead of deleting it: its removal makes the
                # masters run those attempts again, and a start within one TTL delivers their results first.
                await self.registry.close(revoke=False)
        await self.janitor.close()
        await self.reporter.close()
        if self.forkserver is not None:
            await self.forkserver.close()
        if self.spawners is not None:
            await self.spawners.close()
        await self.reaper.close()
        await asyncio.to_thread(self.spool.close)

    async def _publish_heartbeat(self) -> None:
        if self.registry is not None and self.registry.session.alive:
            try:
                await asyncio.wait_for(self.registry.registration.refresh_now(), self.cfg.registry.request_timeout)
            except (TimeoutError, RegistryUnavailable) as exc:
                log.warning("heartbeat not refreshed; masters see the drain at the next one", error=str(exc))

    def health(self) -> dict[str, Any]:
        return {
            "group": self.cfg.worker.group,
            "running": len(self.executor.runs),
            "slots": self.cfg.worker.exec_slots,
            "pending_reports": len(self.reporter.pending),
            "draining": self.executor.draining,
            "log_disk": self.source.disk_reason,
        }

    # -- RPC handlers -----------------------------------------------------------------------------

    async def on_dispatch(self, msg: TaskDispatch) -> DispatchReply:
        marks.mark("worker dispatch")
        reply = self._admit(msg)
        await asyncio.sleep(0)  # the attempt takes its first step (prepared, set up) before the reply is sent
        return reply

    def _admit(self, msg: TaskDispatch, valid_until_ms: int = 0) -> DispatchReply:
        # an attempt already here (a dispatch sent again) is acknowledged whatever our state: a refusal
        # would tell the master it is not here while it runs (or ran)
        # registered = our key exists, not merely our lease: while the key is being made (an earlier
        # incarnation's deleted first, or another holder waited out) masters see that earlier incarnation
        # here, and its REMOVED event would declare lost an attempt we took meanwhile, while it runs here
        registered = (
            self.registry is not None and self.registry.session.alive and self.registry.registration.revision > 0
        )
        if not registered and not self.executor.holds(msg):
            return DispatchReply(False, "worker is not registered")
        reply = self.executor.dispatch(msg, valid_until_ms or msg.valid_until_ms)
        incarnation = self.registry.registration.revision if self.registry is not None else 0
        reply = DispatchReply(reply.accepted, reply.reason, self.executor.free_slots(), incarnation)
        self.metrics.inc("dispatches_accepted" if reply.accepted else "dispatches_refused")
        log.info(
            "dispatch",
            task_instance_id=msg.task_instance_id,
            attempt=msg.attempt,
            accepted=reply.accepted,
            reason=reply.reason,
        )
        return reply

    def _ended(self, run: TaskRun, result: TaskResult) -> None:
        self.metrics.inc("tasks_finished", state=result.state)
        if run.start_ms:  # its process started
            self.metrics.observe("queue_time_seconds", (run.start_ms - run.admitted_ms) / 1000)
            seconds = (result.end_time - run.start_ms) / 1000
            self.metrics.observe("task_run_seconds", seconds, type=run.dispatch.task_type, state=result.state)

    def _may_start(self) -> str:
        """Why no task process may start now, or "": our lease may be gone (we were paused, etcd is far),
        so the master may already have given the attempt to another worker (invariant 3)."""
        session = self.registry.session if self.registry is not None else None
        if session is None or not session.alive or session.remaining() < START_MARGIN:
            return "the worker's registry lease may have expired"
        return ""

    async def on_dispatch_batch(self, msg: TaskDispatchBatch) -> DispatchBatchReply:
        """Each attempt is admitted (or refused) on its own, in order, as if sent one by one."""
        marks.mark("worker dispatch")
        replies = [self._admit(d, msg.valid_until_ms) for d in msg.tasks]
        await asyncio.sleep(0)  # the admitted attempts take their first step before the reply is sent
        return DispatchBatchReply(replies, self.executor.free_slots())

    async def on_drain(self, msg: WorkerDrain) -> WorkerDrainReply:
        """Take no new tasks (the running ones finish; the worker stays up), or take them again."""
        refused = ""
        if msg.drain and not self.executor.draining:
            self.executor.draining = DRAIN_REQUESTED
        elif not msg.drain and self.executor.draining == DRAIN_REQUESTED:
            self.executor.draining = ""
        elif not msg.drain and self.executor.draining:
            refused = f"the worker is {self.executor.draining}"
        log.info("drain", drain=msg.drain, draining=self.executor.draining, refused=refused)
        await self._publish_heartbeat()
        return WorkerDrainReply(
            draining=bool(self.executor.draining),
            running=len(self.executor.runs),
            pending_reports=len(self.reporter.pending),
            refused=refused,
        )

    async def on_kill(self, msg: TaskKill) -> KillReply:
        run = self.executor.runs.get(msg.task_instance_id)
        if run is not None:
            stale = self.reporter.stale(run.dispatch.workflow_instance_id, msg.epoch, msg.valid_until_ms)
            if stale:
                log.warning("kill refused", task_instance_id=msg.task_instance_id, epoch=msg.epoch, reason=stale)
                return KillReply(False, "STALE")
        return await self.executor.kill(msg.task_instance_id, msg.attempt)

    async def on_host_update(self, msg: HostUpdate) -> HostUpdateReply:
        known = self.reporter.host_update(msg.workflow_instance_id, msg.master, msg.epoch)
        running = [[r.dispatch.task_instance_id, r.dispatch.attempt] for r in self.executor.runs.values()
                   if r.dispatch.workflow_instance_id == msg.workflow_instance_id]  # fmt: skip
        return HostUpdateReply(known=[*running, *(k for k in known if k not in running)])

    async def on_host_updates(self, msg: HostUpdates) -> HostUpdateReply:
        pairs: list[tuple[int, int]] = []
        for entry in msg.instances:
            if len(entry) != 2:
                raise BadRequest(f"HostUpdates.instances: [workflow instance id, epoch] expected, got {entry!r}", 400)
            pairs.append((int(entry[0]), int(entry[1])))
        asked = {p[0] for p in pairs}
        running = [[r.dispatch.task_instance_id, r.dispatch.attempt] for r in self.executor.runs.values()
                   if r.dispatch.workflow_instance_id in asked]  # fmt: skip
        seen = {(k[0], k[1]) for k in running}
        pending = self.reporter.host_updates(msg.master, pairs)
        return HostUpdateReply(known=[*running, *(k for k in pending if (k[0], k[1]) not in seen)])

    def _writing(self, path: str) -> bool:
        target = self.log_files.checked(path)
        return any(run.log_path.resolve() == target for run in self.executor.runs.values())

    async def on_log_view(self, msg: LogView) -> LogLines:
        lines = await self.log_files.tail(msg.path, msg.lines)
        return LogLines(lines=lines, next=0, complete=not self._writing(msg.path))

    async def on_log_range(self, msg: LogRange) -> LogLines:
        complete = not self._writing(msg.path)  # read before the lines: no line can be missed
        lines, start, total = await self.log_files.range(msg.path, msg.skip, msg.limit, msg.from_end)
        return LogLines(lines=lines, next=start + len(lines), complete=complete, start=start, total=total)

    async def on_log_search(self, msg: LogSearch) -> LogHits:
        hits, after, done, total = await self.log_files.search(msg.path, msg.needle, msg.after, msg.limit)
        return LogHits(hits=hits, next=after, done=done, total=total)

    async def on_log_download(self, msg: LogDownload) -> web.StreamResponse:
        target = self.log_files.checked(msg.path)
        try:
            body = await self.log_files.small(target, SMALL_LOG_BYTES)
        except BadRequest as exc:
            return web.json_response({"error": f"log {msg.path} does not exist"}, status=exc.status)
        if body is not None:  # read in one trip: the log archiver asks for every ended attempt's log
            return web.Response(body=body, headers={"Content-Type": "text/plain; charset=utf-8"})
        return web.FileResponse(target, headers={"Content-Type": "text/plain; charset=utf-8"})

    async def on_log_downloads(self, msg: LogDownloads) -> LogContents:
        """Ended logs for the archiver, a page at a time: one call and one trip to a thread for them all."""
        return LogContents(await self.log_files.together(msg.paths, min(msg.cap, SMALL_LOG_BYTES)))

    async def on_log_remove(self, msg: LogRemove) -> LogRemoved:
        if self._writing(msg.path):
            return LogRemoved(False)
        return LogRemoved(await self.log_files.remove(msg.path))
