"""The plugin contract: validate parameters at save time, describe the process to launch at run time.

A plugin never imports engine internals: it gets a :class:`TaskContext` (resolved parameters, the
working directory, environment, data sources) and returns a :class:`Launch` (argv, files, env). The
worker's executor owns the process: its group, its log, its timeout and its kill.
"""

from __future__ import annotations

import datetime as dt
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from core.errors import FieldError
from engine.params import Property, properties, substitute


class ParamError(FieldError):
    """A task definition's parameter is invalid; ``field`` names it for the user."""


@dataclass
class TaskContext:
    task_instance_id: int
    task_name: str
    task_params: Mapping[str, Any]
    #: resolved parameter map (${name} values)
    values: Mapping[str, str]
    #: business time for $[...] placeholders
    when: dt.datetime
    exec_dir: Path
    environment_config: str = ""
    #: connection parameters of named data sources the master resolved for this task
    datasources: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: a SQL task's result e-mail (sendEmail): the EMAIL senders of its alert group, ``{name, params}`` with
    #: secrets open, resolved by the master
    email_senders: tuple[Mapping[str, Any], ...] = ()
    #: the worker's interpreter for PYTHON tasks naming none (worker.python_interpreter)
    python_interpreter: str = "python3"
    #: directories SQL loadFiles may read from (worker.sql_load_dirs)
    load_dirs: tuple[str, ...] = ()
    #: the attempt's identity beyond its task instance id (a later attempt is another task instance)
    workflow_instance_id: int = 0
    task_code: int = 0
    attempt: int = 1
    #: settings the worker gives its plugins: from its configuration (``spark_connect_url``) and the host
    #: it advertises to its peers (``worker_host``, "" before it has one)
    options: Mapping[str, str] = field(default_factory=dict)
    #: names whose value the workflow's writers wrote (engine.params.trusted_names): SQL's ``!{name}`` takes
    #: only these
    trusted: frozenset[str] = frozenset()

    def render(self, text: str) -> str:
        """Apply ${name} and $[...] placeholders."""
        return substitute(text, self.values, self.when)


#: bytes a task may be given on its standard input (Launch.stdin): what a pipe holds without a reader
MAX_STDIN = 65_536


@dataclass
class Launch:
    """How to run a task: argv in the exec dir, files to write there first, extra environment."""

    argv: list[str]
    files: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    #: environment values that must never be written to the log
    secret_env: dict[str, str] = field(default_factory=dict)
    #: a secret the task reads on its standard input (a pipe filled and closed before the start; at most
    #: MAX_STDIN bytes): unlike the environment, which every process of the task's user can read in
    #: /proc/<pid>/environ while the task runs, it is gone once read
    stdin: str = ""
    #: a module whose ``main(argv)`` the worker's fork server (engine/worker/forkserver.py) may run in a
    #: process forked from its pre-imported state instead of starting ``argv``, which must then be
    #: ``[python, "-m", inprocess, *args]`` (the same program, started cold); "" = always ``argv``
    inprocess: str = ""


#: ``localParams``, which every task type accepts: IN values and OUT names (engine/params.py Property)
LOCAL_PARAMS: dict[str, Any] = {
    "type": "array",
    "description": "IN values and OUT names of this task (print ${setValue(name=value)} to set an OUT one)",
    "items": {
        "type": "object",
        "required": ["prop"],
        "properties": {
            "prop": {"type": "string", "minLength": 1},
            "direct": {"type": "string", "description": "IN or OUT"},
            "type": {"type": "string", "description": "VARCHAR, INTEGER, LIST, ..."},
            "value": {},
        },
    },
}


def describe_params(
    properties: Mapping[str, Any], required: tuple[str, ...] = (), examples: tuple[Mapping[str, Any], ...] = ()
) -> dict[str, Any]:
    """A task type's parameter schema (JSON Schema): its own properties and localParams; ``examples[0]`` is
    the params of a new task of the type (the UI's template). Unknown keys stay allowed, as they always were
    (documents imported from DolphinScheduler carry extra ones)."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {**properties, "localParams": LOCAL_PARAMS},
        "required": list(required),
    }
    if examples:
        schema["examples"] = [dict(e) for e in examples]
    return schema


class TaskPlugin(ABC):
    task_type: ClassVar[str]
    #: JSON Schema of the params (describe_params): the API serves it (GET /api/v1/task-types) and the UI draws
    #: its form from it; registry.validate checks it after validate(), and tests/test_task_param_schemas.py
    #: fails when validate() reads a parameter the schema does not declare, so the two cannot drift apart
    params_schema: ClassVar[dict[str, Any]] = describe_params({})

    @classmethod
    def validate(cls, params: Mapping[str, Any]) -> None:
        """Raise ParamError naming the field when the definition's params are invalid."""
        if not isinstance(params, Mapping):
            raise ParamError("task_params", "must be an object")
        local = params.get("localParams")
        if local is not None and not (isinstance(local, list) and all(isinstance(p, Mapping) for p in local)):
            raise ParamError("localParams", "must be a list of {prop, direct, type, value}")
        try:
            properties(params.get("localParams"))
        except ValueError as exc:
            raise ParamError("localParams", str(exc)) from exc

    @classmethod
    def local_params(cls, params: Mapping[str, Any]) -> list[Property]:
        return properties(params.get("localParams"))

    @abstractmethod
    def launch(self, ctx: TaskContext) -> Launch:
        """The process to start for this task."""


def require_str(params: Mapping[str, Any], name: str, allow_empty: bool = False) -> str:
    value = params.get(name)
    if not isinstance(value, str) or (not allow_empty and not value.strip()):
        raise ParamError(name, "is required and must be a non-empty string")
    return value


def optional(params: Mapping[str, Any], name: str, kind: type, default: Any = None) -> Any:
    value = params.get(name, default)
    if value is None:
        return default
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ParamError(name, f"must be an integer, got {value!r}")
    if kind is not int and not isinstance(value, kind):
        raise ParamError(name, f"must be a {kind.__name__}, got {type(value).__name__}")
    return value


#: the directory holding the engine package: runners started as ``python -m engine.tasks.<x>`` import it
ENGINE_ROOT = str(Path(__file__).resolve().parents[2])


def runner_env() -> dict[str, str]:
    """Environment a runner of ours (``sys.executable -m engine.tasks...``) needs to import the engine: tasks
    do not inherit the worker's environment (engine/worker/taskenv.py)."""
    return {"PYTHONPATH": ENGINE_ROOT}


def script_with_environment(ctx: TaskContext, script: str) -> str:
    env = ctx.environment_config.strip()
    return f"{env}\n{script}" if env else script
