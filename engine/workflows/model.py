"""Workflow definitions as users write them, and the checks that refuse a bad one before anything is
saved: duplicate or unknown task names, cycles, unknown task types, invalid plugin parameters.

``WorkflowDef`` is what the API, the CLI's workflow files and the tests build; ``Dag`` is the
checked graph the master drives.
"""

from __future__ import annotations

import datetime as dt
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from core.errors import FieldError
from engine.params import builtins, check_placeholders, properties, substitute
from engine.tasks import registry
from engine.tasks.base import ParamError
from engine.workflows import logic

PRIORITIES = {"HIGHEST": 0, "HIGH": 1, "MEDIUM": 2, "LOW": 3, "LOWEST": 4}
TIMEOUT_STRATEGIES = {"WARN": 0, "FAILED": 1, "WARNFAILED": 2}
#: workflow_definition.execution_type (engine/concurrency/serial.py: what they mean)
EXECUTION_TYPES = {"PARALLEL": 0, "SERIAL_WAIT": 1, "SERIAL_DISCARD": 2, "SERIAL_PRIORITY": 3}
#: the workflow timeout's strategies
WORKFLOW_TIMEOUT_STRATEGIES = {"WARN": 0, "FAILED": 1}
#: the highest per-workflow cap on active runs
MAX_ACTIVE_RUNS = 10_000
#: the most slots of a task group one task may take
MAX_GROUP_SLOTS = 10_000
#: the ends of a task's attempt that may raise its own alert (TaskDef.alert_on)
ALERT_ON = ("failure", "success", "retry", "timeout")
FAILURE_STRATEGIES = {"END": 0, "CONTINUE": 1}
#: longest workflow name: an instance is named ``<workflow>-<version>-<yyyyMMddHHmmssSSS>`` in a
#: varchar(255), which leaves the workflow 255 - 1 - 10 (an integer version) - 1 - 17 characters
MAX_NAME = 226


def instance_name(workflow: str, version: int, start: dt.datetime) -> str:
    """The name of a workflow instance started at ``start`` (DolphinScheduler's shape)."""
    return f"{workflow}-{version}-{start.strftime('%Y%m%d%H%M%S%f')[:17]}"


def name_error(name: str) -> str | None:
    """Why a workflow cannot have this name (an instance name could not hold it), or None."""
    if len(name) > MAX_NAME:
        return f"at most {MAX_NAME} characters (its instances are named after it), got {len(name)}"
    return None


class DefinitionError(FieldError):
    """A workflow definition is invalid; ``field`` locates the problem (``tasks[2].upstream``)."""


@dataclass(frozen=True)
class TaskDef:
    name: str
    task_type: str
    params: Mapping[str, Any]
    upstream: tuple[str, ...] = ()
    description: str = ""
    priority: int = 2
    worker_group: str = "default"
    retries: int = 0
    #: minutes between a failed attempt's end and the retry (DolphinScheduler's unit)
    retry_interval: int = 1
    #: minutes; 0 = no timeout
    timeout: int = 0
    timeout_strategy: int | None = None
    delay_time: int = 0
    environment_code: int = -1
    #: the environment's name as the document gives it ("" = none; the API sets environment_code from it)
    environment: str = ""
    #: switched off without being deleted (DolphinScheduler's flag = NO): it never runs, and what
    #: depends on it runs as though it had succeeded once its own upstream tasks have
    disabled: bool = False
    #: the task group it runs in ("" = none), its priority there (higher first) and the slots it takes
    task_group: str = ""
    task_group_priority: int = 0
    task_group_slots: int = 1
    #: task-level alerts: the ends that raise one (ALERT_ON words) and the alert group (id or name; None:
    #: the instance's warning group), resolved when the workflow is saved
    alert_on: tuple[str, ...] = ()
    alert_group: int | str | None = None


@dataclass(frozen=True)
class WorkflowDef:
    name: str
    project: str
    tasks: tuple[TaskDef, ...]
    description: str = ""
    global_params: tuple[Mapping[str, Any], ...] = ()
    #: minutes; 0 = none (alerts only, as DolphinScheduler)
    timeout: int = 0
    #: 0 PARALLEL, 1 SERIAL_WAIT, 2 SERIAL_DISCARD, 3 SERIAL_PRIORITY (engine.concurrency.serial)
    execution_type: int = 0
    tenant: str = "default"
    #: active runs at once; 0 = the execution type's default (PARALLEL: no limit; serial types: 1)
    max_active_runs: int = 0
    #: what ``timeout`` does: WORKFLOW_TIMEOUT_STRATEGIES (WARN: an alert; FAILED: alert, stop, FAILURE)
    timeout_strategy: int = 0

    def validate(self) -> Dag:
        """Check everything; return the DAG. Raises DefinitionError naming the field."""
        if not self.name or not self.name.strip():
            raise DefinitionError("name", "is required")
        too_long = name_error(self.name)
        if too_long:
            raise DefinitionError("name", too_long)
        if not self.project or not self.project.strip():
            raise DefinitionError("project", "is required")
        if not self.tasks:
            raise DefinitionError("tasks", "a workflow needs at least one task")
        try:
            now = dt.datetime.now(dt.UTC)
            for p in properties(self.global_params):
                substitute(p.value, builtins(now), now)  # a bad $[...] expression fails here, not at run time
        except ValueError as exc:
            raise DefinitionError("global_params", str(exc)) from exc
        if self.timeout < 0:
            raise DefinitionError("timeout", "must be >= 0 minutes")
        if self.execution_type not in EXECUTION_TYPES.values():
            raise DefinitionError("execution_type", f"must be one of {', '.join(EXECUTION_TYPES)}")
        if not 0 <= self.max_active_runs <= MAX_ACTIVE_RUNS:
            raise DefinitionError("max_active_runs", f"must be 0 (the default) to {MAX_ACTIVE_RUNS}")
        seen: dict[str, int] = {}
        for i, t in enumerate(self.tasks):
            if t.name in seen:
                raise DefinitionError(f"tasks[{i}].name", f"duplicate task name {t.name!r}")
            seen[t.name] = i
            _check_task(t, f"tasks[{i}]")
        for i, t in enumerate(self.tasks):
            for up in t.upstream:
                if up not in seen:
                    raise DefinitionError(f"tasks[{i}].upstream", f"unknown task {up!r}")
                if up == t.name:
                    raise DefinitionError(f"tasks[{i}].upstream", "a task cannot depend on itself")
        dag = Dag.build([t.name for t in self.tasks], [(up, t.name) for t in self.tasks for up in t.upstream])
        for i, t in enumerate(self.tasks):
            if t.task_type in registry.LOGIC_TYPES:
                try:
                    logic.validate(t.task_type, t.params, set(dag.upstream[t.name]), set(dag.downstream[t.name]))
                except ParamError as exc:
                    raise DefinitionError(f"tasks[{i}].params.{exc.field}", exc.reason) from exc
        return dag


def _check_task(t: TaskDef, where: str) -> None:
    """The checks of one task that need no other task."""
    if not t.name or not t.name.strip() or "/" in t.name:
        raise DefinitionError(f"{where}.name", "must be a non-empty name without '/'")
    if t.task_type not in registry.LOGIC_TYPES:
        try:
            registry.validate(t.task_type, t.params)
        except ParamError as exc:
            field_name = "task_type" if exc.field == "task_type" else f"params.{exc.field}"
            raise DefinitionError(f"{where}.{field_name}", exc.reason) from exc
    _check_time_placeholders(t.params, f"{where}.params")
    if t.task_group and t.task_type in registry.LOGIC_TYPES:
        raise DefinitionError(f"{where}.task_group", "logic tasks run on the master and take no task group slots")
    unknown = [w for w in t.alert_on if w not in ALERT_ON]
    if unknown:
        raise DefinitionError(f"{where}.alert_on", f"unknown {unknown[0]!r}: one of {', '.join(ALERT_ON)}")
    if not 1 <= t.task_group_slots <= MAX_GROUP_SLOTS:
        raise DefinitionError(f"{where}.task_group_slots", f"must be 1 to {MAX_GROUP_SLOTS}")
    if t.priority not in PRIORITIES.values():
        raise DefinitionError(f"{where}.priority", "must be 0 (HIGHEST) .. 4 (LOWEST)")
    if t.retries < 0 or t.retry_interval < 0:
        raise DefinitionError(f"{where}.retries", "retries and retry_interval must be >= 0")
    if t.timeout < 0:
        raise DefinitionError(f"{where}.timeout", "must be >= 0 minutes")
    if t.timeout and t.timeout_strategy not in TIMEOUT_STRATEGIES.values():
        raise DefinitionError(f"{where}.timeout_strategy", "must be WARN, FAILED or WARNFAILED")
    if not t.worker_group:
        raise DefinitionError(f"{where}.worker_group", "is required")


def _check_time_placeholders(value: Any, where: str) -> None:
    """Refuse a ``$[...]`` that cannot be evaluated in any text of a task's parameters (the run
    would fail on it; DolphinScheduler fails the task at run time)."""
    if isinstance(value, str):
        try:
            check_placeholders(value)
        except ValueError as exc:
            raise DefinitionError(where, str(exc)) from exc
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _check_time_placeholders(item, f"{where}.{key}")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _check_time_placeholders(item, f"{where}[{i}]")


#: tasks of a cycle an error names (a longer one is shortened)
_CYCLE_SHOWN = 10


@dataclass
class Dag:
    """A checked acyclic graph over node keys (names or codes)."""

    nodes: list[Any]
    upstream: dict[Any, list[Any]] = field(default_factory=dict)
    downstream: dict[Any, list[Any]] = field(default_factory=dict)
    _order: list[Any] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def build(cls, nodes: Iterable[Any], edges: Iterable[tuple[Any, Any]]) -> Dag:
        node_list = list(dict.fromkeys(nodes))
        up: dict[Any, list[Any]] = {n: [] for n in node_list}
        down: dict[Any, list[Any]] = {n: [] for n in node_list}
        for a, b in edges:
            if a not in up or b not in up:
                raise DefinitionError("relations", f"edge {a!r} -> {b!r} names an unknown task")
            if a not in up[b]:
                up[b].append(a)
                down[a].append(b)
        dag = cls(node_list, up, down)
        cycle = dag.find_cycle()
        if cycle:
            shown = [str(n) for n in cycle]
            if len(shown) > _CYCLE_SHOWN:
                shown = [*shown[: _CYCLE_SHOWN - 1], f"... ({len(cycle) - 1} tasks)", shown[-1]]
            raise DefinitionError("tasks", "cycle: " + " -> ".join(shown))
        return dag

    def topological(self) -> list[Any]:
        """Nodes in dependency order (Kahn); computed once, the graph never changes after build.
        The master walks it on every task completion, so it must not be rebuilt each time."""
        if self._order is None:
            self._order = self._kahn()
        return self._order

    def _kahn(self) -> list[Any]:
        indeg = {n: len(self.upstream[n]) for n in self.nodes}
        ready = deque(n for n in self.nodes if indeg[n] == 0)
        order = []
        while ready:
            n = ready.popleft()
            order.append(n)
            for m in self.downstream[n]:
                indeg[m] -= 1
                if indeg[m] == 0:
                    ready.append(m)
        return order

    def find_cycle(self) -> list[Any]:
        """A cycle as a node path (first node repeated at the end), or [] when acyclic."""
        if len(self.topological()) == len(self.nodes):
            return []
        # iterative depth-first search (a recursive one overflows Python's stack on a long cycle)
        color: dict[Any, int] = dict.fromkeys(self.nodes, 0)
        for root in self.nodes:
            if color[root] != 0:
                continue
            path: list[Any] = [root]
            children = [iter(self.downstream[root])]
            color[root] = 1
            while children:
                m = next(children[-1], None)
                if m is None:
                    color[path.pop()] = 2
                    children.pop()
                elif color[m] == 1:
                    return [*path[path.index(m) :], m]
                elif color[m] == 0:
                    color[m] = 1
                    path.append(m)
                    children.append(iter(self.downstream[m]))
        return []  # pragma: no cover - topological() said there is a cycle

    def descendants(self, start: Iterable[Any]) -> set[Any]:
        seen: set[Any] = set()
        todo = list(start)
        while todo:
            n = todo.pop()
            for m in self.downstream[n]:
                if m not in seen:
                    seen.add(m)
                    todo.append(m)
        return seen
