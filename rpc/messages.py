"""The messages nodes exchange. Each request type is a ``Request[ReplyType]``: it names its RPC method
(``METHOD``) and, by its type argument, the dataclass its handler answers with (``REPLY``): the server
refuses to send anything else (500), and ``RpcClient.call`` decodes the answer into it. A request answered
with raw bytes (a file) is a ``Request[Raw]``, read with ``RpcClient.fetch`` or ``stream``.

Master -> worker: task.dispatch, task.kill, task.host_update, task.host_updates, log.view, log.range,
log.download, log.downloads, log.remove.
API -> worker: worker.drain.
Worker -> master: task.running, task.result (the master's 200 reply {"ack": true} is the acknowledgement:
it is sent only after the report is persisted). Times are epoch milliseconds.

On the wire a request is its fields plus the version ``v``, a reply its fields, as JSON objects; a reply's
unknown fields are ignored and its missing ones take their defaults, so nodes of neighbouring releases
(a rolling upgrade) read each other's replies.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

R = TypeVar("R")


class Raw:
    """The "reply type" of a request answered with raw bytes (a file): its handler returns an aiohttp
    response, its caller reads the body with ``RpcClient.fetch`` or ``RpcClient.stream``."""


class Request(Generic[R]):
    """Base of every request message: ``class TaskKill(Request[KillReply])`` declares that a task.kill is
    answered with a ``KillReply``, kept in ``REPLY``."""

    #: the RPC method: the request is POSTed to /rpc/<METHOD>
    METHOD: ClassVar[str]
    #: the reply dataclass its handler returns (or ``Raw``), taken from the type argument
    REPLY: ClassVar[type[Any]]
    #: fields this message no longer has that an older release still sends: ignored when decoding, so
    #: old and new nodes talk during a rolling upgrade (any other unknown field is refused, 400)
    RETIRED: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in cls.__dict__.get("__orig_bases__", ()):
            if typing.get_origin(base) is Request:
                (cls.REPLY,) = typing.get_args(base)


@dataclass(frozen=True)
class DispatchReply:
    accepted: bool
    reason: str = ""
    #: how many more attempts the worker would take now (-1: not said); the master's credit with it
    free_slots: int = -1
    #: the worker's incarnation: the create revision of its registry key (0: not said). Its loss fails
    #: only what this incarnation took, not an attempt a later one at the same address runs
    incarnation: int = 0


@dataclass(frozen=True)
class TaskDispatch(Request[DispatchReply]):
    METHOD: ClassVar[str] = "task.dispatch"
    RETIRED: ClassVar[frozenset[str]] = frozenset({"first_submit_time"})
    task_instance_id: int
    attempt: int
    workflow_instance_id: int
    workflow_definition_code: int
    task_code: int
    task_name: str
    task_type: str
    task_params: dict[str, Any]
    #: host:port of the master that owns the workflow instance (reports go there)
    master: str
    global_params: list[dict[str, Any]] = field(default_factory=list)
    var_pool: list[dict[str, Any]] = field(default_factory=list)
    #: ISO 8601 schedule (business) time, or None for a manual run (time placeholders use now)
    schedule_time: str | None = None
    environment_config: str = ""
    tenant: str = ""
    #: the project's parameters (engine/api/project_params.py) as ``{"prop", "value", "secret"}``, secret values
    #: still sealed: the worker opens them; below the workflow's globals
    project_params: list[dict[str, Any]] = field(default_factory=list)
    #: kill the task after this many seconds (0 = no limit)
    timeout_seconds: int = 0
    dry_run: bool = False
    #: connection parameters of the data sources the task names (SQL), resolved by the master
    datasources: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: a SQL task with sendEmail: its alert group's EMAIL senders, ``{name, params}`` (secrets sealed)
    email_senders: list[dict[str, Any]] = field(default_factory=list)
    #: the resource-center files the task uses, resolved by the master to exact versions (engine/resources/):
    #: ``{name, version, size, sha256, blob_key}``, or ``{name, version, missing}`` saying why there is none
    resources: list[dict[str, Any]] = field(default_factory=list)
    #: the owner's fencing epoch: a worker refuses a dispatch older than an owner it already knows
    epoch: int = 0
    #: epoch ms until which the sending master's lease is certainly valid (0 = unchecked): a master that
    #: was paused between deciding and sending cannot start work after someone else took the instance
    valid_until_ms: int = 0


@dataclass(frozen=True)
class DispatchBatchReply:
    """One reply per attempt, in the order sent."""

    replies: list[DispatchReply] = field(default_factory=list)
    #: as DispatchReply.free_slots, after the whole batch
    free_slots: int = -1


@dataclass(frozen=True)
class TaskDispatchBatch(Request[DispatchBatchReply]):
    """Master -> worker: several attempts for one worker in one call (what was queued at once)."""

    METHOD: ClassVar[str] = "task.dispatch_batch"
    tasks: list[TaskDispatch] = field(default_factory=list)
    #: the sending master's lease validity (as TaskDispatch.valid_until_ms) for every task of the batch;
    #: when set, it replaces the tasks' own
    valid_until_ms: int = 0


@dataclass(frozen=True)
class KillReply:
    #: whether a live process of this attempt was found and killed
    killed: bool
    #: "KILL" when killed, else what the worker knows ("UNKNOWN" for an attempt it never saw)
    state: str


@dataclass(frozen=True)
class TaskKill(Request[KillReply]):
    METHOD: ClassVar[str] = "task.kill"
    task_instance_id: int
    attempt: int
    #: fenced like a dispatch: refused from an owner older than one the worker knows, or sent too late
    epoch: int = 0
    valid_until_ms: int = 0


@dataclass(frozen=True)
class HostUpdateReply:
    #: [task instance id, attempt] of the instance's attempts this worker runs or still has to report;
    #: required: a reply without it is unreadable (the worker counts as silent), never "knows none", which
    #: would have the failover run every attempt on that worker again
    known: list[list[int]]


@dataclass(frozen=True)
class HostUpdate(Request[HostUpdateReply]):
    """New owner -> worker after a failover: send this instance's reports to ``master`` from now on."""

    METHOD: ClassVar[str] = "task.host_update"
    workflow_instance_id: int
    master: str
    epoch: int = 0


@dataclass(frozen=True)
class HostUpdates(Request[HostUpdateReply]):
    """New owner -> worker after a failover of many instances: :class:`HostUpdate` of each of
    ``instances`` ([workflow instance id, epoch]) in one call; the reply's ``known`` covers them all."""

    METHOD: ClassVar[str] = "task.host_updates"
    master: str
    instances: list[list[int]]


@dataclass(frozen=True)
class WorkerDrainReply:
    draining: bool
    #: attempts still running here, and reports not yet acknowledged by a master
    running: int = 0
    pending_reports: int = 0
    #: why the request changed nothing ("" when it was applied)
    refused: str = ""


@dataclass(frozen=True)
class WorkerDrain(Request[WorkerDrainReply]):
    """API -> worker: take no new tasks (running ones finish; the heartbeat says DRAINING), or, with
    ``drain`` false, take tasks again."""

    METHOD: ClassVar[str] = "worker.drain"
    drain: bool = True


@dataclass(frozen=True)
class LogLines:
    lines: list[str]
    #: line number to ask for next (skip) when paging / tailing
    next: int = 0
    #: whether the task that writes the log has finished (no more lines will come)
    complete: bool = False
    #: line number of the first line returned (range answers)
    start: int = 0
    #: complete lines in the file when read (range answers; -1: not counted)
    total: int = -1


@dataclass(frozen=True)
class LogView(Request[LogLines]):
    METHOD: ClassVar[str] = "log.view"
    path: str
    lines: int = 100


@dataclass(frozen=True)
class LogRange(Request[LogLines]):
    METHOD: ClassVar[str] = "log.range"
    path: str
    skip: int = 0
    limit: int = 1000
    #: the last ``limit`` complete lines instead (skip ignored)
    from_end: bool = False


@dataclass(frozen=True)
class LogHits:
    #: [line number (from 0), the line] of each match, in order
    hits: list[list[Any]]
    #: line number to continue the search from
    next: int = 0
    #: the search reached the end of the complete lines
    done: bool = False
    #: complete lines in the file when read
    total: int = 0


@dataclass(frozen=True)
class LogSearch(Request[LogHits]):
    """Lines of a task log containing ``needle`` (case-insensitive), from line ``after`` on; the worker reads
    at most ``logfiles.MAX_SEARCH_BYTES`` per request, so a search of a huge log goes on with ``next``."""

    METHOD: ClassVar[str] = "log.search"
    path: str
    needle: str
    after: int = 0
    limit: int = 100


@dataclass(frozen=True)
class LogDownload(Request[Raw]):
    METHOD: ClassVar[str] = "log.download"
    path: str


#: states of a log in a log.downloads answer
LOG_OK, LOG_MISSING, LOG_APART = "ok", "missing", "apart"
#: the bytes of logs one log.downloads answer carries at most (base64: a third more; the answer stays one
#: modest frame on the call stream the nodes share), the rest read apart
LOGS_PER_CALL_BYTES = 192 * 1024


@dataclass(frozen=True)
class LogContents:
    #: per path asked, in order: [state, the log's bytes base64-encoded (state "ok") or ""]; "missing": no such
    #: log; "apart": to be read on its own with log.download (larger than ``cap``, past the answer's budget,
    #: or a path it refuses)
    logs: list[list[str]]


@dataclass(frozen=True)
class LogDownloads(Request[LogContents]):
    """Several ended task logs in one call, each whole (the log archiver asks for a page of them)."""

    METHOD: ClassVar[str] = "log.downloads"
    paths: list[str]
    #: the largest log answered here, in bytes
    cap: int = 256 * 1024


@dataclass(frozen=True)
class LogRemoved:
    #: whether the file was removed (not while its task still writes it)
    removed: bool


@dataclass(frozen=True)
class LogRemove(Request[LogRemoved]):
    METHOD: ClassVar[str] = "log.remove"
    path: str


@dataclass(frozen=True)
class ReportReply:
    """A master's answer to task.running / task.result: ``ack`` once persisted; otherwise ``owner``
    names the master that owns the instance now, when known (the worker re-targets its reports)."""

    ack: bool
    owner: str = ""
    #: the owner's fencing epoch (with ``owner``): a worker that knows an owner's epoch re-targets only to
    #: a newer one
    epoch: int = 0


@dataclass(frozen=True)
class TaskRunning(Request[ReportReply]):
    METHOD: ClassVar[str] = "task.running"
    task_instance_id: int
    attempt: int
    workflow_instance_id: int
    host: str
    pid: int
    log_path: str
    execute_path: str
    start_time: int
    #: the external application the task started (a Spark application id) and its UI link, once known:
    #: a RUNNING report is sent again when they appear
    app_id: str = ""
    app_link: str = ""


@dataclass(frozen=True)
class TaskResult(Request[ReportReply]):
    METHOD: ClassVar[str] = "task.result"
    task_instance_id: int
    attempt: int
    workflow_instance_id: int
    host: str
    #: SUCCESS, FAILURE, KILL, or LOST (killed because the worker lost its registry lease)
    state: str
    exit_code: int
    start_time: int
    end_time: int
    log_path: str = ""
    var_pool: list[dict[str, Any]] = field(default_factory=list)
    message: str = ""
    #: the task's process and exec dir (0 / "" if it never started): a quick task reports no RUNNING
    pid: int = 0
    execute_path: str = ""
    #: as in TaskRunning
    app_id: str = ""
    app_link: str = ""
    #: the last lines of the attempt's log (at most LOG_TAIL_LINES lines / LOG_TAIL_BYTES bytes, secrets
    #: masked as in the log): task alerts quote them
    log_tail: str = ""


#: the most a TaskResult's log_tail carries
LOG_TAIL_LINES, LOG_TAIL_BYTES = 20, 4096


@dataclass(frozen=True)
class TaskReportsReply:
    """One reply per report, running ones first, in the order they were sent."""

    replies: list[ReportReply] = field(default_factory=list)


@dataclass(frozen=True)
class TaskReports(Request[TaskReportsReply]):
    """Worker -> master: several reports in one call (what was due at once for the same master)."""

    METHOD: ClassVar[str] = "task.reports"
    running: list[TaskRunning] = field(default_factory=list)
    results: list[TaskResult] = field(default_factory=list)


@dataclass(frozen=True)
class ControlReply:
    #: whether the request acted: the instance moved to stopping / pausing (or a stopping one's kills
    #: were sent again)
    accepted: bool
    #: why not, when not accepted
    reason: str = ""


@dataclass(frozen=True)
class WorkflowControl(Request[ControlReply]):
    """API -> owning master: stop or pause a running workflow instance."""

    METHOD: ClassVar[str] = "workflow.control"
    workflow_instance_id: int
    action: str  # "stop" | "pause"
    #: why, for the instance's state history ("" from the API: "api stop" / "api pause")
    reason: str = ""


@dataclass(frozen=True)
class Done:
    """The answer to a notice (a sub-workflow's end, a cache expiry): whether it found what it names."""

    ok: bool


@dataclass(frozen=True)
class SubWorkflowDone(Request[Done]):
    """Child's master -> parent's master: the sub-workflow started by that task instance has ended."""

    METHOD: ClassVar[str] = "workflow.sub_done"
    workflow_instance_id: int
    task_instance_id: int


@dataclass(frozen=True)
class ResourceFetch(Request[Raw]):
    """Worker -> master: the content of one resource version (the reply is the raw bytes, streamed)."""

    METHOD: ClassVar[str] = "resource.fetch"
    blob_key: str
    sha256: str


@dataclass(frozen=True)
class CacheExpire(Request[Done]):
    """API -> masters: a workflow definition changed; drop cached heads for it."""

    METHOD: ClassVar[str] = "cache.expire"
    workflow_definition_code: int


@dataclass(frozen=True)
class WorkerWait:
    """One worker of a group, as the dispatcher sees it while an attempt waits for room."""

    address: str
    #: "full" (every exec slot taken), "overloaded" (the worker refuses for its load, memory or disk) or
    #: "draining" (taking no new task)
    state: str
    #: the worker's own words (its last refusal, or its heartbeat's reason), "" when it gave none
    detail: str = ""
    running: int = 0
    slots: int = 0


@dataclass(frozen=True)
class TaskWait:
    """Why one task of a run is not running, as its master knows it. ``kind``: ``no_worker`` (no live
    worker in ``worker_group``), ``workers_busy`` (``workers`` says which are full or overloaded),
    ``task_group`` (place ``position`` of ``queued`` in ``task_group``, ``used`` of ``size`` slots taken),
    ``retry`` (retry ``retry`` of ``retries``, due at ``at_ms``), ``delay`` (starts at ``at_ms``),
    ``dispatching`` (about to be sent), ``dispatched`` (sent to ``host``, not started yet), ``logic``
    (checked by the master: DEPENDENT, SUB_PROCESS; next check at ``at_ms`` when known), ``preparing``."""

    task_instance_id: int
    task_code: int
    kind: str
    worker_group: str = ""
    workers: list[WorkerWait] = field(default_factory=list)
    task_group: str = ""
    position: int = 0
    queued: int = 0
    used: int = 0
    size: int = 0
    retry: int = 0
    retries: int = 0
    #: epoch ms: when a retry or a delay is due
    at_ms: int = 0
    host: str = ""
    task_type: str = ""


@dataclass(frozen=True)
class WaitingReply:
    #: whether this master drives the instance (else nothing below is known here)
    owned: bool
    #: the run's state as its master holds it (READY_PAUSE, READY_STOP: no new task starts)
    state: str = ""
    tasks: list[TaskWait] = field(default_factory=list)


@dataclass(frozen=True)
class WaitingReasons(Request[WaitingReply]):
    """API -> owning master: why each not-yet-running task of this instance waits."""

    METHOD: ClassVar[str] = "workflow.waiting"
    workflow_instance_id: int
