"""Workflows as Python code: a :class:`Workflow` collects the tasks created inside its ``with`` block,
``a >> b`` makes ``b`` wait for ``a``, and :meth:`Workflow.to_document` gives the same document a YAML
file holds (docs/WORKFLOWS.md), checked locally with the server's own code before anything is sent.

::

    with Workflow("taxi_daily", project="demo", schedule="0 0 2 * * ?") as wf:
        gen = Shell("generate", "python generate.py --date ${biz_date}", retries=2)
        agg = Spark("aggregate", main_file="clean_aggregate.py")
        gen >> agg
    wf.apply()
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Self

from engine.errors import PorpoiseError
from engine.workflows import document
from engine.workflows.model import DefinitionError

if TYPE_CHECKING:
    from porpoise.client import Client, Instance

Priority = Literal["HIGHEST", "HIGH", "MEDIUM", "LOW", "LOWEST"]
TimeoutStrategy = Literal["WARN", "FAILED", "WARNFAILED"]
AlertOn = Literal["failure", "success", "retry", "timeout"]
#: what a run does when its workflow already runs ``max_active_runs`` (engine/concurrency/serial.py)
ExecutionType = Literal["PARALLEL", "SERIAL_WAIT", "SERIAL_DISCARD", "SERIAL_PRIORITY"]
#: the workflow's time limit: WARN (an alert) or FAILED (an alert, then the run is stopped: FAILURE)
WorkflowTimeoutStrategy = Literal["WARN", "FAILED"]
ParamValue = str | int | float | bool

#: the workflow whose ``with`` block is open (tasks created now join it)
_CURRENT: contextvars.ContextVar[Workflow | None] = contextvars.ContextVar("porpoise_workflow", default=None)
#: where workflows created now are collected (``porpoise apply FILE.py``), if anywhere
_COLLECTOR: contextvars.ContextVar[list[Workflow] | None] = contextvars.ContextVar("porpoise_collector", default=None)


class WorkflowError(PorpoiseError):
    """A workflow or task built in Python is not valid; ``field`` names where (as the server would)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


class Task:
    """One task of a workflow. Subclasses (Shell, Python, Sql, ...) build ``params`` for their type; this
    class takes any plugin's type and params as they are.

    The options are the workflow file's task fields: ``retries``, ``retry_interval`` (minutes),
    ``timeout`` (minutes) with ``timeout_strategy``, ``priority``, ``worker_group``, ``environment`` (an
    environment's name: its exports run before the task's script), ``delay_time`` (minutes),
    ``description``, ``disabled`` (switched off: never runs, its downstream runs as though it had
    succeeded); ``task_group`` names the task group whose slots the task takes while it runs, with
    ``task_group_priority`` (higher first in the group's queue) and ``task_group_slots``; ``alert_on`` lists
    the ends of an attempt that raise the task's own alert ("failure", "success", "retry", "timeout"),
    sent to ``alert_group`` (its name or id; default: the run's warning group); ``inputs`` are IN
    local params (name -> value), ``outputs`` the names of OUT params the task sets with
    ``${setValue(name=value)}``; ``resources`` lists resource-center files the worker puts in the task's
    directory (:class:`porpoise.Resource` or paths), its ``resourceList``.
    """

    task_type: str = ""

    def __init__(
        self,
        name: str,
        task_type: str | None = None,
        params: Mapping[str, Any] | None = None,
        *,
        upstream: Iterable[Task | str] = (),
        retries: int = 0,
        retry_interval: int = 1,
        timeout: int = 0,
        timeout_strategy: TimeoutStrategy | None = None,
        priority: Priority = "MEDIUM",
        worker_group: str = "default",
        environment: str | None = None,
        delay_time: int = 0,
        description: str = "",
        disabled: bool = False,
        task_group: str | None = None,
        task_group_priority: int = 0,
        task_group_slots: int = 1,
        alert_on: Iterable[AlertOn] = (),
        alert_group: str | int | None = None,
        inputs: Mapping[str, ParamValue] | None = None,
        outputs: Sequence[str] = (),
        resources: Iterable[Mapping[str, Any] | str] = (),
        workflow: Workflow | None = None,
    ) -> None:
        self.name = name
        self.type = task_type or self.task_type
        if not self.type:
            raise WorkflowError(f"task {name!r}", "needs a task type")
        self.params: dict[str, Any] = dict(params or {})
        self.retries = retries
        self.retry_interval = retry_interval
        self.timeout = timeout
        self.timeout_strategy = timeout_strategy
        self.priority = priority
        self.worker_group = worker_group
        self.environment = environment
        self.delay_time = delay_time
        self.description = description
        self.disabled = disabled
        self.task_group = task_group
        self.task_group_priority = task_group_priority
        self.task_group_slots = task_group_slots
        self.alert_on = list(alert_on)
        self.alert_group = alert_group
        local = [{"prop": k, "direct": "IN", "type": "VARCHAR", "value": _text(v)} for k, v in (inputs or {}).items()]
        local += [{"prop": k, "direct": "OUT", "type": "VARCHAR", "value": ""} for k in outputs]
        if local:
            self.params["localParams"] = [*self.params.get("localParams", []), *local]
        listed = [{"resourceName": r} if isinstance(r, str) else dict(r) for r in resources]
        if listed:
            self.params["resourceList"] = [*self.params.get("resourceList", []), *listed]
        #: names of the tasks this one waits for, in the order they were added
        self.upstream: list[str] = []
        for up in upstream:
            self.after(up)
        self.workflow = workflow or _CURRENT.get()
        if self.workflow is None:
            raise WorkflowError(f"task {name!r}", "create tasks inside `with Workflow(...):` or pass workflow=")
        self.workflow.add(self)

    # -- dependencies ------------------------------------------------------------------------------

    def after(self, *tasks: Task | str) -> Self:
        """This task waits for ``tasks``."""
        for t in tasks:
            name = t.name if isinstance(t, Task) else t
            if name not in self.upstream:
                self.upstream.append(name)
        return self

    def __rshift__(self, other: Task | Sequence[Task]) -> Task | Sequence[Task]:
        """``a >> b``: b waits for a; ``a >> [b, c]`` fans out. Returns the right side, so chains read left to right."""
        for t in _many(other):
            t.after(self)
        return other

    def __rrshift__(self, other: Task | Sequence[Task]) -> Task:
        """``[a, b] >> c``: c waits for both."""
        self.after(*_many(other))
        return self

    def __lshift__(self, other: Task | Sequence[Task]) -> Task | Sequence[Task]:
        """``b << a``: b waits for a."""
        self.after(*_many(other))
        return other

    def __rlshift__(self, other: Task | Sequence[Task]) -> Task:
        """``[b, c] << a``: both wait for a."""
        for t in _many(other):
            t.after(self)
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    # -- document ----------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        item: dict[str, Any] = {"name": self.name, "type": self.type, "params": dict(self.params)}
        if self.upstream:
            item["upstream"] = list(self.upstream)
        if self.description:
            item["description"] = self.description
        item.update(
            retries=self.retries,
            retry_interval=self.retry_interval,
            timeout=self.timeout,
            priority=self.priority,
            worker_group=self.worker_group,
            delay_time=self.delay_time,
        )
        if self.timeout and self.timeout_strategy:
            item["timeout_strategy"] = self.timeout_strategy
        if self.environment is not None:
            item["environment"] = self.environment
        if self.disabled:
            item["disabled"] = True
        if self.task_group is not None:
            item["task_group"] = self.task_group
        if self.task_group is not None or self.task_group_priority != 0 or self.task_group_slots != 1:
            # given without a group too, so that the server's checks see them (they take effect with one)
            item.update(task_group_priority=self.task_group_priority, task_group_slots=self.task_group_slots)
        if self.alert_on:
            item["alert_on"] = list(self.alert_on)
        if self.alert_group is not None:
            item["alert_group"] = self.alert_group
        return item


class Workflow:
    """A workflow definition built in Python. ``schedule`` (cron or Quartz style) with ``timezone`` is
    created or updated by :meth:`apply` as the workflow's one schedule, put online with it.

    ``timeout`` is the whole run's limit in minutes (0: none), with ``timeout_strategy`` WARN (an alert)
    or FAILED (an alert, then the run is stopped and ends FAILURE). ``execution_type`` and
    ``max_active_runs`` limit the runs at once (0: no limit for PARALLEL, one for the serial types): a run
    that finds the workflow full waits (PARALLEL, SERIAL_WAIT), is not started (SERIAL_DISCARD) or stops
    the oldest run and starts once it ended (SERIAL_PRIORITY). ``environment`` names the environment of
    every task that names none."""

    def __init__(
        self,
        name: str,
        project: str = "default",
        *,
        params: Mapping[str, ParamValue] | None = None,
        description: str = "",
        timeout: int = 0,
        timeout_strategy: WorkflowTimeoutStrategy = "WARN",
        execution_type: ExecutionType = "PARALLEL",
        max_active_runs: int = 0,
        tenant: str = "default",
        environment: str | None = None,
        schedule: str | None = None,
        timezone: str = "UTC",
        client: Client | None = None,
    ) -> None:
        self.name = name
        self.project = project
        self.params = {k: _text(v) for k, v in (params or {}).items()}
        self.description = description
        self.timeout = timeout
        self.timeout_strategy = timeout_strategy
        self.execution_type = execution_type
        self.max_active_runs = max_active_runs
        self.tenant = tenant
        self.environment = environment
        self.schedule = schedule
        self.timezone = timezone
        self.client = client
        #: tasks by name, in the order they were created
        self.tasks: dict[str, Task] = {}
        #: the workflow's code once applied
        self.code: int | None = None
        #: the API's answer to the last apply (code, version, created)
        self.saved: dict[str, Any] = {}
        self._token: contextvars.Token[Workflow | None] | None = None
        collector = _COLLECTOR.get()
        if collector is not None:
            collector.append(self)

    def __enter__(self) -> Self:
        self._token = _CURRENT.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _CURRENT.reset(self._token)
            self._token = None

    def add(self, task: Task) -> None:
        if task.name in self.tasks:
            raise WorkflowError(f"tasks.{task.name}", f"duplicate task name {task.name!r}")
        self.tasks[task.name] = task

    def __getitem__(self, name: str) -> Task:
        return self.tasks[name]

    def to_document(self) -> dict[str, Any]:
        """The workflow document (what ``GET /api/v1/workflows/{code}`` returns for it)."""
        doc: dict[str, Any] = {"name": self.name, "project": self.project}
        if self.description:
            doc["description"] = self.description
        doc.update(timeout=self.timeout, tenant=self.tenant)
        if self.environment is not None:
            doc["environment"] = self.environment
        if self.execution_type != "PARALLEL":
            doc["execution_type"] = self.execution_type
        if self.max_active_runs != 0:
            doc["max_active_runs"] = self.max_active_runs
        if self.timeout_strategy != "WARN":
            doc["timeout_strategy"] = self.timeout_strategy
        doc.update(
            params=[{"prop": k, "value": v, "direct": "IN", "type": "VARCHAR"} for k, v in self.params.items()],
            tasks=[t.to_dict() for t in self.tasks.values()],
        )
        return doc

    def validate(self) -> None:
        """The server's checks, run here: raises :class:`WorkflowError` naming the field."""
        try:
            document.parse(self.to_document())
        except DefinitionError as exc:
            raise WorkflowError(f"{self.name}: {exc.field}", exc.reason) from exc

    def _client(self, client: Client | None) -> Client:
        from porpoise.client import Client

        chosen = client or self.client
        if chosen is None:
            chosen = self.client = Client()
        return chosen

    def apply(self, client: Client | None = None, online: bool = True) -> int:
        """Create the workflow or save its next version (checked here first); with ``schedule``, create or
        update its schedule too. Returns the workflow's code."""
        self.validate()
        c = self._client(client)
        self.saved = dict(c.api.post("/api/v1/workflows", self.to_document(), release=online))
        self.code = int(self.saved["code"])
        if self.schedule:
            c.set_schedule(self.code, self.schedule, self.timezone, online=online)
        return self.code

    def start(
        self,
        params: Mapping[str, ParamValue] | None = None,
        *,
        wait: bool = False,
        timeout: float | None = None,
        client: Client | None = None,
        **options: Any,
    ) -> Instance:
        """Start a run of the applied workflow (``apply()`` first). ``options`` are the API's start options
        (priority, worker_group, failure_strategy, dry_run, start_tasks, scope, ...). With ``wait=True``,
        returns once the run has finished (or raises TimeoutError after ``timeout`` seconds)."""
        c = self._client(client)
        code = self.code if self.code is not None else c.workflow_code(self.name, self.project)
        run = c.start(code, params, **options)
        if wait:
            run.wait(timeout)
        return run


def _many(value: Task | Sequence[Task]) -> Sequence[Task]:
    return [value] if isinstance(value, Task) else value


def _text(value: ParamValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@contextlib.contextmanager
def collecting(into: list[Workflow]) -> Iterator[list[Workflow]]:
    """Collect every Workflow created inside the block into ``into``."""
    token = _COLLECTOR.set(into)
    try:
        yield into
    finally:
        _COLLECTOR.reset(token)


def current_workflow() -> Workflow | None:
    """The workflow whose ``with`` block is open, if any."""
    return _CURRENT.get()
