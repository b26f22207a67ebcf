"""The logic tasks a workflow actor runs on the master instead of dispatching: CONDITIONS and SWITCH
(decided at once), SUB_PROCESS (a child instance with its own actor, possibly on another master) and
DEPENDENT (other workflows' runs over date cycles).

Nothing here waits while holding anything: a waiting task is looked at again when the state wheel's
``LogicCheck`` timer fires or (sub-workflows) when the child's master reports the child finished.
Each look is idempotent; results go back to the actor as ordinary task events, so the WorkflowRun
applies them with the same rules, persistence and fencing as a worker's report.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from core import logs
from engine.clocks import now_ms
from engine.master.store import FencedOut
from engine.master.workflow import FAILED, WARNFAILED, Status
from engine.master.workflow_messages import Attempt, LogicCheck, LogicWaiting, TaskResultEvent, TaskRunningEvent
from engine.scheduling import dependent
from engine.states import TaskState, WorkflowState
from engine.workflows import logic

if TYPE_CHECKING:
    from engine.master.actor import WorkflowActor

log = logs.get(__name__)

#: a finished child's state -> the SUB_PROCESS task's state
CHILD_RESULT = {
    WorkflowState.SUCCESS: TaskState.SUCCESS,
    WorkflowState.FAILURE: TaskState.FAILURE,
    WorkflowState.STOP: TaskState.KILL,
    WorkflowState.PAUSE: TaskState.PAUSE,
    WorkflowState.BLOCK: TaskState.FAILURE,
}


class LogicRunner:
    def __init__(
        self,
        actor: WorkflowActor,
        interval: float,
        control: Callable[[int, str], Awaitable[None]] | None = None,
        max_depth: int = 10,
    ) -> None:
        self.actor = actor
        self.interval = interval
        self.control = control
        #: a SUB_PROCESS of an instance this many sub-workflows deep fails instead of starting its child
        self.max_depth = max_depth
        self.tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def close(self) -> None:
        for task in list(self.tasks):
            task.cancel()

    # -- entry points ------------------------------------------------------------------------------

    async def run(self, a: Attempt) -> None:
        """Start or look again at logic attempt ``a``."""
        actor = self.actor
        task = actor.spec.tasks[a.code]
        try:
            if task.task_type in logic.INSTANT:
                state, skip, message = await self._decide(a)
                if not state.succeeded:
                    log.warning("logic task failed", task_instance_id=a.id, task=task.name, reason=message)
                self._finish(a, state, skip, message)
                return
            if a.state is TaskState.SUBMITTED_SUCCESS:
                actor.post(TaskRunningEvent(a.id, a.attempt, actor.me, 0, "", "", now_ms(), "logic task started"))
            if task.task_type == logic.SUB_PROCESS:
                outcome = await self._sub_workflow(a)
                wait = self.interval
            else:
                outcome = await self._dependent(a)
                wait = float(task.params.get("check_interval", 10))
            if outcome is None:
                actor.post(LogicWaiting(a.id, a.attempt, wait))
            else:
                self._finish(a, *outcome)
        except FencedOut:
            actor.post(LogicCheck(a.id, a.attempt))  # the actor's next write finds out and stops
        except (OSError, TimeoutError) as exc:
            log.warning("logic task check failed; retrying", task_instance_id=a.id, error=str(exc))
            actor.post(LogicWaiting(a.id, a.attempt, self.interval))
        except Exception as exc:  # database errors and the like: look again later
            log.warning("logic task check failed; retrying", task_instance_id=a.id, error=repr(exc))
            actor.post(LogicWaiting(a.id, a.attempt, self.interval))

    async def stop(self, a: Attempt, action: str) -> None:
        """``stop`` (a kill) or ``pause`` of a logic attempt: a child workflow gets the same request and
        its end comes back as the task's result; anything else ends here."""
        task = self.actor.spec.tasks[a.code]
        if task.task_type == logic.SUB_PROCESS:
            child, state, _ = await self.actor.store.sub_workflow_state(a.id)
            if not child:
                # its child's command may still be queued: taken out first, so the child never starts later
                why = f"parent {'stopped' if action == 'stop' else 'paused'} before the sub-workflow started"
                if not await self.actor.store.cancel_child_command(a.id, why):
                    child, state, _ = await self.actor.store.sub_workflow_state(a.id)  # claimed meanwhile?
            if child and state is not None and not WorkflowState(state).finished and self.control is not None:
                await self.control(child, action)
                self.actor.post(LogicCheck(a.id, a.attempt))
                return
            if not child:
                self._finish(a, TaskState.KILL if action == "stop" else TaskState.PAUSE, (), "")
                return
            self.actor.post(LogicCheck(a.id, a.attempt))
            return
        self._finish(a, TaskState.KILL if action == "stop" else TaskState.PAUSE, (), f"{action} requested")

    # -- helpers -----------------------------------------------------------------------------------

    def _finish(self, a: Attempt, state: TaskState, skip: tuple[int, ...], message: str) -> None:
        now = now_ms()
        self.actor.post(
            TaskResultEvent(
                a.id, a.attempt, state, 0 if state.succeeded else 1, a.start_time or now, now, self.actor.me,
                message=message, skip=skip, cause_id=f"logic {state.name}",
            )
        )  # fmt: skip

    async def _decide(self, a: Attempt) -> tuple[TaskState, tuple[int, ...], str]:
        run, spec = self.actor.run, self.actor.spec
        task = spec.tasks[a.code]
        by_name = {t.name: code for code, t in spec.tasks.items()}
        if task.task_type == logic.CONDITIONS:
            outcome = {}
            for up in spec.dag.upstream[a.code]:
                cur = run.current_of(up)
                if cur is not None and cur.state.succeeded:
                    outcome[spec.tasks[up].name] = "SUCCESS"
                elif run.status(up) in (Status.FAILED, Status.HANDLED):
                    outcome[spec.tasks[up].name] = "FAILURE"
            skip = logic.conditions_skip(task.params, outcome)
            return TaskState.SUCCESS, tuple(by_name[n] for n in skip), f"conditions {outcome}"
        # the project's parameters below the globals (secret ones stay sealed: a master holds no key)
        values = {p["prop"]: str(p["value"]) for p in self.actor.context.project_params if not p["secret"]}
        values.update({p.get("prop", ""): str(p.get("value", "")) for p in self.actor.info.global_params})
        values.update({p.get("prop", ""): str(p.get("value", "")) for p in a.var_in})
        try:
            # bounded work per condition (engine/workflows/expressions.py), but up to MAX_CASES of them:
            # in a thread, the loop runs between its steps (none takes more than a few milliseconds)
            chosen, skip = await asyncio.to_thread(logic.switch_choice, task.params, values)
        except ValueError as exc:
            return TaskState.FAILURE, (), str(exc)
        if chosen is None:
            return TaskState.FAILURE, (), "no case matched and there is no default"
        return TaskState.SUCCESS, tuple(by_name[n] for n in skip), f"switch -> {chosen}"

    async def _child_code(self, params: Any) -> int | None:
        if isinstance(params.get("workflow_code"), int):
            return int(params["workflow_code"])
        return await self.actor.store.resolve_workflow(
            self.actor.spec.project_code, params["workflow"], params.get("project")
        )

    async def _sub_workflow(self, a: Attempt) -> tuple[TaskState, tuple[int, ...], str] | None:
        actor = self.actor
        params = actor.spec.tasks[a.code].params
        child, state, error = await actor.store.sub_workflow_state(a.id)
        if child == 0 and not error:
            code = await self._child_code(params)
            if code is None:
                return TaskState.FAILURE, (), f"sub-workflow {params.get('workflow')!r} does not exist"
            start = {p.get("prop", ""): str(p.get("value", "")) for p in a.var_in}
            param = {"parentWorkflowInstanceId": actor.info.id, "parentTaskInstanceId": a.id, "StartParams": start}
            info = actor.info
            depth = await actor.store.sub_workflow_depth(info.id, self.max_depth)
            if depth >= self.max_depth:  # the child's command fails at once, with the reason
                reason = (
                    f"sub-workflows nested too deeply: this instance is {depth} levels down and"
                    f" master.max_sub_workflow_depth is {self.max_depth}"
                )
                await actor.store.refuse_sub_workflow(info.id, info.epoch, a.id, code, json.dumps(param), reason)
            else:
                await actor.store.ensure_sub_workflow(info.id, info.epoch, a.id, a.code, code, json.dumps(param))
            child, state, error = await actor.store.sub_workflow_state(a.id)
        if error:
            return TaskState.FAILURE, (), f"the sub-workflow could not start: {error}"
        if child and state is not None:
            result = CHILD_RESULT.get(WorkflowState(state))
            if result is not None:
                return result, (), f"sub-workflow instance {child} ended {WorkflowState(state).name}"
        return None

    async def _dependent(self, a: Attempt) -> tuple[TaskState, tuple[int, ...], str] | None:
        actor = self.actor
        task = actor.spec.tasks[a.code]
        params = task.params
        base = dependent.base_date(actor.info.schedule_time, actor.info.start_time, dt.datetime.now(dt.UTC))
        started = (a.start_time or now_ms()) / 1000
        elapsed = time.time() - started
        timed = task.timeout_flag and task.timeout > 0 and task.timeout_strategy in (FAILED, WARNFAILED)
        limits = [task.timeout * 60.0] if timed else []
        if params.get("timeout_seconds"):
            limits.append(float(params["timeout_seconds"]))
        if limits and elapsed > min(limits):
            return TaskState.FAILURE, (), f"dependencies not met within {min(limits):g} s"
        results = []
        for relation, items in dependent.groups(params):
            found = []
            for item in items:
                code = await self._child_code(item)
                if code is None:
                    found.append(dependent.FAILED)
                    continue
                per = [
                    await actor.store.dependent_state(code, item.get("task"), lo, hi)
                    for lo, hi in dependent.intervals(item["date_value"], base)
                ]
                found.append(dependent.item_result(per))
            results.append(dependent.combine(relation, found))
        outcome = dependent.combine(params.get("relation", "AND"), results)
        if outcome == dependent.SUCCESS:
            return TaskState.SUCCESS, (), "dependencies met"
        if outcome == dependent.FAILED:
            waiting = float(params.get("failure_waiting_time", 0)) * 60
            if params.get("failure_policy", "FAIL") == "FAIL" or elapsed >= waiting:
                return TaskState.FAILURE, (), "a dependency failed"
        return None
