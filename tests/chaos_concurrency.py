"""The chaos suite's concurrency controls: some random workflows' tasks take task group slots and some
workflows run serially (SERIAL_WAIT, SERIAL_DISCARD, SERIAL_PRIORITY) or under a cap; the ledger then
checks each rule while nodes are being killed, paused and restarted.

What "a group never exceeded its size" means: at no instant were more task processes of the group's
attempts alive than the group has slots, alive as watched from outside (tests/task_watch.py: from the
process's first act until its process tree was gone). An attempt killed with its worker counts until
its process was really gone, not until someone noticed: a slot released while the old process still
ran would be two tasks on the shared resource, and this check sees it. Without a watcher (the
multi-host runs, whose killed attempts get their end row from the worker's reap log), the ledger's own
times are used; a killed attempt with no end row then counts until the next attempt of the same task
started (the main check proves it was gone by then), else until its instance ended — an estimate that
can only over-count.

The serial rules, per workflow (a run's span: from its first task process's start to its last one's
death):

- every limited workflow: no more runs at once than its cap (one for the serial types);
- SERIAL_WAIT with one place (and PARALLEL capped at 1): runs start in the order they were made (their
  instance ids) and every run ended SUCCESS;
- SERIAL_DISCARD: a discarded run (STOP, "SERIAL_DISCARD" in its history) ran no task; the others
  ended SUCCESS;
- SERIAL_PRIORITY: a run stopped or superseded was replaced by a newer run, the newest run ended
  SUCCESS, and a stopped run started no task after the newer run's first one.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from engine.workflows.model import WorkflowDef
from tests.cluster_harness import max_overlap
from tests.task_watch import Life

SUCCESS, STOP = 7, 5
PARALLEL, SERIAL_WAIT, SERIAL_DISCARD, SERIAL_PRIORITY = 0, 1, 2, 3

#: group name -> size
GROUPS = {"chaos-pool-2": 2, "chaos-pool-1": 1}
#: how often a grouped task picks each group: the size-1 group serialises its tasks across the whole
#: cluster, so it gets fewer (a third of the grouped tasks in it made it the round's long pole)
GROUP_PICK = {"chaos-pool-2": 3.0, "chaos-pool-1": 1.0}
#: the rule of the first workflows, by index (execution_type, max_active_runs); the rest are PARALLEL
LIMITS = {0: (SERIAL_WAIT, 0), 1: (PARALLEL, 2), 2: (SERIAL_DISCARD, 0), 3: (SERIAL_PRIORITY, 0)}

#: a limited workflow's tasks (its first ones) and its share of the commands against a PARALLEL one: its
#: runs go one (or two) at a time, so a full share of long runs would outlast the round
LIMITED_TASKS, LIMITED_WEIGHT = 4, 0.25

#: share of the random tasks put in a task group (``PORPOISE_CHAOS_GROUP_SHARE``; 0 leaves groups out)
GROUP_SHARE = float(os.environ.get("PORPOISE_CHAOS_GROUP_SHARE", "0.2"))

Row = Mapping[str, Any]
Span = tuple[dt.datetime, dt.datetime]


async def setup(conn: asyncpg.Connection) -> None:
    for name, size in GROUPS.items():
        await conn.execute(
            "INSERT INTO task_group (name, group_size) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING", name, size
        )


def decorate(rng: random.Random, wf: WorkflowDef, index: int) -> WorkflowDef:
    """A random workflow with GROUP_SHARE of its tasks in a task group, and a serial rule or a cap for
    the first workflows (kept short: their runs queue behind each other)."""
    tasks = tuple(
        dataclasses.replace(t, task_group=rng.choices(sorted(GROUPS), [GROUP_PICK[g] for g in sorted(GROUPS)])[0])
        if rng.random() < GROUP_SHARE
        else t
        for t in wf.tasks
    )
    execution_type, cap = LIMITS.get(index, (PARALLEL, 0))
    if index in LIMITS:  # the first tasks only depend on each other: still a DAG
        tasks = tasks[:LIMITED_TASKS]
    return dataclasses.replace(wf, tasks=tasks, execution_type=execution_type, max_active_runs=cap)


def weight(index: int) -> float:
    """How often the workload starts the workflow of this index, relative to a PARALLEL one."""
    return LIMITED_WEIGHT if index in LIMITS else 1.0


@dataclass
class ConcurrencyFindings:
    violations: list[str] = field(default_factory=list)
    #: group or workflow name -> the most tasks (runs) it had at once
    peaks: dict[str, int] = field(default_factory=dict)
    #: task group -> its peak by the ledger's own times alone (a killed attempt counted until its
    #: replacement started): what the check used before it read the watched lives, kept for comparison
    estimated_peaks: dict[str, int] = field(default_factory=dict)
    #: instances stopped on purpose by their workflow's rule (not a failure of the run)
    stopped_by_rule: set[int] = field(default_factory=set)


def _ts(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, dt.UTC)


def spans(ledger: Sequence[Row], lives: Mapping[tuple[str, int], Life] | None) -> dict[int, Span]:
    """Each ledger row's task process life, by task instance id: watched when there is a watcher, else
    the ledger's times (a killed attempt's end estimated, see the module docstring)."""
    out: dict[int, Span] = {}
    next_start: dict[tuple[int, int], dt.datetime] = {}
    for r in sorted(ledger, key=lambda r: r["start_time"], reverse=True):
        key = (r["workflow_instance_id"], r["task_code"])
        life = None if lives is None else lives.get((str(r["task_instance_id"]), int(r["pid"])))
        if life is not None and life.died is not None:
            out[r["task_instance_id"]] = (_ts(life.started), _ts(life.died))
        else:
            end = r["end_time"] or next_start.get(key) or r["instance_end"] or r["start_time"]
            out[r["task_instance_id"]] = (r["start_time"], end)
        next_start[key] = r["start_time"]
    return out


def _crowd(members: Sequence[tuple[Row, Span]]) -> str:
    """The rows alive at the busiest instant, for the violation's text."""
    events = sorted([(s, 1, i) for i, (_, (s, _e)) in enumerate(members)] + [(e, -1, i) for i, (_, (_s, e)) in
                    enumerate(members)], key=lambda x: (x[0], x[1]))  # fmt: skip
    alive: set[int] = set()
    best: set[int] = set()
    for _, step, i in events:
        (alive.add if step > 0 else alive.discard)(i)
        if len(alive) > len(best):
            best = set(alive)
    return "; ".join(
        f"attempt {members[i][0]['task_instance_id']} (state {members[i][0].get('state')}, host"
        f" {members[i][0].get('host')}) {members[i][1][0].time()}..{members[i][1][1].time()}"
        for i in sorted(best)
    )


def check_groups(ledger: Sequence[Row], span: Mapping[int, Span], sizes: Mapping[str, int]) -> ConcurrencyFindings:
    """``ledger`` rows carry ``task_group`` (the attempt's group name or None)."""
    out = ConcurrencyFindings()
    by_group: dict[str, list[tuple[Row, Span]]] = collections.defaultdict(list)
    for r in ledger:
        if r["task_group"]:
            by_group[r["task_group"]].append((r, span[r["task_instance_id"]]))
    for name, members in sorted(by_group.items()):
        out.peaks[name] = max_overlap([s for _, s in members])
        if out.peaks[name] > sizes.get(name, 0):
            out.violations.append(
                f"task group {name} ran {out.peaks[name]} tasks at once (size {sizes.get(name)}): {_crowd(members)}"
            )
    return out


def check_runs(
    ledger: Sequence[Row], span: Mapping[int, Span], workflows: Sequence[Row], instances: Sequence[Row]
) -> ConcurrencyFindings:
    """``workflows``: limited definitions (code, name, execution_type, max_active_runs); ``instances``:
    their instances (id, code, state, history: the state_history descriptions joined)."""
    out = ConcurrencyFindings()
    v = out.violations
    for wf in workflows:
        name, mode = wf["name"], wf["execution_type"]
        cap = wf["max_active_runs"] or 1
        mine = sorted((i for i in instances if i["code"] == wf["code"]), key=lambda i: i["id"])
        runs: dict[int, list[dt.datetime]] = {}
        for r in ledger:
            if r["code"] == wf["code"]:
                s, e = span[r["task_instance_id"]]
                run = runs.setdefault(r["workflow_instance_id"], [s, e])
                run[0], run[1] = min(run[0], s), max(run[1], e)
        out.peaks[name] = max_overlap([(s, e) for s, e in runs.values()])
        if out.peaks[name] > cap:
            v.append(f"workflow {name} ran {out.peaks[name]} instances at once (at most {cap}): "
                     f"{sorted((i, str(s.time()), str(e.time())) for i, (s, e) in runs.items())}")  # fmt: skip
        if mode in (SERIAL_WAIT, PARALLEL) and cap == 1:
            started = [i for i in sorted(runs, key=lambda i: runs[i][0])]
            if started != sorted(runs):
                v.append(f"workflow {name} ({mode}): runs started in the order {started}, not as made")
        if mode in (SERIAL_WAIT, PARALLEL):
            v += [f"workflow {name}: run {i['id']} ended in state {i['state']}" for i in mine if i["state"] != SUCCESS]
        elif mode == SERIAL_DISCARD:
            for i in mine:
                if i["state"] == STOP and "SERIAL_DISCARD" in i["history"]:
                    out.stopped_by_rule.add(i["id"])
                    if i["id"] in runs:
                        v.append(f"workflow {name}: discarded run {i['id']} ran tasks")
                elif i["state"] != SUCCESS:
                    v.append(f"workflow {name}: run {i['id']} ended in state {i['state']}: {i['history']}")
        elif mode == SERIAL_PRIORITY:
            for k, i in enumerate(mine):
                newer = mine[k + 1 :]
                if i["state"] == SUCCESS:
                    continue
                if i["state"] != STOP or not newer:  # (a stopped run's history does not say why: not read)
                    v.append(f"workflow {name}: run {i['id']} ended in state {i['state']}: {i['history']}")
                    continue
                out.stopped_by_rule.add(i["id"])
                first_newer = min((runs[n["id"]][0] for n in newer if n["id"] in runs), default=None)
                if i["id"] in runs and first_newer is not None and runs[i["id"]][1] > first_newer:
                    v.append(f"workflow {name}: stopped run {i['id']} still ran at {runs[i['id']][1].time()},"
                             f" after a newer run's first task started at {first_newer.time()}")  # fmt: skip
            if mine and mine[-1]["state"] != SUCCESS:
                v.append(f"workflow {name}: the newest run {mine[-1]['id']} ended in state {mine[-1]['state']}")
    return out


@dataclass
class Loaded:
    """What the checks read from the database (before the watched lives are taken)."""

    ledger: list[Row]
    workflows: list[Row]
    instances: list[Row]
    queue_left: int

    def stopped_by_rule(self) -> set[int]:
        """Instances stopped on purpose by their workflow's rule: discarded, or stopped / superseded by
        a newer run (not failures of the run; :func:`check_runs` checks them)."""
        modes = {wf["code"]: wf["execution_type"] for wf in self.workflows}
        newest: dict[int, int] = {}
        for i in self.instances:
            newest[i["code"]] = max(newest.get(i["code"], 0), i["id"])
        return {
            i["id"]
            for i in self.instances
            if i["state"] == STOP
            and (
                (modes.get(i["code"]) == SERIAL_DISCARD and "SERIAL_DISCARD" in i["history"])
                or (modes.get(i["code"]) == SERIAL_PRIORITY and i["id"] < newest[i["code"]])
            )
        }


async def load(conn: asyncpg.Connection) -> Loaded:
    ledger = await conn.fetch(
        "SELECT l.workflow_instance_id, l.task_code, l.task_instance_id, l.pid, l.start_time, l.end_time,"
        " t.state, t.host, w.end_time AS instance_end, w.workflow_definition_code AS code, g.name AS task_group"
        " FROM chaos_ledger l JOIN workflow_instance w ON w.id = l.workflow_instance_id"
        " JOIN task_instance t ON t.id = l.task_instance_id"
        " LEFT JOIN task_definition_log d ON d.code = t.task_code AND d.version = t.task_definition_version"
        " LEFT JOIN task_group g ON g.id = d.task_group_id ORDER BY l.start_time"
    )
    workflows = await conn.fetch(
        "SELECT code, name, execution_type, max_active_runs FROM workflow_definition"
        " WHERE execution_type <> 0 OR max_active_runs > 0"
    )
    instances = await conn.fetch(
        "SELECT w.id, w.workflow_definition_code AS code, w.state, coalesce((SELECT string_agg(h->>'desc', ' | ')"
        " FROM jsonb_array_elements(w.state_history) h), '') AS history FROM workflow_instance w"
        " WHERE w.workflow_definition_code = ANY($1::bigint[])",
        [wf["code"] for wf in workflows],
    )
    left = int(await conn.fetchval("SELECT count(*) FROM task_group_queue"))
    return Loaded(list(ledger), list(workflows), list(instances), left)


def evaluate(data: Loaded, lives: Mapping[tuple[str, int], Life] | None) -> ConcurrencyFindings:
    """The groups' sizes and the workflows' rules, over the task processes' watched lives (if watched)."""
    span = spans(data.ledger, lives)
    out = check_groups(data.ledger, span, GROUPS)
    runs = check_runs(data.ledger, span, data.workflows, data.instances)
    out.violations += runs.violations
    out.peaks |= runs.peaks
    out.stopped_by_rule = runs.stopped_by_rule
    if lives is not None:
        out.estimated_peaks = check_groups(data.ledger, spans(data.ledger, None), GROUPS).peaks
    if data.queue_left:
        out.violations.append(
            f"{data.queue_left} task group queue row(s) left after every run ended (slots never released)"
        )
    return out
