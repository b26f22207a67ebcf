"""New attempts as task_instance rows: their columns, and the one INSERT ... SELECT FROM unnest that writes a
batch of them (one typed array per column: one statement text whatever the batch's size, prepared once).

Two writers: an actor's write (MasterStore: the attempts of one instance) and the claim of a page of plain
starts (engine.master.claim: each new instance's first attempts, written in the statement that creates it)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.master.workflow_messages import Attempt
from engine.workflows.definitions import WorkflowSpec


@dataclass
class NewAttempt:
    task_code: int
    task_version: int
    name: str
    task_type: str
    attempt: int
    retry_times: int
    max_retry_times: int
    retry_interval: int
    priority: int
    worker_group: str
    environment_code: int
    delay_time: int
    task_params: dict[str, Any]
    var_pool: list[dict[str, Any]]
    dry_run: int = 0


#: a new attempt's columns as the INSERT writes them: (column, NewAttempt attribute, array type)
COLUMNS = (
    ("task_code", "task_code", "bigint"), ("task_definition_version", "task_version", "int"),
    ("name", "name", "text"), ("task_type", "task_type", "text"), ("attempt", "attempt", "int"),
    ("retry_times", "retry_times", "int"), ("max_retry_times", "max_retry_times", "int"),
    ("retry_interval", "retry_interval", "int"), ("task_instance_priority", "priority", "smallint"),
    ("worker_group", "worker_group", "text"), ("environment_code", "environment_code", "bigint"),
    ("delay_time", "delay_time", "int"), ("task_params", "task_params", "jsonb"), ("var_pool", "var_pool", "jsonb"),
    ("dry_run", "dry_run", "smallint"),
)  # fmt: skip
_NAMES = ", ".join(column for column, _, _ in COLUMNS)


def arrays(attempts: Sequence[NewAttempt]) -> list[list[Any]]:
    """The attempts' values, one list per column of COLUMNS (JSON columns encoded)."""
    return [
        [json.dumps(getattr(a, attr)) if kind == "jsonb" else getattr(a, attr) for a in attempts]
        for _, attr, kind in COLUMNS
    ]


def insert_sql(first: int, instance: str = "$1", join: str = "") -> str:
    """INSERT ... SELECT of new attempts, their arrays numbered from ``first``, of the instance ``instance``: a
    parameter, or with ``join`` (``JOIN <rows> ON <a condition on u.key>``) a column of the rows joined, each
    attempt then keyed by a leading bigint array ``$first`` (``u.key``) and the others numbered on from there."""
    start = first + 1 if join else first
    unnest = ", ".join(f"${i}::{kind}[]" for i, (_, _, kind) in enumerate(COLUMNS, start=start))
    head = f"INSERT INTO task_instance (workflow_instance_id, {_NAMES}, state, submit_time)"
    if not join:
        return f"{head} SELECT {instance}, u.*, 0, now() FROM unnest({unnest}) AS u"
    values = ", ".join(f"u.{column}" for column, _, _ in COLUMNS)
    return (
        f"{head} SELECT {instance}, {values}, 0, now()"
        f" FROM unnest(${first}::bigint[], {unnest}) AS u(key, {_NAMES}) {join}"
    )


def new_attempt(spec: WorkflowSpec, a: Attempt, dry_run: int) -> NewAttempt:
    """The row of attempt ``a`` of a run of ``spec``."""
    t = spec.tasks[a.code]
    return NewAttempt(
        task_code=t.code,
        task_version=t.version,
        name=t.name,
        task_type=t.task_type,
        attempt=a.attempt,
        retry_times=a.retry_times,
        max_retry_times=t.retries,
        retry_interval=t.retry_interval,
        priority=t.priority,
        worker_group=t.worker_group,
        environment_code=t.environment_code,
        delay_time=t.delay_time,
        task_params=dict(t.params),
        var_pool=a.var_in,
        dry_run=dry_run,
    )
