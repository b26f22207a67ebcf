"""A new run's first turn, taken when its command is claimed.

A plain start (a new instance: no serial rule, no sub-workflow) has its run built and its first turn taken
(``WorkflowRun.start``) by the command poller before the claim, so that the claim's statement, which creates
the instance, writes the first attempts the turn creates too (engine.master.claim, one-statement claim). The
actor then starts from that turn: it binds the attempts to the ids the claim returned and dispatches them, with
no write of its own first (a commit less between an API start and its first task, and per run started).

Only a turn whose database changes are first attempts alone is written by the claim (:func:`first_attempts`):
one that also ends the run or writes task states (nothing to run), or takes task group slots, is written by the
actor, as is any turn of a page the claim takes through its transaction; the actor performs the same turn
either way, so a run never starts twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.master.attempt_rows import NewAttempt, new_attempt
from engine.master.store import RunContext
from engine.master.workflow import WorkflowRun, scope_for
from engine.master.workflow_messages import Action, ArmTimer, CreateAttempts
from engine.states import WorkflowState
from engine.workflows.definitions import WorkflowSpec

#: first attempts one claim writes at most (its statement stays small whatever the page and the DAGs' widths:
#: the turns past it are written by their actors)
CLAIM_ATTEMPTS = 2000


@dataclass
class FirstTurn:
    run: WorkflowRun
    actions: list[Action]
    #: the first attempts, for the claim to write with the instance; None: the actor writes them
    attempts: list[NewAttempt] | None
    #: their task instance ids (in the order of ``attempts``) once the claim wrote them
    ids: list[int] | None = None
    #: the run's context (project parameters, environments), read while it was claimed (shared by the runs of
    #: a page with the same project and environments)
    context: asyncio.Future[RunContext] | None = None
    #: when that read began (time.monotonic): its age counts from then (master.run_context_ttl)
    context_at: float = 0.0


def new_run(
    spec: WorkflowSpec,
    failure_strategy: int,
    command_param: Mapping[str, Any],
    task_depend_type: int,
    state: WorkflowState = WorkflowState.RUNNING_EXECUTION,
    **kwargs: Any,
) -> WorkflowRun:
    """A run of ``spec`` driven over the part of the DAG its command's StartNodeList names (all of it if none);
    ``kwargs``: WorkflowRun's (taken-back attempts, states to rerun). Its instance id is set once known."""
    start = command_param.get("StartNodeList") or []
    scope = scope_for(spec.dag, [int(c) for c in start], task_depend_type) if start else None
    return WorkflowRun(0, spec, failure_strategy, state, scope=scope, **kwargs)


def first_turn(spec: WorkflowSpec, command: Mapping[str, Any], now: float) -> FirstTurn:
    """The run a plain start ``command`` becomes, started at ``now`` (epoch seconds)."""
    run = new_run(
        spec, int(command["failure_strategy"]), dict(command["command_param"] or {}), int(command["task_depend_type"])
    )
    actions = run.start(now)
    return FirstTurn(run, actions, first_attempts(spec, actions, int(command["dry_run"])))


def first_attempts(spec: WorkflowSpec, actions: list[Action], dry_run: int) -> list[NewAttempt] | None:
    """The rows of the first attempts a turn creates when that is all it writes (its other actions only arm
    timers); else None."""
    if any(t.task_group_id for t in spec.tasks.values()):
        return None  # a group's slots are taken in the actor's transaction (task_groups_sql.enqueue)
    created = []
    for action in actions:
        if isinstance(action, CreateAttempts):
            created += action.attempts
        elif not isinstance(action, ArmTimer):
            return None
    if not created or any(a.attempt != 1 for a in created):
        return None
    return [new_attempt(spec, a, dry_run) for a in created]


def context_of(spec: WorkflowSpec) -> tuple[int, tuple[int, ...]]:
    """What a run of ``spec`` reads its context by (MasterStore.run_context): its project and the environments
    its tasks name."""
    return spec.project_code, tuple(sorted({t.environment_code for t in spec.tasks.values()}))


def for_the_claim(turns: Mapping[int, FirstTurn]) -> dict[int, list[NewAttempt]]:
    """The first attempts the claim writes, by command id: the turns' in command order, up to CLAIM_ATTEMPTS."""
    out: dict[int, list[NewAttempt]] = {}
    total = 0
    for cmd_id in sorted(turns):
        attempts = turns[cmd_id].attempts
        if attempts:
            total += len(attempts)
            if total > CLAIM_ATTEMPTS:
                break
            out[cmd_id] = attempts
    return out
