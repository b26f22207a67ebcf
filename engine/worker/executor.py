"""Runs dispatched task attempts in a bounded set of exec slots.

Each attempt runs in its own subprocess and process group (started from a thread, or forked by the fork
server for a Spark Connect task: engine/worker/forkclient.py; never blocking the loop), in its own working
directory, with stdout and stderr streamed into its log file as they are produced. The executor owns the
process: timeout, kill (the whole group, then any descendant that escaped it), and the RUNNING / RESULT
reports handed to the Reporter.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import datetime as dt
import os
import pwd
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from core import logs, marks
from core.aio import ThreadTrips, acquire_in_thread
from engine.alerts.senders import SECRET_KEYS
from engine.clocks import now_ms
from engine.params import (
    Property,
    builtins,
    out_params,
    parse_set_values,
    parse_time,
    properties,
    resolve,
    trusted_names,
)
from engine.secretbox import DATASOURCE_SECRETS, PROJECT_PARAM_SECRETS, Keyring, SecretError, open_params
from engine.tasks import registry
from engine.tasks.base import Launch, TaskContext
from engine.time_placeholders import PlaceholderError, render
from engine.worker.execdirs import ExecDirs
from engine.worker.forkclient import ForkedTask, ForkServer, TenantSpawners
from engine.worker.logfiles import CappedLog, log_path
from engine.worker.reaper import Reaper
from engine.worker.rendered import code_fields, datasource_secrets, rendered_block
from engine.worker.reporter import Reporter
from engine.worker.resources import ResourceCache, ResourceFailure
from engine.worker.spawn import TaskProcess, adopt, discard, spawn, start
from engine.worker.taskenv import TaskPolicy, Users, resolve_tenant, task_environment
from registry.heartbeat import Overload
from rpc.messages import (
    LOG_TAIL_BYTES,
    LOG_TAIL_LINES,
    DispatchReply,
    KillReply,
    TaskDispatch,
    TaskResult,
    TaskRunning,
)

log = logs.get(__name__)

#: seconds to finish reading a task's output after its process group is gone
DRAIN_TIMEOUT = 10.0
#: attempts that ended here remembered (oldest forgotten first), so a dispatch sent again — its first
#: reply was lost — is answered "already finished" instead of running the attempt a second time
ENDED_KEPT = 20_000
#: why a worker takes no new attempts (Executor.draining)
DRAIN_REQUESTED = "drained by request"
SHUTTING_DOWN = "shutting down"
#: a task output line ``[porpoise] application <id> [<ui link>]`` names the external application it started
#: (the SPARK plugin's bootstrap prints one as soon as the SparkContext exists): it goes to the master in a
#: RUNNING report sent again, and with the result, into the task instance's app_id / app_link
APP_MARKER = b"[porpoise] application "
#: a secret project parameter shorter than this is not masked in the log (it would hide common text)
MIN_MASKED = 4
#: bytes of output without a newline written to the log at once when values are masked
MASK_LINE_MAX = 65536


@dataclass
class TaskRun:
    dispatch: TaskDispatch
    log_path: Path
    exec_dir: Path
    proc: TaskProcess | None = None
    start_ms: int = 0
    killed: bool = False
    #: killed because this worker lost its registry lease: the master runs the attempt again elsewhere
    lost: bool = False
    #: why it was lost, for the report (default: the lease)
    lost_why: str = ""
    #: when the task reaper killed its process group (epoch seconds; None: it did not)
    reaped_at: float | None = None
    timed_out: bool = False
    #: the names of the files the plugin wrote into the exec dir
    files: frozenset[str] = frozenset()
    done: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    #: the attempt's work is over (its result is being spooled and handed over): a kill cancels nothing
    ended: bool = False
    #: counted in Executor._handing_over (its slot is free while its result is on its way to the master)
    handing_over: bool = False
    #: when this worker admitted it (epoch ms): its queue time here ends when its process starts
    admitted_ms: int = field(default_factory=now_ms)
    #: the external application the task announced (APP_MARKER line: a Spark application) and its UI link
    app_id: str = ""
    app_link: str = ""
    #: the last lines of its log once it ended (TaskResult.log_tail)
    log_tail: str = ""
    #: values the log shows as ``***`` (the secret project parameters it was given)
    masked: tuple[bytes, ...] = ()
    #: every secret project parameter's value, however short (the rendered script never shows one)
    secret_values: frozenset[str] = frozenset()
    #: its exec dir was handed back (with the log's close, in one trip to a thread)
    released: bool = False

    @property
    def key(self) -> tuple[int, int]:
        return self.dispatch.task_instance_id, self.dispatch.attempt


class Executor:
    def __init__(
        self,
        *,
        slots: int,
        log_dir: Path,
        exec_dir: Path,
        address: str,
        reporter: Reporter,
        overloaded: Callable[[], Overload | None] = lambda: None,
        kill_grace: float = 3.0,
        reaper: Reaper | None = None,
        may_start: Callable[[], str] = lambda: "",
        on_ended: Callable[[TaskRun, TaskResult], None] = lambda _run, _result: None,
        policy: TaskPolicy | None = None,
        plugin_options: dict[str, str] | None = None,
        max_log_bytes: int = 0,
        disk_full: Callable[[], str] = lambda: "",
        keyring: Keyring | None = None,
        forkserver: ForkServer | None = None,
        resources: ResourceCache | None = None,
        spawners: TenantSpawners | None = None,
    ) -> None:
        #: start the tasks that run as a tenant from a process of that tenant (engine/worker/spawnserver.py)
        self.spawners = spawners
        #: fetches and caches the resource-center files tasks use (engine/worker/resources.py)
        self.resources = resources
        #: forks the tasks whose launch allows it (Spark Connect's runner) from pre-imported state
        self.forkserver = forkserver
        #: told of every attempt's end here (metrics)
        self.on_ended = on_ended
        #: who tasks may run as and what they get (engine/worker/taskenv.py)
        self.policy = policy or TaskPolicy()
        #: the OS users tasks run as, looked up once and again when the user database changes
        self.users = Users()
        #: settings from the worker's configuration its task plugins read (TaskContext.options)
        self.plugin_options = dict(plugin_options or {})
        #: a task's log keeps at most this many bytes, its newest (0: no limit)
        self.max_log_bytes = max_log_bytes
        #: why the log disk cannot take new tasks, or "" (checked at admission)
        self.disk_full = disk_full
        #: opens the sealed secrets of a task's data sources right before it starts (engine/secretbox.py)
        self.keyring = keyring or Keyring([])
        #: checked right before and right after a task process starts: a worker paused between admitting
        #: an attempt and starting it must not start it once its lease may be gone (invariant 3)
        self.may_start = may_start
        self.slots = slots
        self.reaper = reaper
        self.log_dir = log_dir
        self.exec_root = exec_dir
        #: fresh exec dirs for attempts, recycled (at most one spare per slot)
        self.dirs = ExecDirs(exec_dir, spares=slots)
        #: the file system work before and after a task, with that of the tasks starting or ending beside it
        self._trips = ThreadTrips()
        self.address = address
        self.reporter = reporter
        self.overloaded = overloaded
        self.kill_grace = kill_grace
        #: task instance id -> the attempt running here
        self.runs: dict[int, TaskRun] = {}
        #: attempts over whose results are on their way to the master (in ``runs`` until the reporter has them
        #: on disk; their slots are free already: the master hears of the result, and may send the next)
        self._handing_over = 0
        #: workflow instance id -> how many of ``runs`` are its (kept with ``runs``: busy_with per result)
        self._per_instance: collections.Counter[int] = collections.Counter()
        #: (task instance id, attempt) -> the state it ended in here (bounded: ENDED_KEPT)
        self.ended: collections.OrderedDict[tuple[int, int], str] = collections.OrderedDict()
        #: while the cpus are saturated: the concurrency held (the number running when it began)
        self._held: int | None = None
        self.accepting = True
        #: why this worker takes no new attempts although it runs (a drain, a shutdown), or ""
        self.draining = ""

    # -- admission --------------------------------------------------------------------------------

    def holding(self) -> int:
        """Attempts holding an exec slot here: started, or admitted and still being set up."""
        return len(self.runs) - self._handing_over

    def waiting(self) -> int:
        """Attempts admitted whose process has not started yet (log and exec dir, tenant, secrets, spawn)."""
        return sum(1 for r in self.runs.values() if r.proc is None and not r.ended)

    def busy_with(self, workflow_instance_id: int) -> bool:
        return self._per_instance[workflow_instance_id] > 0

    def _handing(self, run: TaskRun) -> None:
        """``run``'s result is on its way to the master, which frees the slot on it and may send the next attempt
        at once: the slot is free here from now on, not before (a reply meanwhile would offer it twice), and
        only while ``run`` holds one (one replaced by a later attempt of its task holds none already)."""
        if self.runs.get(run.dispatch.task_instance_id) is run:
            run.handing_over = True
            self._handing_over += 1

    def _handed_over(self, run: TaskRun) -> None:
        """``run`` no longer counts among those handing their results over (it left ``runs``)."""
        if run.handing_over:
            run.handing_over = False
            self._handing_over -= 1

    def _forget(self, workflow_instance_id: int) -> None:
        """One attempt of the instance left ``runs``."""
        left = self._per_instance[workflow_instance_id] - 1
        if left > 0:
            self._per_instance[workflow_instance_id] = left
        else:
            del self._per_instance[workflow_instance_id]

    def holds(self, d: TaskDispatch) -> str:
        """Whether this attempt is already ours: "already running", "already finished (STATE)", or "".
        A dispatch sent again (its reply was lost) is answered with this before any other check, so
        the master learns the attempt is here, and it never runs twice."""
        existing = self.runs.get(d.task_instance_id)
        if existing is not None and existing.dispatch.attempt == d.attempt:
            return "already running"
        ended = self.ended.get((d.task_instance_id, d.attempt))
        return f"already finished ({ended})" if ended is not None else ""

    def dispatch(self, d: TaskDispatch, valid_until_ms: int = 0) -> DispatchReply:
        """Admit or refuse an attempt; ``valid_until_ms``: the sender's lease validity (the dispatch's own
        when 0). Idempotent per attempt: one already running or finished here is accepted, not run."""
        held = self.holds(d)
        if held:
            return DispatchReply(True, held)
        free, why = self._room()
        if free <= 0:
            return DispatchReply(False, why)
        stale = self.reporter.stale(d.workflow_instance_id, d.epoch, valid_until_ms or d.valid_until_ms)
        if stale:
            return DispatchReply(False, stale)
        self.reporter.note_owner(d.workflow_instance_id, d.master, d.epoch)
        run = TaskRun(
            dispatch=d,
            log_path=log_path(
                self.log_dir,
                d.workflow_definition_code,
                d.workflow_instance_id,
                d.task_instance_id,
                d.attempt,
            ),
            exec_dir=self.exec_root / f"{d.workflow_instance_id}-{d.task_instance_id}-{d.attempt}",
        )
        replaced = self.runs.get(d.task_instance_id)  # another attempt of it (its owner moved on): no longer counted
        if replaced is not None:
            self._forget(replaced.dispatch.workflow_instance_id)
            self._handed_over(replaced)
        self.runs[d.task_instance_id] = run
        self._per_instance[d.workflow_instance_id] += 1
        run.task = asyncio.create_task(self._execute(run), name=f"task-{d.task_instance_id}-{d.attempt}")
        return DispatchReply(True)

    def free_slots(self) -> int:
        """How many more attempts this worker would admit now."""
        return self._room()[0]

    def _room(self) -> tuple[int, str]:
        """How many more attempts this worker admits now, and why none when it is 0."""
        busy = self.holding()
        if self.draining:
            return 0, f"worker is draining ({self.draining}): it takes no new tasks"
        if not self.accepting:
            return 0, "worker is shutting down"
        if busy >= self.slots:
            return 0, f"all {self.slots} exec slots are busy"
        disk = self.disk_full()
        if disk:
            return 0, disk
        over = self.overloaded()
        if over is None:
            self._held = None
            return self.slots - busy, ""
        if not over.hold:
            return 0, over.reason
        # saturated: keep the concurrency where it was when saturation began — a slot freed by a
        # finishing task is refilled (refusing it would idle the cpus it frees), none is added
        if self._held is None:
            self._held = busy
        if busy >= self._held:
            return 0, f"{over.reason}; holding at {self._held} running tasks"
        return self._held - busy, ""

    # -- execution --------------------------------------------------------------------------------

    async def _execute(self, run: TaskRun) -> None:
        d = run.dispatch
        with logs.bound(
            workflow_instance_id=d.workflow_instance_id,
            task_instance_id=d.task_instance_id,
            attempt=d.attempt,
        ):
            marks.mark("worker run")
            try:
                result = await self._run(run)
            except asyncio.CancelledError:
                if run.lost:  # the lease is gone: to be run again elsewhere, not a user's kill
                    why = run.lost_why or "the worker lost its registry lease"
                    result = self._result(run, "LOST", -1, f"not started: {why}")
                else:
                    result = self._result(run, "KILL", -1, "cancelled before it started")
            except Exception as exc:
                log.exception("task failed on the worker")
                result = self._result(run, "FAILURE", -1, f"worker error: {type(exc).__name__}: {exc}")
            if run.log_tail:  # the log's last lines travel with the result (task alerts quote them)
                result = dataclasses.replace(result, log_tail=run.log_tail)
            run.ended = True  # no await since _run: a kill from now on waits for the hand-over below
            try:
                # on disk before the attempt counts as over here: a crash from now on loses no result
                await self.reporter.result(result, d.master, on_sent=lambda: self._handing(run))
            finally:
                self._handed_over(run)
                if self.runs.get(d.task_instance_id) is run:
                    del self.runs[d.task_instance_id]
                    self._forget(d.workflow_instance_id)
                    # its result may have been acknowledged while it went to the disk (the instance was busy
                    # then): the instance's owner entry goes now if nothing of it is left here
                    self.reporter.forget_instance(d.workflow_instance_id)
                self._ended(run, result.state)  # a dispatch sent again is answered, not run again
                self.on_ended(run, result)
                run.done.set()
            if run.reaped_at is None:
                log.info("task finished", state=result.state, exit_code=result.exit_code)
            else:  # the loop may see the exit long after the kill: say when the reaper killed it
                log.info("task finished", state=result.state, exit_code=result.exit_code, reaped_at=run.reaped_at)
            if not run.released:  # it ended before its log was set up
                await asyncio.to_thread(self.dirs.release, run.exec_dir, run.files)

    def _ended(self, run: TaskRun, state: str) -> None:
        self.ended[run.key] = state
        self.ended.move_to_end(run.key)
        while len(self.ended) > ENDED_KEPT:
            self.ended.popitem(last=False)

    def _result(
        self, run: TaskRun, state: str, code: int, message: str = "", var_pool: list | None = None
    ) -> TaskResult:
        d = run.dispatch
        return TaskResult(
            task_instance_id=d.task_instance_id,
            attempt=d.attempt,
            workflow_instance_id=d.workflow_instance_id,
            host=self.address,
            state=state,
            exit_code=code,
            start_time=run.start_ms or now_ms(),
            end_time=now_ms(),
            log_path=str(run.log_path),
            var_pool=var_pool or [],
            message=message,
            pid=run.proc.pid if run.proc is not None else 0,
            execute_path=str(run.exec_dir) if run.proc is not None else "",
            app_id=run.app_id,
            app_link=run.app_link,
        )

    def _open_sources(self, sources: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
        try:
            return {
                name: open_params(self.keyring, params, DATASOURCE_SECRETS, "datasource")
                for name, params in sources.items()
            }
        except SecretError as exc:
            raise ValueError(f"data source secrets: {exc}") from None

    def _project_params(self, run: TaskRun) -> list[Property]:
        """The project's parameters, secret ones opened (engine/api/project_params.py seals them); the
        secret values (of MIN_MASKED bytes or more) become the run's masked values."""
        try:
            opened = [
                open_params(self.keyring, p, PROJECT_PARAM_SECRETS, "project_parameter") if p.get("secret") else p
                for p in run.dispatch.project_params
            ]
        except SecretError as exc:
            raise ValueError(f"project parameter secrets: {exc}") from None
        self._mask(run, frozenset(str(p["value"]) for p in opened if p.get("secret") and p.get("value")))
        return [Property.from_dict(p) for p in opened]

    @staticmethod
    def _mask(run: TaskRun, values: frozenset[str]) -> None:
        """``values`` are secret: the rendered script never shows one, the log none of MIN_MASKED bytes or more."""
        run.secret_values = values
        secret = {v.encode() for v in values}
        run.masked = tuple(sorted((v for v in secret if len(v) >= MIN_MASKED), key=len, reverse=True))

    def _open_senders(self, senders: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], ...]:
        try:
            return tuple(
                {"name": s["name"], "params": open_params(self.keyring, s["params"], SECRET_KEYS, "alert_sender")}
                for s in senders
            )
        except SecretError as exc:
            raise ValueError(f"alert sender secrets: {exc}") from None

    def _prepare(self, run: TaskRun) -> tuple[Launch, list, str]:
        """The launch, the local params and the rendered-script block of the log's head
        (engine/worker/rendered.py)."""
        d = run.dispatch
        plugin_cls = registry.plugin(d.task_type)
        plugin_cls.validate(d.task_params)
        when = parse_time(d.schedule_time) or dt.datetime.now()
        system = builtins(
            when,
            task_instance_id=d.task_instance_id,
            workflow_instance_id=d.workflow_instance_id,
            task_definition_name=d.task_name,
            task_definition_code=d.task_code,
            workflow_definition_code=d.workflow_definition_code,
            task_execute_path=str(run.exec_dir),
        )
        local = plugin_cls.local_params(d.task_params)
        var_pool = properties(d.var_pool)
        project = self._project_params(run)
        secret = {p.prop for p, raw in zip(project, d.project_params, strict=True) if raw.get("secret")}
        try:
            values = resolve(properties(d.global_params), var_pool, local, when, system, project)
        except PlaceholderError:
            _name_bad_secret(project, secret, when)  # its error would quote a fragment of the secret
            raise
        # a secret's value as the task gets it: its own ${...} and $[...] rendered (hunter2$[yyyy] -> hunter22026)
        self._mask(run, run.secret_values | {values[n] for n in secret if values.get(n)})
        ctx = TaskContext(
            task_instance_id=d.task_instance_id,
            task_name=d.task_name,
            task_params=d.task_params,
            values=values,
            when=when,
            exec_dir=run.exec_dir,
            environment_config=d.environment_config,
            datasources=self._open_sources(d.datasources),
            email_senders=self._open_senders(d.email_senders),
            python_interpreter=self.policy.python_interpreter,
            load_dirs=self.policy.load_dirs,
            workflow_instance_id=d.workflow_instance_id,
            task_code=d.task_code,
            attempt=d.attempt,
            # the host other machines reach this worker at: a SPARK task's driver advertises it
            options={**self.plugin_options, "worker_host": self.address.rpartition(":")[0].strip("[]")},
            trusted=trusted_names(d.global_params, var_pool, local, system),
        )
        launch = plugin_cls().launch(ctx)
        secrets = [v.decode() for v in run.masked] + datasource_secrets(ctx.datasources, DATASOURCE_SECRETS)
        fields = code_fields(plugin_cls.params_schema)
        shown = rendered_block(d.task_params, fields, values, when, secrets, run.secret_values)
        return launch, local, shown

    async def _run(self, run: TaskRun) -> TaskResult:
        d = run.dispatch
        run.start_ms = now_ms()
        header = f"[porpoise] {_stamp()} {d.task_type} task {d.task_name!r} attempt {d.attempt} on {self.address}\n"
        try:
            launch, local, shown = self._prepare(run)
            user = resolve_tenant(d.tenant, self.policy.allow_root_tenant, self.policy.default_user, self.users)
        except ValueError as exc:  # ParamError, bad placeholder, unknown task type
            await asyncio.to_thread(_write_log, run.log_path, header + f"[porpoise] refused: {exc}\n")
            run.log_tail = f"[porpoise] refused: {exc}"[-LOG_TAIL_BYTES:]
            return self._result(run, "FAILURE", -1, str(exc))
        run.files = frozenset(launch.files)
        header += shown
        logfile, started = await self._set_up_run(run, launch, header, user)
        marks.mark("worker set up")
        trailer = ""  # the log's last line, written in the same trip to a thread as its close
        try:
            if d.dry_run:
                trailer = "[porpoise] dry run: not executed\n"
                return self._result(run, "SUCCESS", 0, "dry run")
            if d.resources:
                failed = await self._place_resources(run, logfile, user)
                if failed:
                    return self._result(run, "FAILURE", -1, failed)
            if started is None:
                refused = self.may_start()
                if refused:
                    await _write(logfile, f"[porpoise] not started: {refused}\n")
                    run.lost = True
                    return self._result(run, "LOST", -1, f"not started: {refused}")
                proc = await self._spawn(run, launch, user)
            elif isinstance(started, Exception):
                raise started  # as if the start had failed apart: the log and the exec dir are set up
            else:
                proc = self._started(run, launch, adopt(started))
            if isinstance(proc, ForkedTask) and proc.forked:
                await _write(logfile, f"[porpoise] forked by the worker's fork server: pid {proc.pid}\n")
            refused = self.may_start()
            if refused:  # paused while the process was being created: it must not run on
                await self._kill_group(proc.pid, signal.SIGKILL)
                run.lost = True
            emitted: dict[str, str] = {}
            await self._wait_and_drain(run, proc, logfile, emitted)
            marks.mark("worker exited")
            if proc.lost and not run.killed:  # its fork server died: how it ended is unknown
                run.lost, run.lost_why = True, proc.lost
            code = proc.returncode if proc.returncode is not None else -1
            if code == -signal.SIGKILL and self.reaper is not None:
                run.reaped_at = self.reaper.took(proc.pid)
            state, message = self._outcome(run, code)
            trailer = f"[porpoise] {_stamp()} finished: {state} (exit code {code})\n"
            var_pool = [p.to_dict() for p in out_params(local, emitted)]
            return self._result(run, state, code, message, var_pool)
        finally:
            # the process group is gone (or never started): the exec dir goes back in the same trip, waited for
            # even if this is cancelled meanwhile (so _execute's fallback never releases it a second time)
            run.log_tail = await self._trips.acquire(
                _keep, _close_with_tail, logfile, run.log_path, trailer, lambda: self._release_dir(run)
            )

    def _release_dir(self, run: TaskRun) -> None:
        """In a thread: the attempt's exec dir back to the spares (once: ``run.released``)."""
        try:
            self.dirs.release(run.exec_dir, run.files)
        finally:
            run.released = True

    async def _set_up_run(
        self, run: TaskRun, launch: Launch, header: str, user: pwd.struct_passwd | None
    ) -> tuple[CappedLog, subprocess.Popen[bytes] | Exception | None]:
        """One trip to a thread for the file system work before the start (log file, exec dir, files): shared
        with the tasks set up in the same turn of the loop (ThreadTrips), or, when the worker creates the
        process itself (no dry run, no resources, no fork server or tenant spawner, may start now), a trip of
        its own that creates it too (or says why it could not); None: it is to be started apart (``_spawn``)."""
        d = run.dispatch
        setup = (run.log_path, header, self.max_log_bytes, self.dirs, run.exec_dir, launch.files, user)
        if d.dry_run or d.resources or self._forkable(launch) or self._spawnable(launch, user) or self.may_start():
            return await self._trips.acquire(_close, _set_up, *setup), None
        env = self._environment(run, launch, user)
        return await acquire_in_thread(
            _close_started, _set_up_and_start, setup, _argv(launch, user), env, launch.stdin.encode()
        )

    @staticmethod
    def _outcome(run: TaskRun, code: int) -> tuple[str, str]:
        """The attempt's end state and message, from how its process ended."""
        if run.lost or (run.reaped_at is not None and not run.killed):
            return "LOST", f"killed: {run.lost_why or 'the worker lost (or nearly lost) its registry lease'}"
        if run.killed:
            return "KILL", "killed on request"
        if run.timed_out:
            return "FAILURE", f"timed out after {run.dispatch.timeout_seconds}s"
        return ("SUCCESS", "") if code == 0 else ("FAILURE", f"exit code {code}")

    async def _place_resources(self, run: TaskRun, logfile: CappedLog, user: pwd.struct_passwd | None) -> str:
        """The task's resource-center files into its directory (engine/worker/resources.py); why not, or ""."""
        if self.resources is None:
            why = "this worker has no resource cache configured"
        else:
            try:
                lines = await self.resources.place(run.dispatch.resources, run.dispatch.master, run.exec_dir,
                                                   run.files, user)  # fmt: skip
            except ResourceFailure as exc:
                why = str(exc)
            else:
                await _write(logfile, "".join(f"[porpoise] {line}\n" for line in lines))
                return ""
        await _write(logfile, f"[porpoise] not started: {why}\n")
        return why

    async def _spawn(self, run: TaskRun, launch: Launch, user: pwd.struct_passwd | None) -> TaskProcess:
        """Start the task in a new session (its own process group) and report RUNNING: forked by the fork
        server when its launch allows it and the server is available, else started as ``argv``."""
        env = self._environment(run, launch, user)
        proc: TaskProcess | None = None
        if self.forkserver is not None and self._forkable(launch):
            proc = await self.forkserver.spawn(launch.inprocess, launch.argv[3:], run.exec_dir, env, user)
        elif user is not None and self.spawners is not None and self._spawnable(launch, user):
            proc = await self.spawners.start(user, launch.argv, run.exec_dir, env)
        if proc is None:
            proc = await spawn(_argv(launch, user), run.exec_dir, env, launch.stdin.encode())
        return self._started(run, launch, proc)

    def _spawnable(self, launch: Launch, user: pwd.struct_passwd | None) -> bool:
        """Whether the tenant's spawner starts this launch (when it is available): one run as a tenant."""
        return self.spawners is not None and user is not None and not launch.stdin and not self._forkable(launch)

    def _forkable(self, launch: Launch) -> bool:
        """Whether the fork server starts this launch (when it is available)."""
        return (
            self.forkserver is not None
            and bool(launch.inprocess)
            and not launch.stdin
            and launch.argv[1:3] == ["-m", launch.inprocess]
        )

    def _environment(self, run: TaskRun, launch: Launch, user: pwd.struct_passwd | None) -> dict[str, str]:
        d = run.dispatch
        task_vars = {
            "PORPOISE_TASK_INSTANCE_ID": str(d.task_instance_id),
            "PORPOISE_WORKFLOW_INSTANCE_ID": str(d.workflow_instance_id),
            "PORPOISE_TASK_NAME": d.task_name,
            "PORPOISE_TASK_ATTEMPT": str(d.attempt),
            "PORPOISE_TASK_EXECUTE_PATH": str(run.exec_dir),
        }
        return task_environment(self.policy, {**launch.env, **launch.secret_env}, task_vars, user)

    def _started(self, run: TaskRun, launch: Launch, proc: TaskProcess) -> TaskProcess:
        """The task's process is running: reaped if it outlives the lease, RUNNING reported."""
        marks.mark("worker spawned")
        run.proc = proc
        if self.reaper is not None:
            self.reaper.add(proc.pid)
        self._report_running(run)
        forked = isinstance(proc, ForkedTask) and proc.forked
        log.info("task started", pid=proc.pid, argv0=launch.argv[0], forked=forked)
        return proc

    def _report_running(self, run: TaskRun) -> None:
        d = run.dispatch
        assert run.proc is not None
        self.reporter.report(
            TaskRunning(
                task_instance_id=d.task_instance_id,
                attempt=d.attempt,
                workflow_instance_id=d.workflow_instance_id,
                host=self.address,
                pid=run.proc.pid,
                log_path=str(run.log_path),
                execute_path=str(run.exec_dir),
                start_time=run.start_ms,
                app_id=run.app_id,
                app_link=run.app_link,
            ),
            d.master,
        )

    def _on_app(self, run: TaskRun, line: bytes) -> None:
        """The task announced its application: remember it and tell the master (RUNNING again)."""
        words = line[line.index(APP_MARKER) + len(APP_MARKER) :].decode(errors="replace").split()
        if not words or run.ended or run.proc is None:
            return
        run.app_id, run.app_link = words[0][:255], (words[1] if len(words) > 1 else "")[:2048]
        log.info("task application", app_id=run.app_id, app_link=run.app_link)
        self._report_running(run)

    async def _wait_and_drain(
        self, run: TaskRun, proc: TaskProcess, logfile: CappedLog, emitted: dict[str, str]
    ) -> None:
        """Wait for the task (enforcing its timeout) while its output streams into the log."""
        d = run.dispatch
        pump = asyncio.create_task(_pump(proc, logfile, emitted, lambda line: self._on_app(run, line), run.masked))
        try:
            if d.timeout_seconds > 0:
                await asyncio.wait_for(proc.wait(), d.timeout_seconds)
            else:
                await proc.wait()
        except TimeoutError:
            run.timed_out = True
            await _write(logfile, f"[porpoise] timed out after {d.timeout_seconds}s: killing the task\n")
            await self._kill_tree(run)
        # The main process is gone: end stragglers of its group (they would hold the pipe open),
        # then read the pipe to its end so no output is lost.
        await self._kill_group(proc.pid, signal.SIGKILL)
        if self.reaper is not None:
            self.reaper.remove(proc.pid)
        try:
            async with asyncio.timeout(DRAIN_TIMEOUT):  # lighter than wait_for, on every task's end
                await asyncio.shield(pump)
        except TimeoutError:  # a process that left the group still holds the pipe
            await _write(logfile, "[porpoise] output still open after the task ended; log cut here\n")
            pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pump
            proc.close_stdout()

    # -- kill -------------------------------------------------------------------------------------

    async def kill(self, task_instance_id: int, attempt: int) -> KillReply:
        run = self.runs.get(task_instance_id)
        if run is None or run.dispatch.attempt != attempt:
            return KillReply(False, "UNKNOWN")
        run.killed = True
        if run.ended:
            pass  # over already; its result is being handed to the reporter
        elif run.proc is None:
            if run.task is not None:
                run.task.cancel()
        else:
            await self._kill_tree(run)
        await run.done.wait()
        return KillReply(True, "KILL")

    async def _kill_tree(self, run: TaskRun) -> None:
        assert run.proc is not None
        pid = run.proc.pid
        descendants = await asyncio.to_thread(_descendants, pid)
        await self._kill_group(pid, signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(run.proc.wait(), self.kill_grace)
        await self._kill_group(pid, signal.SIGKILL)
        await asyncio.to_thread(_kill_all, descendants)

    async def _kill_group(self, pgid: int, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)

    # -- shutdown ---------------------------------------------------------------------------------

    async def shutdown(self, drain_timeout: float) -> None:
        """Take no new attempts, let the running ones finish for ``drain_timeout`` seconds, then kill the
        rest and report them LOST: the worker's stop is not the task's failure, the master runs them
        again elsewhere without consuming a retry."""
        self.draining = SHUTTING_DOWN
        self.accepting = False
        runs = list(self.runs.values())
        if runs:
            log.info("waiting for running tasks", count=len(runs), drain_timeout=drain_timeout)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*(r.done.wait() for r in runs)), drain_timeout)
        if self.runs:
            log.warning("killing the tasks still running; they run again elsewhere", count=len(self.runs))
        await self.kill_all(lost=True, why=f"the worker stopped (drain timeout {drain_timeout:g}s)")

    async def kill_all(self, lost: bool = False, why: str = "") -> None:
        """Stop accepting and kill every running attempt, all at once (each kill may wait its grace).
        ``lost``: not the task's fault (the lease is gone, ``why`` else); the attempts are reported LOST,
        to be run again elsewhere."""
        self.accepting = False
        runs = list(self.runs.values())
        for run in runs:
            run.lost, run.lost_why = lost, why
        await asyncio.gather(*(self.kill(*run.key) for run in runs))


def _keep(_tail: str) -> None:
    """Nothing to release: the close trip acquires nothing."""


async def _close(fh: CappedLog) -> None:
    await asyncio.to_thread(fh.close)


def _stamp() -> str:
    return dt.datetime.now().astimezone().isoformat(timespec="milliseconds")


def _close_with_tail(fh: CappedLog, path: Path, trailer: str = "", release: Callable[[], None] = lambda: None) -> str:
    """Write a finished attempt's last line, close its log, ``release`` its exec dir and give the log's last
    lines (one trip to a thread; a small log's from memory: CappedLog.tail)."""
    try:
        if trailer:
            fh.write(trailer.encode())
    finally:
        try:
            fh.close()
        finally:
            release()
    return fh.tail(LOG_TAIL_LINES, LOG_TAIL_BYTES)


def _write_log(path: Path, text: str) -> None:
    CappedLog(path, 0, text).close()


def _set_up(
    log: Path,
    header: str,
    cap: int,
    dirs: ExecDirs,
    exec_dir: Path,
    files: dict[str, str],
    user: pwd.struct_passwd | None,
) -> CappedLog:
    fh = CappedLog(log, cap, header)
    try:
        dirs.prepare(exec_dir, files, user)
    except BaseException:
        fh.close()
        raise
    return fh


def _set_up_and_start(
    setup: tuple[Path, str, int, ExecDirs, Path, dict[str, str], pwd.struct_passwd | None],
    argv: list[str],
    env: dict[str, str],
    stdin: bytes,
) -> tuple[CappedLog, subprocess.Popen[bytes] | Exception]:
    """``_set_up``, then the task's process created in its exec dir (spawn.start): the log and the process,
    or the log and why the process could not be created (raised by the caller once it owns the log)."""
    fh = _set_up(*setup)
    try:
        return fh, start(argv, setup[4], env, stdin)
    except Exception as exc:
        return fh, exc
    except BaseException:
        fh.close()
        raise


async def _close_started(got: tuple[CappedLog, subprocess.Popen[bytes] | Exception]) -> None:
    """What ``_set_up_and_start`` made after its caller was cancelled: the process ended, the log closed."""
    fh, started = got

    def release() -> None:
        try:
            if isinstance(started, subprocess.Popen):
                discard(started)
        finally:
            fh.close()

    await asyncio.to_thread(release)


def _argv(launch: Launch, user: pwd.struct_passwd | None) -> list[str]:
    if user is None:
        return launch.argv
    # setpriv execs in place (no extra parent), so the task stays the group leader we kill
    return ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", "--", *launch.argv]


async def _write(fh: CappedLog, text: str) -> None:
    await asyncio.to_thread(fh.write, text.encode())


def _name_bad_secret(project: Sequence[Property], secret: set[str], when: dt.datetime) -> None:
    """Raise a ValueError naming the secret project parameter whose ``$[...]`` cannot be rendered, if one
    cannot: without its value (a placeholder error quotes the expression, a fragment of the secret)."""
    for p in project:
        if p.prop in secret:
            try:
                render(p.value, when)
            except PlaceholderError:
                raise ValueError(
                    f"secret project parameter {p.prop!r} holds a $[...] placeholder that cannot be rendered"
                    " (its value is not shown)"
                ) from None


def _mask(data: bytes, masked: tuple[bytes, ...]) -> bytes:
    for value in masked:
        data = data.replace(value, b"***")
    return data


async def _pump(
    proc: TaskProcess,
    logfile: CappedLog,
    emitted: dict[str, str],
    on_app: Callable[[bytes], None] = lambda _: None,
    masked: tuple[bytes, ...] = (),
) -> None:
    """Copy the task's output into its log as it arrives; collect ${setValue(k=v)} lines; hand
    APP_MARKER lines to ``on_app``. With ``masked`` values, output goes to the log a whole line at a time
    (a line longer than MASK_LINE_MAX is cut there) with each of those values shown as ``***``."""
    assert proc.stdout is not None
    partial = b""
    unwritten = b""
    while True:
        chunk = await proc.stdout.read(65536)
        if not chunk:
            break
        if masked:
            unwritten += chunk
            cut = unwritten.rfind(b"\n") + 1 if len(unwritten) <= MASK_LINE_MAX else len(unwritten)
            if cut:
                await asyncio.to_thread(logfile.write, _mask(unwritten[:cut], masked))
                unwritten = unwritten[cut:]
        else:
            await asyncio.to_thread(logfile.write, chunk)
        lines = (partial + chunk).split(b"\n")
        partial = lines.pop()
        for line in lines:
            if b"setValue(" in line:
                emitted.update(parse_set_values(line.decode(errors="replace")))
            elif line.startswith(APP_MARKER):
                on_app(line)
    if partial and b"setValue(" in partial:
        emitted.update(parse_set_values(partial.decode(errors="replace")))
    if unwritten:
        await asyncio.to_thread(logfile.write, _mask(unwritten, masked))


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _kill_all(procs: list[psutil.Process]) -> None:
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            proc.kill()
