"""Task types as Python classes. Each builds the plugin parameters a workflow file would hold
(README.md lists them); every class takes the common options of :class:`porpoise.workflow.Task`.

Worker tasks: :class:`Shell`, :class:`Python`, :class:`Sql`, :class:`Spark`, :class:`Http`. Logic tasks run by the
master: :class:`SubWorkflow`, :class:`Dependent` (with :class:`Dep` items), :class:`Switch`,
:class:`Conditions`. Branch targets of a Switch or Conditions may be given as tasks or names; a task
given as a branch waits for the switch automatically (as a branch must).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from porpoise.workflow import Task

Cycle = Literal["hour", "day", "week", "month"]


def _set(params: dict[str, Any], **values: Any) -> dict[str, Any]:
    """``params`` plus the values that are not None."""
    params.update({k: v for k, v in values.items() if v is not None})
    return params


def _name(task: Task | str) -> str:
    return task.name if isinstance(task, Task) else task


class Shell(Task):
    """A bash script (``rawScript``)."""

    task_type = "SHELL"

    def __init__(self, name: str, command: str, **options: Any) -> None:
        super().__init__(name, params={"rawScript": command}, **options)


class Python(Task):
    """A Python script (``rawScript``) run by ``interpreter`` (default: the worker's configured one)."""

    task_type = "PYTHON"

    def __init__(self, name: str, script: str, *, interpreter: str | None = None, **options: Any) -> None:
        super().__init__(name, params=_set({"rawScript": script}, interpreter=interpreter), **options)


class Sql(Task):
    """SQL against a data source; ``sql_type`` ``query`` logs rows (and sets OUT params from columns)."""

    task_type = "SQL"

    def __init__(
        self,
        name: str,
        datasource: str,
        sql: str,
        *,
        sql_type: Literal["query", "non_query"] = "query",
        pre_statements: Sequence[str] | None = None,
        post_statements: Sequence[str] | None = None,
        max_rows: int | None = None,
        load_files: Sequence[Mapping[str, Any]] | None = None,
        **options: Any,
    ) -> None:
        params = _set(
            {"datasource": datasource, "sql": sql, "sqlType": sql_type},
            preStatements=list(pre_statements) if pre_statements else None,
            postStatements=list(post_statements) if post_statements else None,
            maxRows=max_rows,
            loadFiles=[dict(f) for f in load_files] if load_files else None,
        )
        super().__init__(name, params=params, **options)


class Spark(Task):
    """A Spark application through spark-submit: a PySpark file (``main_file``), inline PySpark code
    (``raw_script``) or Spark SQL (``sql``)."""

    task_type = "SPARK"

    def __init__(
        self,
        name: str,
        *,
        main_file: str | Mapping[str, Any] | None = None,
        raw_script: str | None = None,
        sql: str | None = None,
        master: str | None = None,
        deploy_mode: str | None = None,
        driver_cores: int | None = None,
        driver_memory: str | None = None,
        executor_cores: int | None = None,
        executor_memory: str | None = None,
        num_executors: int | None = None,
        app_name: str | None = None,
        conf: Mapping[str, str] | None = None,
        main_args: str | None = None,
        others: str | None = None,
        **options: Any,
    ) -> None:
        params = _set(
            {"programType": "SQL" if sql is not None else "PYTHON"},
            mainFile=main_file,
            rawScript=raw_script,
            sql=sql,
            master=master,
            deployMode=deploy_mode,
            driverCores=driver_cores,
            driverMemory=driver_memory,
            executorCores=executor_cores,
            executorMemory=executor_memory,
            numExecutors=num_executors,
            appName=app_name,
            conf=dict(conf) if conf else None,
            mainArgs=main_args,
            others=others,
        )
        super().__init__(name, params=params, **options)


class Http(Task):
    """One HTTP request (engine/tasks/http.py): checked status and answer, values taken into OUT params
    with ``extract={name: "$.json.path"}`` (each also declared as an output)."""

    task_type = "HTTP"

    def __init__(
        self,
        name: str,
        url: str,
        *,
        method: str = "GET",
        headers: Mapping[str, str] | None = None,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        body_type: Literal["json", "form", "raw"] | None = None,
        timeout_seconds: float | None = None,
        expected_status: Sequence[int] | None = None,
        check: Mapping[str, Any] | None = None,
        extract: Mapping[str, str] | None = None,
        max_log_bytes: int | None = None,
        **options: Any,
    ) -> None:
        params = _set(
            {"url": url, "httpMethod": method},
            headers=dict(headers) if headers else None,
            query=dict(query) if query else None,
            body=body,
            bodyType=body_type,
            timeoutSeconds=timeout_seconds,
            expectedStatus=list(expected_status) if expected_status else None,
            check=dict(check) if check else None,
            extract=dict(extract) if extract else None,
            maxLogBytes=max_log_bytes,
        )
        declared = list(options.pop("outputs", ()))
        outputs = declared + [k for k in extract or {} if k not in declared]
        super().__init__(name, params=params, outputs=outputs, **options)


class SubWorkflow(Task):
    """Runs another workflow as a child instance (by name, optionally in another project, or by code)."""

    task_type = "SUB_PROCESS"

    def __init__(self, name: str, workflow: str | int, *, project: str | None = None, **options: Any) -> None:
        params: dict[str, Any] = (
            {"workflow_code": workflow} if isinstance(workflow, int) else _set({"workflow": workflow}, project=project)
        )
        super().__init__(name, params=params, **options)


@dataclass(frozen=True)
class Dep:
    """One item of a :class:`Dependent` task: a workflow's (or one of its tasks') runs over a date cycle."""

    workflow: str | int
    task: str | None = None
    cycle: Cycle = "day"
    date_value: str = "today"
    project: str | None = None

    def to_dict(self) -> dict[str, Any]:
        item: dict[str, Any] = (
            {"workflow_code": self.workflow} if isinstance(self.workflow, int) else {"workflow": self.workflow}
        )
        return _set(item, project=self.project, task=self.task, cycle=self.cycle, date_value=self.date_value)


class Dependent(Task):
    """Waits for other workflows' runs for this instance's business date. ``items`` are combined with
    ``relation``; or give ``groups``: a list of (relation, items) combined with ``relation``."""

    task_type = "DEPENDENT"

    def __init__(
        self,
        name: str,
        items: Sequence[Dep] = (),
        *,
        relation: Literal["AND", "OR"] = "AND",
        groups: Sequence[tuple[Literal["AND", "OR"], Sequence[Dep]]] = (),
        check_interval: int | None = None,
        failure_policy: Literal["FAIL", "WAIT"] | None = None,
        failure_waiting_time: int | None = None,
        timeout_seconds: int | None = None,
        **options: Any,
    ) -> None:
        params: dict[str, Any] = {"relation": relation}
        if groups:
            params["groups"] = [{"relation": rel, "items": [d.to_dict() for d in deps]} for rel, deps in groups]
        else:
            params["items"] = [d.to_dict() for d in items]
        _set(
            params,
            check_interval=check_interval,
            failure_policy=failure_policy,
            failure_waiting_time=failure_waiting_time,
            timeout_seconds=timeout_seconds,
        )
        super().__init__(name, params=params, **options)


class Switch(Task):
    """The first case whose condition holds picks the branch that runs, else ``default``. Conditions
    use ``${name}`` placeholders (replaced by the value as text, then evaluated safely)."""

    task_type = "SWITCH"

    def __init__(
        self,
        name: str,
        cases: Sequence[tuple[str, Task | str]] = (),
        *,
        default: Task | str | None = None,
        **options: Any,
    ) -> None:
        super().__init__(name, params={"cases": []}, **options)
        for condition, target in cases:
            self.case(condition, target)
        if default is not None:
            self.otherwise(default)

    def case(self, condition: str, target: Task | str) -> Switch:
        self.params["cases"].append({"condition": condition, "next": _name(target)})
        self._branch(target)
        return self

    def otherwise(self, target: Task | str) -> Switch:
        self.params["default"] = _name(target)
        self._branch(target)
        return self

    def _branch(self, target: Task | str) -> None:
        if isinstance(target, Task):
            target.after(self)


class Conditions(Task):
    """Decides on its upstream tasks' outcomes: when ``conditions`` (task, SUCCESS | FAILURE) hold under
    ``relation``, the ``success`` branch runs, else the ``failure`` branch. A failure followed by a
    Conditions task is handled (the workflow does not fail for it)."""

    task_type = "CONDITIONS"

    def __init__(
        self,
        name: str,
        conditions: Sequence[tuple[Task | str, Literal["SUCCESS", "FAILURE"]]] = (),
        *,
        relation: Literal["AND", "OR"] = "AND",
        success: Sequence[Task | str] = (),
        failure: Sequence[Task | str] = (),
        **options: Any,
    ) -> None:
        params = {
            "relation": relation,
            "conditions": [{"task": _name(t), "status": s} for t, s in conditions],
            "success": [],
            "failure": [],
        }
        super().__init__(name, params=params, **options)
        self.after(*(t for t, _ in conditions))
        self.on_success(*success)
        self.on_failure(*failure)

    def on_success(self, *targets: Task | str) -> Conditions:
        return self._branch("success", targets)

    def on_failure(self, *targets: Task | str) -> Conditions:
        return self._branch("failure", targets)

    def _branch(self, key: str, targets: Sequence[Task | str]) -> Conditions:
        for target in targets:
            self.params[key].append(_name(target))
            if isinstance(target, Task):
                target.after(self)
        return self
