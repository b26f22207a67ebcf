"""Commands -> workflow instances: the definition cache, the conversion rules, and the poller that
claims the commands of this master's slot.

The poller wakes on PostgreSQL NOTIFY (channel ``porpoise_command``) and polls every
``command_poll_interval`` as a fallback. A command announced with its row is claimed from it without a read
of the table when nothing else can be waiting (``engine/master/announced.py``). It claims nothing while the
registry session is not CONNECTED, while this master has no slot, or while the host is over its load / memory limits.
A command that cannot become an instance moves to ``error_command`` with the reason (invariant 1).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime as dt
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import asyncpg

from core import logs, marks
from core.aio import BackgroundService
from engine.concurrency.serial import Rule
from engine.master.announced import Announced
from engine.master.first_turn import FirstTurn, context_of, first_turn, for_the_claim
from engine.master.store import MasterStore
from engine.master.workflow_messages import Attempt
from engine.scheduling.backfill import position
from engine.states import CLAIMABLE, RESTART_FROM, CommandType, WorkflowState
from engine.storage.failures import DB_FAILURES
from engine.workflows.definitions import ONLINE, WorkflowSpec, load_spec
from engine.workflows.model import DefinitionError, instance_name
from engine.workflows.start_params import resolve_globals

log = logs.get(__name__)

#: a claimed command: the instance row, its definition, and the attempts it takes back (resume)
Claimed = tuple[asyncpg.Record, WorkflowSpec, list[Attempt], FirstTurn | None]

#: command types that act on an existing instance (workflow_instance_id set)
ON_INSTANCE = frozenset(RESTART_FROM) | {CommandType.RECOVER_SERIAL_WAIT}


class Starting:
    """Claims in flight: between the commit that makes an instance ours and the start of its actor, the
    instance is ours with no actor. The failover sweep takes back such instances when no start was under
    way while it read them, or when it saw them undriven already in its previous read and every start under
    way now began after that read (``generation`` moves at every start's begin and end)."""

    def __init__(self) -> None:
        self.generation = 0
        #: the generation each start under way began at -> how many
        self._open: collections.Counter[int] = collections.Counter()

    @contextlib.contextmanager
    def begin(self) -> Iterator[None]:
        self.generation += 1
        began = self.generation
        self._open[began] += 1
        try:
            yield
        finally:
            self._open[began] -= 1
            if not self._open[began]:
                del self._open[began]
            self.generation += 1

    def quiet_since(self, generation: int) -> bool:
        """No start under way now, and none began or ended since ``generation`` was read."""
        return not self._open and self.generation == generation

    def open_since(self, generation: int) -> bool:
        """Every start under way now began after ``generation`` was read."""
        return all(began > generation for began in self._open)


class DefinitionCache:
    """Immutable (code, version) specs, kept LRU; current-version heads expire after ``ttl`` seconds
    or on a cache-expire RPC from the API."""

    def __init__(self, pool: asyncpg.Pool, ttl: float = 60.0, size: int = 2000) -> None:
        self.pool = pool
        self.ttl = ttl
        self.size = size
        self.specs: collections.OrderedDict[tuple[int, int], WorkflowSpec] = collections.OrderedDict()
        self.heads: dict[int, tuple[float, tuple[int, int, str] | None]] = {}

    def expire(self, code: int) -> None:
        self.heads.pop(code, None)

    async def head(self, code: int) -> tuple[int, int, str] | None:
        """(current version, release state, name) or None if the definition does not exist."""
        cached = self.heads.get(code)
        if cached is not None and time.monotonic() - cached[0] < self.ttl:
            return cached[1]
        row = await self.pool.fetchrow(
            "SELECT version, release_state, name FROM workflow_definition WHERE code = $1", code
        )
        value = None if row is None else (int(row["version"]), int(row["release_state"]), row["name"])
        self.heads[code] = (time.monotonic(), value)
        return value

    async def spec(self, code: int, version: int) -> WorkflowSpec:
        key = (code, version)
        spec = self.specs.get(key)
        if spec is not None:
            self.specs.move_to_end(key)
            return spec
        async with self.pool.acquire() as conn:
            spec = await load_spec(conn, code, version)
        self.specs[key] = spec
        while len(self.specs) > self.size:
            self.specs.popitem(last=False)
        return spec


def instance_values(cmd: asyncpg.Record, spec: WorkflowSpec, now: dt.datetime) -> dict[str, Any]:
    """Columns of the workflow_instance a command becomes; ValueError explains a refusal."""
    params = dict(cmd["command_param"] or {})
    start_params = params.get("StartParams") or {}
    if not isinstance(start_params, dict):
        raise ValueError("command_param.StartParams must be an object of name -> value")
    when = cmd["schedule_time"] or now
    return {
        "name": instance_name(spec.name, spec.version, now),
        "workflow_definition_code": spec.code,
        "workflow_definition_version": spec.version,
        "project_code": spec.project_code,
        "state": int(WorkflowState.RUNNING_EXECUTION),
        "command_id": cmd["id"],
        "command_type": cmd["command_type"],
        "command_param": json.dumps(params),
        "history_cmd": CommandType(cmd["command_type"]).name,
        "is_sub_workflow": 1 if params.get("parentWorkflowInstanceId") else 0,
        "task_depend_type": cmd["task_depend_type"],
        "failure_strategy": cmd["failure_strategy"],
        "warning_type": cmd["warning_type"],
        "warning_group_id": cmd["warning_group_id"],
        "schedule_time": cmd["schedule_time"],
        "command_start_time": cmd["start_time"],
        # a parent's values may add globals its SUB_PROCESS child does not declare; a start may not
        "global_params": json.dumps(
            resolve_globals(
                spec.global_params, start_params, when, undeclared=bool(params.get("parentWorkflowInstanceId"))
            )
        ),
        "executor_id": cmd["executor_id"],
        "workflow_instance_priority": cmd["workflow_instance_priority"],
        "worker_group": cmd["worker_group"],
        "environment_code": cmd["environment_code"],
        "timeout": spec.timeout,
        "tenant_code": spec.tenant,
        "dry_run": cmd["dry_run"],
        "start_time": now,
        "run_times": 1,
    }


class CommandPoller(BackgroundService):
    task_name = "command-poller"

    def __init__(
        self,
        store: MasterStore,
        dsn: str,
        cache: DefinitionCache,
        slot: Callable[[], tuple[int, int]],
        may_claim: Callable[[], str],
        on_claimed: Callable[[list[Claimed]], None],
        page: int = 100,
        interval: float = 1.0,
        metrics: Any = None,
        on_preempt: Callable[[list[int]], None] | None = None,
        starting: Starting | None = None,
    ) -> None:
        self.store = store
        #: shared with the failover sweep: a claim's instances are ours before their actors start
        self.starting = starting or Starting()
        #: receives the active runs a SERIAL_PRIORITY run asked to stop (after the claim committed)
        self.on_preempt = on_preempt
        self.dsn = dsn
        self.cache = cache
        self.slot = slot
        self.may_claim = may_claim
        self.on_claimed = on_claimed
        self.page = page
        self.interval = interval
        self.metrics = metrics
        self.wake = asyncio.Event()
        #: commands announced with their rows since the slot was last read
        self.announced = Announced(max(10 * page, 1000), max_age=interval)
        self._listener: asyncpg.Connection | None = None
        self._refusing = ""
        #: run contexts being read for the runs of a claim (FirstTurn.context)
        self._reads: set[asyncio.Task[Any]] = set()

    async def close(self, timeout: float | None = None) -> None:
        await super().close(timeout)
        for read in list(self._reads):
            read.cancel()
        await self._close_listener()

    async def _close_listener(self) -> None:
        conn, self._listener = self._listener, None
        if conn is not None and not conn.is_closed():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.close(), 5)

    async def _listen(self) -> None:
        if self._listener is not None and not self._listener.is_closed():
            return
        try:
            conn = await asyncpg.connect(self.dsn, timeout=5)
            await conn.add_listener("porpoise_command", self._heard)
            self._listener = conn
            self.announced.forget()  # notifications may have come while no one listened
        except DB_FAILURES as exc:
            log.warning("cannot LISTEN for commands; polling only", error=str(exc))

    def _heard(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        try:
            self.announced.heard(payload)
        except Exception:  # never lose the wake-up: the next poll reads the table
            self.announced.forget()
            log.exception("a command notification could not be taken")
        finally:
            self.wake.set()

    async def _run(self) -> None:
        while True:
            await self._listen()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), self.interval)
            self.wake.clear()
            try:
                while await self.poll_once() >= self.page:
                    pass  # a full page: there may be more right away
            except DB_FAILURES as exc:
                self.announced.forget()
                log.warning("command poll failed", error=str(exc))
                await self._close_listener()
                await asyncio.sleep(min(self.interval, 1.0))

    async def poll_once(self) -> int:
        """Claim one page of this slot's commands; returns how many commands the page had."""
        reason = self.may_claim()
        if reason:
            if reason != self._refusing:
                log.warning("not claiming commands", reason=reason)
                if self.metrics is not None and reason.startswith("overloaded"):
                    self.metrics.inc("overload_events")
            self._refusing = reason
            self.announced.forget()  # what comes meanwhile waits in the table
            return 0
        self._refusing = ""
        index, count = self.slot()
        if count == 0:
            return 0
        polled = marks.now()
        rows: list[Any] | None = self.announced.take((index, count), self.page)
        read = rows is None
        if rows is None:
            self.announced.reading()
            rows = await self.store.fetch_commands(index, count, self.page)
        if not rows:
            if read:
                self.announced.read((index, count), complete=True)
            return 0
        marks.mark("master poll", polled)  # only a poll that found commands: the timer's empty ones are not steps
        marks.mark("master fetched")
        with self.starting.begin():
            try:
                created = await self.claim(rows)
            except BaseException:
                self.announced.forget()
                raise
            marks.mark("master claimed")
            if read:
                self.announced.read((index, count), complete=len(rows) < self.page)
            if created:
                self.on_claimed(created)
        return len(rows)

    async def claim(self, rows: list[Any]) -> list[Claimed]:
        """``rows``: the commands as read (asyncpg records) or announced (dicts of the same columns)."""
        errors: dict[int, str] = {}
        specs: dict[int, WorkflowSpec] = {}
        for cmd in rows:
            try:
                specs[cmd["id"]] = await self._spec_for(cmd)
            except (ValueError, DefinitionError) as exc:
                errors[cmd["id"]] = str(exc)
            except DB_FAILURES:
                raise  # the database, not the command: the page is tried again
            except Exception as exc:  # a malformed command: refused, never retried forever
                errors[cmd["id"]] = f"{type(exc).__name__}: {exc}"
        now = dt.datetime.now(dt.UTC)
        rules = {}
        for cmd_id, spec in specs.items():
            rule = Rule.of(spec.execution_type, spec.max_active_runs)
            if rule.limited:
                rules[cmd_id] = (rule, spec.name)
        turns = self._first_turns(rows, specs, rules, now.timestamp())
        reads = self._read_contexts(turns, specs)
        firsts = for_the_claim(turns)
        stops: list[int] = []
        try:
            created, failed = await self.store.claim(
                [c["id"] for c in rows], lambda cmd: instance_values(cmd, specs[cmd["id"]], now), errors, rules,
                stops, polled=rows, firsts=firsts,
            )  # fmt: skip
        except BaseException:
            for read in reads:
                read.cancel()
            raise
        if stops and self.on_preempt is not None:
            self.on_preempt(stops)
        if self.metrics is not None:
            self.metrics.inc("commands_claimed", len(created))
            self.metrics.inc("commands_failed", failed)
            for cmd, _ in created:
                if cmd.get("update_time") is not None:  # inserted (or last changed) then
                    self.metrics.observe("command_wait_seconds", (now - cmd["update_time"]).total_seconds())
        for cmd_id, reason in errors.items():
            log.warning("command refused", command_id=cmd_id, reason=reason)
        out: list[Claimed] = []
        for cmd, row in created:
            taken_back = []
            if cmd["command_type"] in ON_INSTANCE:
                taken_back = [Attempt.from_row(r) for r in await self.store.current_attempts(row["id"])]
            turn = turns.get(cmd["id"])
            if turn is not None and row["state"] != int(WorkflowState.RUNNING_EXECUTION):
                turn = None  # not a run that starts now: the actor starts it as it is
            if turn is not None and cmd["id"] in firsts and "first_task_ids" in row.keys():  # noqa: SIM118 (a Record's ``in`` looks at values)
                written = dict(zip(row["first_task_codes"], row["first_task_ids"], strict=True))  # with the instance
                turn.ids = [written[a.task_code] for a in turn.attempts]
            out.append((row, specs[cmd["id"]], taken_back, turn))
        return out

    def _read_contexts(self, turns: dict[int, FirstTurn], specs: dict[int, WorkflowSpec]) -> list[asyncio.Task[Any]]:
        """Each turn's run context, read while the page is claimed: one read per project and environments."""
        reads: dict[tuple[int, tuple[int, ...]], asyncio.Task[Any]] = {}
        begun = time.monotonic()
        for cmd_id, turn in turns.items():
            key = context_of(specs[cmd_id])
            if key not in reads:
                reads[key] = read = asyncio.ensure_future(self.store.run_context(*key))
                self._reads.add(read)
                read.add_done_callback(self._read_done)
            turn.context, turn.context_at = reads[key], begun
        return list(reads.values())

    def _read_done(self, read: asyncio.Task[Any]) -> None:
        self._reads.discard(read)
        if not read.cancelled():
            read.exception()  # its runs' actors meet it (or none is left to: a command another master took)

    @staticmethod
    def _first_turns(
        rows: list[Any], specs: dict[int, WorkflowSpec], rules: dict[int, Any], now: float
    ) -> dict[int, FirstTurn]:
        """The first turn of each plain start's run (engine.master.first_turn), by command id."""
        turns = {}
        for cmd in rows:
            cmd_id = cmd["id"]
            if cmd_id not in specs or cmd_id in rules:
                continue
            try:  # nothing about one command may fail the page's claim: the actor meets it again, as before
                if cmd["command_type"] in ON_INSTANCE or dict(cmd["command_param"] or {}).get(
                    "parentWorkflowInstanceId"  # read as instance_values reads it
                ):
                    continue
                turns[cmd_id] = first_turn(specs[cmd_id], cmd, now)
            except Exception as exc:
                log.warning("cannot take a new run's first turn before its claim", command_id=cmd_id,
                            error=f"{type(exc).__name__}: {exc}")  # fmt: skip
        return turns

    async def _spec_for(self, cmd: asyncpg.Record) -> WorkflowSpec:
        spec = await self._definition(cmd)
        params = dict(cmd["command_param"] or {})
        start = params.get("StartNodeList")
        if cmd["command_type"] == CommandType.START_CURRENT_TASK_PROCESS and not start:
            raise ValueError("START_CURRENT_TASK_PROCESS needs command_param.StartNodeList (task codes)")
        if start is not None:
            if not isinstance(start, list) or not all(isinstance(c, int) for c in start):
                raise ValueError("command_param.StartNodeList must be a list of task codes")
            unknown = [c for c in start if c not in spec.tasks]
            if unknown:
                raise ValueError(f"command_param.StartNodeList: no task {unknown[0]} in {spec.name} v{spec.version}")
        if cmd["command_type"] == CommandType.COMPLEMENT_DATA:
            position(params)  # where it stands in its backfill chain; the date it runs is its schedule time
            if cmd["schedule_time"] is None:
                raise ValueError("COMPLEMENT_DATA needs a schedule_time (the date it runs)")
        return spec

    async def _definition(self, cmd: asyncpg.Record) -> WorkflowSpec:
        ctype = cmd["command_type"]
        if ctype not in CLAIMABLE:
            raise ValueError(f"command type {ctype} is not supported by this master")
        ctype = CommandType(ctype)
        if (ctype in ON_INSTANCE) != bool(cmd["workflow_instance_id"]):
            need = "needs" if ctype in ON_INSTANCE else "must not name"
            raise ValueError(f"command type {ctype.name} {need} a workflow instance")
        code = cmd["workflow_definition_code"]
        if ctype in ON_INSTANCE:
            # the instance keeps the definition version it was created with
            return await self.cache.spec(code, cmd["workflow_definition_version"])
        head = await self.cache.head(code)
        if head is None:
            raise ValueError(f"workflow definition {code} does not exist")
        version, release, name = head
        if release != ONLINE:
            self.cache.expire(code)
            head = await self.cache.head(code)
            if head is None or head[1] != ONLINE:
                raise ValueError(f"workflow definition {name!r} ({code}) is offline")
            version = head[0]
        return await self.cache.spec(code, cmd["workflow_definition_version"] or version)
