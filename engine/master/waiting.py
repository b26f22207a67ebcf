"""Why isn't it running? Each not-yet-running task of a run, with the reason its master has for it.

Nothing here runs on the dispatch path: the question is answered by reading what the actor, the
dispatcher and the wheel already hold (the dispatcher writes one thing for it, a worker's last refusal
reason, and only when a refusal makes an attempt wait). A task group's queue position is read from the
database, one statement per question.
"""

from __future__ import annotations

from typing import Any

import asyncpg

from engine.clocks import now_ms
from engine.concurrency.task_groups_sql import queue_places
from engine.master.actor import WorkflowActor
from engine.master.dispatcher import Dispatcher
from engine.master.wheel import StateWheel
from engine.master.workflow import Status
from engine.states import TaskState
from registry import ServerStatus
from rpc.messages import TaskWait, WorkerWait


def _epoch_ms(wheel: StateWheel, key: tuple[Any, ...]) -> int:
    due = wheel.due(key)
    return 0 if due is None else now_ms() + max(0, int((due - wheel.clock()) * 1000))


def _workers(dispatcher: Dispatcher, group: str) -> list[WorkerWait]:
    """The group's live workers and why none takes the attempt now: full or overloaded, in its own words."""
    out = []
    for w in dispatcher.workers(group):
        hb = w.heartbeat
        refusal = dispatcher.refusals.get(w.address, "")
        if hb.status == ServerStatus.DRAINING:
            state, detail = "draining", hb.reason
        elif hb.status == ServerStatus.ABNORMAL:
            state, detail = "overloaded", hb.reason or "less free memory than it reserves"
        elif refusal and "exec slots" not in refusal:
            state, detail = "overloaded", refusal
        elif hb.exec_slots and hb.running_tasks < hb.exec_slots and hb.status == ServerStatus.BUSY:
            state, detail = "overloaded", hb.reason or "cpus busy with the load over its limit"
        else:
            state, detail = "full", refusal
        out.append(WorkerWait(w.address, state, detail, hb.running_tasks, hb.exec_slots))
    return sorted(out, key=lambda x: x.address)


def _dispatch_wait(actor: WorkflowActor, dispatcher: Dispatcher, tid: int, code: int) -> TaskWait:
    group = actor.spec.tasks[code].worker_group
    place = dispatcher.place(tid, group)
    if place == "waiting":
        workers = _workers(dispatcher, group)
        if not dispatcher.candidates(group):
            # none, or every one draining / short of memory: the master sends to none of them
            kind = "workers_busy" if workers else "no_worker"
            return TaskWait(tid, code, kind, worker_group=group, workers=workers)
        return TaskWait(tid, code, "workers_busy", worker_group=group, workers=workers)
    return TaskWait(tid, code, "dispatching" if place == "queued" else "preparing", worker_group=group)


async def reasons(
    actor: WorkflowActor, dispatcher: Dispatcher, wheel: StateWheel, pool: asyncpg.Pool | None
) -> list[TaskWait]:
    """Why each task of ``actor``'s run that is not running yet waits."""
    run, out = actor.run, []
    grouped: list[int] = []
    for a in sorted(run.attempts(), key=lambda a: a.code):
        code = a.code
        task = actor.spec.tasks[code]
        if run.status(code) is Status.RETRY_WAIT:
            due = _epoch_ms(wheel, (actor.id, "retry", code))
            if not due:
                continue  # its failure is being written: the actor arms the retry's timer once it is
            retry = a.retry_times + (0 if a.state is TaskState.NEED_FAULT_TOLERANCE else 1)
            out.append(TaskWait(a.id, code, "retry", retry=retry, retries=task.retries, at_ms=due))
        elif not a.id or a.state.finished:
            continue
        elif code in run.logic:
            if a.state in (TaskState.SUBMITTED_SUCCESS, TaskState.RUNNING_EXECUTION):
                due = _epoch_ms(wheel, (actor.id, "logic", a.id))
                out.append(TaskWait(a.id, code, "logic", at_ms=due, task_type=task.task_type))
        elif a.id in actor.delayed:
            out.append(TaskWait(a.id, code, "delay", at_ms=actor.delayed[a.id][1]))
        elif a.id in actor.group_waiting:
            grouped.append(a.id)
        elif a.state is TaskState.SUBMITTED_SUCCESS:
            out.append(_dispatch_wait(actor, dispatcher, a.id, code))
        elif a.state is TaskState.DISPATCH:
            out.append(TaskWait(a.id, code, "dispatched", host=a.host))
    if grouped and pool is not None:
        places = await queue_places(pool, grouped)
        codes = {a.id: a.code for a in run.attempts()}
        for tid in grouped:
            name, position, queued, used, size = places.get(tid, (actor.spec.tasks[codes[tid]].task_group, 0, 0, 0, 0))
            out.append(TaskWait(tid, codes[tid], "task_group", task_group=name, position=position, queued=queued,
                                used=used, size=size))  # fmt: skip
    return out
