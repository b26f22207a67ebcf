"""The pure workflow core: events in, exact actions out (no I/O)."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.master.workflow import CONTINUE, END, TIMEOUT_FAILED, CoreInvariantError, Status, WorkflowRun
from engine.master.workflow_messages import (
    ALERT_TASK_FAILURE,
    ALERT_TASK_RETRY,
    ALERT_TASK_SUCCESS,
    ALERT_TASK_TIMEOUT,
    RERUN_ON_RESUME,
    ArmTimer,
    Attempt,
    CancelDispatch,
    CancelHeld,
    CancelTimer,
    CreateAttempts,
    DispatchLost,
    GroupSlotGranted,
    KillTask,
    LogicCheck,
    LogicWaiting,
    PauseRequested,
    PersistTask,
    RaiseAlert,
    RetryDue,
    SendAttempt,
    SetWorkflowState,
    StopRequested,
    TaskDispatched,
    TaskResultEvent,
    TaskRunningEvent,
    TaskTimedOut,
    WorkerLost,
    WorkflowTimedOut,
)
from engine.states import (
    TASK_ACTIVE,
    InvalidTransition,
    TaskState,
    WorkflowState,
    check_task,
    check_workflow,
    task_transitions,
    workflow_transitions,
)
from engine.workflows import document
from engine.workflows.definitions import TaskSpec, WorkflowSpec
from engine.workflows.model import Dag

S, F, K = TaskState.SUCCESS, TaskState.FAILURE, TaskState.KILL


def spec(edges: dict[str, list[str]], timeout: int = 0, **task_kw: dict[str, Any]) -> WorkflowSpec:
    names = list(edges)
    codes = {n: i + 1 for i, n in enumerate(names)}
    tasks = {}
    for n in names:
        kw = dict(retries=0, retry_interval=0, timeout_flag=0, timeout_strategy=None, timeout=0)
        kw.update(task_kw.get(n, {}))
        tasks[codes[n]] = TaskSpec(
            code=codes[n], version=1, name=n, task_type="SHELL", params={"rawScript": "true"}, priority=2,
            worker_group="default", delay_time=0, environment_code=-1, **kw,
        )  # fmt: skip
    dag = Dag.build(list(codes.values()), [(codes[u], codes[n]) for n in names for u in edges[n]])
    return WorkflowSpec(1, 1, "wf", 1, [], timeout, 1, "default", 0, tasks, dag)


class Sim:
    """Drives a WorkflowRun like the actor does (ids assigned on create), and records everything."""

    def __init__(self, sp: WorkflowSpec, strategy: int = CONTINUE) -> None:
        self.spec = sp
        self.run = WorkflowRun(99, sp, strategy)
        self.ids = itertools.count(1)
        self.actions: list[Any] = []
        self.name = {t.code: t.name for t in sp.tasks.values()}
        self.timers: dict[tuple[Any, ...], Any] = {}
        self.apply(self.run.start())

    def apply(self, actions: list[Any]) -> list[Any]:
        """Perform the actions of one event as the actor would, then check the core's invariants."""
        for a in actions:
            if isinstance(a, CreateAttempts):
                for att in a.attempts:
                    self.run.bind(att, next(self.ids))
            elif isinstance(a, ArmTimer):
                self.timers[a.key] = a.event
            elif isinstance(a, CancelTimer):
                self.timers.pop(a.key, None)
        self.actions += actions
        self.run.validate()
        return actions

    def attempt(self, name: str) -> Attempt:
        return next(a for a in self.run.attempts() if self.name[a.code] == name)

    def created(self, actions: list[Any]) -> list[str]:
        return [self.name[a.code] for x in actions if isinstance(x, CreateAttempts) for a in x.attempts]

    def finish(self, name: str, state: TaskState = S, var_pool: tuple = ()) -> list[Any]:
        a = self.attempt(name)
        return self.apply(
            self.run.handle(TaskResultEvent(a.id, a.attempt, state, 0 if state is S else 1, 1, 2, "w:1", "", var_pool))
        )

    def running(self, name: str) -> list[Any]:
        a = self.attempt(name)
        return self.apply(self.run.handle(TaskRunningEvent(a.id, a.attempt, "w:1", 42, "/l", "/e", 1)))

    def fire(self, key: tuple[Any, ...]) -> list[Any]:
        return self.apply(self.run.handle(self.timers.pop(key)))


def final_state(actions: list[Any]) -> WorkflowState | None:
    done = [a.state for a in actions if isinstance(a, SetWorkflowState) and a.finished]
    return done[-1] if done else None


def test_chain_runs_in_order_and_succeeds() -> None:
    sim = Sim(spec({"a": [], "b": ["a"], "c": ["b"]}))
    assert sim.created(sim.actions) == ["a"]
    assert sim.created(sim.finish("a")) == ["b"]
    assert sim.created(sim.finish("b")) == ["c"]
    out = sim.finish("c")
    assert final_state(out) is WorkflowState.SUCCESS and sim.run.finished


def test_a_dispatch_in_doubt_found_not_taken_runs_again_as_the_next_attempt() -> None:
    sim = Sim(spec({"a": [], "b": ["a"]}))
    first = sim.attempt("a")
    sim.apply(sim.run.handle(TaskDispatched(first.id, 1, "w:1", "dispatch in doubt")))
    assert sim.run.awaits_dispatch(first.id, 1)
    # not the host it was recorded on, or not this attempt: nothing happens
    assert sim.run.handle(DispatchLost(first.id, 1, "w:2")) == []
    assert sim.run.handle(DispatchLost(first.id, 2, "w:1")) == []
    out = sim.apply(sim.run.handle(DispatchLost(first.id, 1, "w:1", "not taken: all 1 exec slots are busy")))
    assert first.state is TaskState.NEED_FAULT_TOLERANCE and not sim.run.awaits_dispatch(first.id, 1)
    assert sim.created(out) == ["a"] and sim.attempt("a").attempt == 2
    assert sim.attempt("a").retry_times == 0  # a dispatch that never reached a worker uses no retry
    second = sim.attempt("a")
    sim.apply(sim.run.handle(TaskDispatched(second.id, 2, "w:2", "dispatch accepted")))
    sim.running("a")  # a report settles the doubt: a late DispatchLost changes nothing
    assert sim.run.handle(DispatchLost(second.id, 2, "w:2")) == [] and not sim.run.awaits_dispatch(second.id, 2)
    assert sim.created(sim.finish("a")) == ["b"]


def test_the_loss_of_a_worker_incarnation_fails_only_what_that_incarnation_took() -> None:
    # a worker at w:1 restarted within its TTL: the new incarnation (key created at revision 20) took the
    # attempt; the old one's removal (revision 10), seen afterwards, must not run it again beside itself
    sim = Sim(spec({"a": []}))
    a = sim.attempt("a")
    sim.apply(sim.run.handle(TaskDispatched(a.id, 1, "w:1", "dispatch accepted", incarnation=20)))
    assert sim.run.handle(WorkerLost("w:1", incarnation=10)) == []
    assert a.state is TaskState.DISPATCH and sim.attempt("a") is a
    out = sim.apply(sim.run.handle(WorkerLost("w:1", incarnation=20)))  # its own loss: it runs again
    assert a.state is TaskState.NEED_FAULT_TOLERANCE and sim.created(out) == ["a"]


def test_the_loss_of_a_worker_fails_what_ran_there_when_the_incarnation_is_not_known() -> None:
    sim = Sim(spec({"a": [], "b": []}))
    a, b = sim.attempt("a"), sim.attempt("b")
    sim.apply(sim.run.handle(TaskDispatched(a.id, 1, "w:1", "dispatch in doubt")))  # taken by whichever
    sim.apply(sim.run.handle(TaskDispatched(b.id, 1, "w:1", "dispatch accepted", incarnation=20)))
    sim.apply(sim.run.handle(WorkerLost("w:1")))  # the sweep: no worker at w:1 any more
    assert a.state is TaskState.NEED_FAULT_TOLERANCE and b.state is TaskState.NEED_FAULT_TOLERANCE


def test_diamond_waits_for_both_branches() -> None:
    sim = Sim(spec({"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]}))
    assert sim.created(sim.finish("a")) == ["b", "c"]
    assert sim.created(sim.finish("b")) == []
    assert sim.created(sim.finish("c")) == ["d"]
    assert final_state(sim.finish("d")) is WorkflowState.SUCCESS


def test_fan_out_fan_in() -> None:
    edges = {"src": [], **{f"m{i}": ["src"] for i in range(5)}, "sink": [f"m{i}" for i in range(5)]}
    sim = Sim(spec(edges))
    assert len(sim.created(sim.finish("src"))) == 5
    for i in range(4):
        assert sim.created(sim.finish(f"m{i}")) == []
    assert sim.created(sim.finish("m4")) == ["sink"]
    assert final_state(sim.finish("sink")) is WorkflowState.SUCCESS


def test_continue_runs_independent_branches_then_fails() -> None:
    sim = Sim(spec({"a": [], "b": ["a"], "c": []}), CONTINUE)
    assert sorted(sim.created(sim.actions)) == ["a", "c"]
    out = sim.finish("a", F)
    assert sim.created(out) == [] and not [x for x in out if isinstance(x, KillTask)]
    assert final_state(sim.finish("c")) is WorkflowState.FAILURE
    assert "b" not in {sim.name[a.code] for a in sim.run.attempts()}  # never ran


def test_end_kills_running_tasks_and_submits_nothing_more() -> None:
    sim = Sim(spec({"a": [], "b": ["a"], "c": [], "d": ["c"]}), END)
    sim.running("c")
    out = sim.finish("a", F)
    assert [sim.name[k.attempt.code] for k in out if isinstance(k, KillTask)] == ["c"]
    out = sim.finish("c", K)
    assert sim.created(out) == []
    assert final_state(out) is WorkflowState.FAILURE


def test_retries_until_exhausted_each_a_new_attempt() -> None:
    sim = Sim(spec({"a": []}, a={"retries": 2, "retry_interval": 0}))
    first = sim.attempt("a")
    out = sim.finish("a", F)
    second = sim.attempt("a")
    assert sim.created(out) == ["a"] and (second.attempt, second.retry_times) == (2, 1) and second.id != first.id
    sim.finish("a", F)
    third = sim.attempt("a")
    assert (third.attempt, third.retry_times) == (3, 2)
    out = sim.finish("a", F)
    assert sim.created(out) == [] and final_state(out) is WorkflowState.FAILURE


def test_retry_interval_waits_on_the_wheel_then_succeeds() -> None:
    sim = Sim(spec({"a": [], "b": ["a"]}, a={"retries": 1, "retry_interval": 2}))
    out = sim.finish("a", F)
    timer = next(x for x in out if isinstance(x, ArmTimer))
    assert timer.delay == 120.0 and timer.event == RetryDue(sim.attempt("a").code)
    assert final_state(out) is None and sim.created(out) == []
    assert sim.created(sim.fire(timer.key)) == ["a"]
    assert sim.created(sim.finish("a")) == ["b"]
    assert final_state(sim.finish("b")) is WorkflowState.SUCCESS


@pytest.mark.parametrize(("strategy", "alerts"), [(0, 1), (2, 1), (1, 0)])
def test_task_timeout_strategies(strategy: int, alerts: int) -> None:
    sim = Sim(spec({"a": []}, a={"timeout_flag": 1, "timeout": 5, "timeout_strategy": strategy}))
    out = sim.running("a")
    timers = [x for x in out if isinstance(x, ArmTimer)]
    # WARN and WARNFAILED alert from the master; FAILED (and the FAILED half of WARNFAILED) is
    # enforced by the worker through the dispatch's timeout_seconds
    assert len(timers) == alerts
    if timers:
        assert timers[0].delay == 300.0
        fired = sim.fire(timers[0].key)
        assert [type(x) for x in fired] == [RaiseAlert]
    out = sim.finish("a")
    assert any(isinstance(x, CancelTimer) for x in out)


def test_workflow_timeout_alerts_and_keeps_running() -> None:
    sim = Sim(spec({"a": []}, timeout=10))
    assert sim.timers[("workflow-timeout",)] == WorkflowTimedOut()
    fired = sim.fire(("workflow-timeout",))
    assert [type(x) for x in fired] == [RaiseAlert] and not sim.run.finished


def test_workflow_timeout_failed_alerts_stops_the_run_and_fails_it() -> None:
    sp = spec({"a": [], "b": ["a"], "c": []}, timeout=10)
    sim = Sim(dataclasses.replace(sp, timeout_strategy=TIMEOUT_FAILED))
    sim.running("a")
    fired = sim.fire(("workflow-timeout",))
    assert isinstance(fired[0], RaiseAlert) and "it fails" in fired[0].content
    assert sorted(sim.name[k.attempt.code] for k in fired if isinstance(k, KillTask)) == ["a", "c"]
    assert sim.run.state is WorkflowState.READY_STOP
    sim.finish("a", K)
    assert final_state(sim.finish("c", K)) is WorkflowState.FAILURE  # not STOP: the time limit failed it


def test_workflow_timeout_counts_the_time_spent_before_a_takeover() -> None:
    run = WorkflowRun(99, spec({"a": []}, timeout=10), CONTINUE)
    run.elapsed = 450.0
    timers = [a for a in run.start() if isinstance(a, ArmTimer) and a.key == ("workflow-timeout",)]
    assert [t.delay for t in timers] == [150.0]
    run = WorkflowRun(99, spec({"a": []}, timeout=10), CONTINUE)
    run.elapsed = 9999.0
    assert [a.delay for a in run.start() if isinstance(a, ArmTimer)] == [0.0]  # overdue: at once


def test_stop_kills_and_ends_stop() -> None:
    sim = Sim(spec({"a": [], "b": ["a"], "c": []}))
    sim.running("a")
    out = sim.apply(sim.run.handle(StopRequested()))
    assert sorted(sim.name[k.attempt.code] for k in out if isinstance(k, KillTask)) == ["a", "c"]
    assert sim.run.state is WorkflowState.READY_STOP
    sim.finish("a", K)
    out = sim.finish("c", K)
    assert final_state(out) is WorkflowState.STOP


def test_pause_lets_running_tasks_finish_and_submits_nothing() -> None:
    sim = Sim(spec({"a": [], "b": ["a"]}))
    sim.apply(sim.run.handle(PauseRequested()))
    out = sim.finish("a")
    assert sim.created(out) == [] and final_state(out) is WorkflowState.PAUSE


def test_stale_and_duplicate_reports_change_nothing() -> None:
    sim = Sim(spec({"a": []}, a={"retries": 1, "retry_interval": 0}))
    old = sim.attempt("a")
    sim.finish("a", F)
    new = sim.attempt("a")
    assert sim.run.handle(TaskResultEvent(old.id, old.attempt, S, 0, 1, 2)) == []
    assert sim.run.handle(TaskRunningEvent(old.id, old.attempt, "w", 1, "", "", 1)) == []
    assert sim.run.handle(TaskResultEvent(12345, 1, S, 0, 1, 2)) == []
    sim.finish("a")
    assert sim.run.handle(TaskResultEvent(new.id, new.attempt, F, 1, 1, 2)) == []  # duplicate after finish
    assert sim.run.state is WorkflowState.SUCCESS


def test_dispatched_after_running_does_not_regress() -> None:
    sim = Sim(spec({"a": []}))
    a = sim.attempt("a")
    out = sim.apply(sim.run.handle(TaskDispatched(a.id, a.attempt, "w:1")))
    assert [x.state for x in out if isinstance(x, PersistTask)] == [TaskState.DISPATCH]
    sim.running("a")
    assert sim.run.handle(TaskDispatched(a.id, a.attempt, "w:2")) == []


def test_upstream_out_params_flow_downstream_earliest_wins() -> None:
    sim = Sim(spec({"a": [], "b": [], "c": ["a", "b"]}))
    sim.finish(
        "b", var_pool=({"prop": "x", "direct": "OUT", "value": "from-b"}, {"prop": "y", "direct": "OUT", "value": ""})
    )
    sim.finish(
        "a", var_pool=({"prop": "x", "direct": "OUT", "value": "from-a"}, {"prop": "y", "direct": "OUT", "value": "ya"})
    )
    c = sim.attempt("c")
    assert {p["prop"]: p["value"] for p in c.var_in} == {"x": "from-b", "y": "ya"}
    assert all(p["direct"] == "IN" for p in c.var_in)


def test_transition_tables_refuse_illegal_moves() -> None:
    with pytest.raises(InvalidTransition):
        check_task(1, TaskState.SUCCESS, TaskState.RUNNING_EXECUTION, "late running")
    with pytest.raises(InvalidTransition):
        check_workflow(1, WorkflowState.RUNNING_EXECUTION, WorkflowState.PAUSE, "skip READY_PAUSE")
    assert set(task_transitions()) == set(TaskState) and set(workflow_transitions()) == set(WorkflowState)


def test_an_event_asking_for_an_illegal_transition_ends_the_run_s_driver() -> None:
    # the handler may have changed the run in memory already: dropping its actions would let memory and
    # the database diverge, so the error escapes (the actor ends and the instance is recovered)
    sim = Sim(spec({"a": []}))
    a = sim.attempt("a")
    sim.apply(sim.run.handle(TaskDispatched(a.id, a.attempt, "w:1")))
    with pytest.raises(InvalidTransition):
        sim.run.handle(TaskResultEvent(a.id, a.attempt, TaskState.PAUSE, 0, 1, 2))


# -- property: no event sequence leads to an illegal state ----------------------------------------


@st.composite
def dags(draw: Any) -> dict[str, list[str]]:
    n = draw(st.integers(1, 7))
    names = [f"t{i}" for i in range(n)]
    return {
        name: draw(st.lists(st.sampled_from(names[:i]), unique=True, max_size=3)) if i else []
        for i, name in enumerate(names)
    }


@settings(max_examples=300, deadline=None)
@given(
    dags(),
    st.sampled_from([END, CONTINUE]),
    st.lists(st.tuples(st.integers(0, 9), st.integers(0, 50)), max_size=80),
    st.integers(0, 2),
)
def test_property_random_events_never_break_the_tables(
    edges: dict[str, list[str]], strategy: int, script: list[tuple[int, int]], retries: int
) -> None:
    sp = spec(edges, **{n: {"retries": retries, "retry_interval": 1} for n in edges})
    sim = Sim(sp, strategy)  # any InvalidTransition raised inside fails the test
    for kind, pick in script:
        if sim.run.finished:
            break
        known = list(sim.run.by_id.values())
        target = known[pick % len(known)] if known else None
        if kind in (0, 1, 2) and target is not None:
            state = (S, F, K)[kind]
            sim.apply(sim.run.handle(TaskResultEvent(target.id, target.attempt, state, 0, 1, 2)))
        elif kind == 3 and target is not None:
            sim.apply(sim.run.handle(TaskRunningEvent(target.id, target.attempt, "w", 1, "", "", 1)))
        elif kind == 4 and target is not None:
            sim.apply(sim.run.handle(TaskDispatched(target.id, target.attempt, "w")))
        elif kind == 5 and sim.timers:
            sim.fire(sorted(sim.timers, key=str)[pick % len(sim.timers)])
        elif kind == 6:
            sim.apply(sim.run.handle(StopRequested()))
        elif kind == 7:
            sim.apply(sim.run.handle(PauseRequested()))
        elif kind == 8 and target is not None:
            sim.apply(sim.run.handle(TaskTimedOut(target.id, target.attempt)))
        # at most one live attempt per task, always
        for code in sp.tasks:
            live = [a for a in sim.run.by_id.values() if a.code == code and a.state in TASK_ACTIVE]
            assert len(live) <= 1
        # nothing ready is left unsubmitted (after a success, only the finished task's dependents are checked)
        if not sim.run.finished and sim.run._submitting():
            assert not [sim.name[c] for c in sp.dag.topological() if sim.run._ready(c)]
    # drain: every live attempt reports, every timer fires -> the instance always reaches a final state
    for _ in range(200):
        if sim.run.finished:
            break
        active = sim.run.active()
        if active:
            a = active[0]
            sim.apply(sim.run.handle(TaskResultEvent(a.id, a.attempt, S, 0, 1, 2)))
        elif sim.timers:
            sim.fire(next(iter(sim.timers)))
        else:
            break
    assert sim.run.finished and sim.run.state.finished
    assert final_state(sim.actions) is sim.run.state


@pytest.mark.parametrize(
    ("flag", "minutes", "strategy", "seconds"),
    [(1, 2, 1, 120), (1, 2, 2, 120), (1, 2, 0, 0), (0, 2, 1, 0), (1, 0, 1, 0)],
)
def test_dispatch_timeout_is_enforced_by_the_worker_for_failed_strategies(
    flag: int, minutes: int, strategy: int, seconds: int
) -> None:
    from engine.master.workflow import dispatch_timeout

    sp = spec({"a": []}, a={"timeout_flag": flag, "timeout": minutes, "timeout_strategy": strategy})
    assert dispatch_timeout(next(iter(sp.tasks.values()))) == seconds


# -- disabled (DolphinScheduler's flag = NO, "forbidden") tasks ---------------------------------------
# WorkflowExecuteRunnable.isTaskDepsComplete / setIndirectDepList (3.1.9, 3.2.2): a forbidden upstream is
# replaced by its own upstream tasks; the forbidden task itself gets no task instance.


def test_a_disabled_task_is_never_attempted_and_its_downstream_waits_for_its_upstream() -> None:
    sim = Sim(spec({"a": [], "b": ["a"], "c": ["b"]}, b={"disabled": True}))
    assert sim.created(sim.actions) == ["a"]
    out = sim.finish("a", var_pool=({"prop": "x", "direct": "OUT", "value": "1"},))
    assert sim.created(out) == ["c"]  # straight through b
    assert sim.attempt("c").var_in == [{"prop": "x", "direct": "IN", "value": "1"}]  # a's values reach c
    assert final_state(sim.finish("c")) is WorkflowState.SUCCESS
    assert sorted(sim.name[c] for c in (a.code for a in sim.run.attempts())) == ["a", "c"]


def test_disabled_roots_and_chains_are_looked_through() -> None:
    sim = Sim(spec({"a": [], "b": ["a"], "c": ["b"], "d": ["c"], "e": []}, a={"disabled": True}, c={"disabled": True}))
    assert sorted(sim.created(sim.actions)) == ["b", "e"]  # a disabled root: b starts at once
    assert sim.created(sim.finish("b")) == ["d"]
    sim.finish("e")
    assert final_state(sim.finish("d")) is WorkflowState.SUCCESS


def test_a_failure_upstream_of_a_disabled_task_still_holds_its_downstream() -> None:
    sim = Sim(spec({"a": [], "b": ["a"], "c": ["b"], "x": []}, b={"disabled": True}))
    sim.finish("x")
    out = sim.finish("a", F)
    assert sim.created(out) == [] and final_state(out) is WorkflowState.FAILURE
    assert "c" not in {sim.name[c] for c in (a.code for a in sim.run.attempts())}


def test_only_disabled_tasks_succeed_at_once() -> None:
    sim = Sim(spec({"a": [], "b": ["a"]}, a={"disabled": True}, b={"disabled": True}))
    assert sim.created(sim.actions) == [] and final_state(sim.actions) is WorkflowState.SUCCESS


def test_the_workflow_document_carries_disabled_both_ways() -> None:
    doc = document.to_document(spec({"a": [], "b": ["a"]}, b={"disabled": True}), "p")
    assert [t.get("disabled", False) for t in doc["tasks"]] == [False, True]
    assert [t.disabled for t in document.parse(doc).tasks] == [False, True]
    doc["tasks"][1]["disabled"] = "yes"
    with pytest.raises(ValueError, match=r"tasks\[1\]\.disabled"):
        document.parse(doc)


def test_the_application_a_running_task_announces_is_persisted_once_known() -> None:
    """The worker sends RUNNING again when the task's Spark application is known: only its fields are
    written; an application reported with the result is written with it; a stale one is dropped."""
    sim = Sim(spec({"a": [], "b": []}))
    a = sim.attempt("a")
    sim.running("a")
    again = sim.run.handle(TaskRunningEvent(a.id, a.attempt, "w:1", 42, "/l", "/e", 1, app_id="app-1", app_link="h"))
    assert [(type(x), x.state, x.fields) for x in again] == [
        (PersistTask, TaskState.RUNNING_EXECUTION, (("app_id", "app-1"), ("app_link", "h")))
    ]
    b = sim.attempt("b")
    done = sim.run.handle(TaskResultEvent(b.id, b.attempt, S, 0, 1, 2, app_id="app-2", app_link="u"))
    persisted = dict(next(x for x in done if isinstance(x, PersistTask)).fields)
    assert (persisted["app_id"], persisted["app_link"]) == ("app-2", "u")
    sim.finish("a")
    assert sim.run.handle(TaskRunningEvent(a.id, a.attempt, "w:1", 42, "/l", "/e", 1, app_id="app-3")) == []


# -- retry timers and task timeouts are re-armed from the database by a new owner -------------------

NOW = 1_000_000.0  # the taking-over master's clock (epoch seconds)


def test_a_retry_waiting_when_the_owner_died_is_re_armed_by_the_new_owner() -> None:
    sp = spec({"a": [], "b": ["a"]}, a={"retries": 2, "retry_interval": 1})
    failed = Attempt(1, 1, 0, TaskState.FAILURE, id=5, host="w:1", end_time=int((NOW - 20) * 1000))
    run = WorkflowRun(99, sp, CONTINUE, WorkflowState.RUNNING_EXECUTION, [failed])
    actions = run.start(now=NOW)
    assert [a for a in actions if isinstance(a, ArmTimer)] == [ArmTimer(("retry", 1), 40.0, RetryDue(1))]
    assert not run.finished and not any(isinstance(a, SetWorkflowState) for a in actions)
    (created,) = [a for a in run.handle(RetryDue(1)) if isinstance(a, CreateAttempts)]
    assert [(x.code, x.attempt, x.retry_times) for x in created.attempts] == [(1, 2, 1)]


def test_a_retry_overdue_at_the_takeover_runs_at_once_and_one_without_retries_left_fails() -> None:
    sp = spec({"a": [], "b": []}, a={"retries": 1, "retry_interval": 1}, b={"retries": 1, "retry_interval": 1})
    overdue = Attempt(1, 1, 0, TaskState.FAILURE, id=5, end_time=int((NOW - 600) * 1000))
    spent = Attempt(2, 2, 1, TaskState.FAILURE, id=6, end_time=int((NOW - 5) * 1000))
    run = WorkflowRun(99, sp, CONTINUE, WorkflowState.RUNNING_EXECUTION, [overdue, spent])
    actions = run.start(now=NOW)
    created = [x for a in actions if isinstance(a, CreateAttempts) for x in a.attempts]
    assert [(x.code, x.attempt) for x in created] == [(1, 2)]
    assert run.status(2) is Status.FAILED and not any(isinstance(a, ArmTimer) for a in actions)


def test_a_retry_cancelled_by_a_pause_runs_after_the_resume() -> None:
    sp = spec({"a": []}, a={"retries": 1, "retry_interval": 1})
    sim = Sim(sp)
    sim.running("a")
    sim.finish("a", TaskState.FAILURE)
    assert ("retry", 1) in sim.timers
    sim.apply(sim.run.handle(PauseRequested()))
    assert sim.run.state is WorkflowState.PAUSE
    taken_back = [dataclasses.replace(a) for a in sim.run.attempts()]
    resumed = WorkflowRun(99, sp, CONTINUE, WorkflowState.RUNNING_EXECUTION, taken_back, rerun=RERUN_ON_RESUME)
    actions = resumed.start(now=NOW)
    assert [(x.code, x.attempt) for a in actions if isinstance(a, CreateAttempts) for x in a.attempts] == [(1, 2)]
    assert not resumed.finished


def test_a_warn_timeout_of_an_adopted_running_attempt_is_re_armed() -> None:
    sp = spec({"a": []}, a={"timeout_flag": 1, "timeout": 2, "timeout_strategy": 0})
    running = Attempt(1, 1, 0, TaskState.RUNNING_EXECUTION, id=5, host="w:1", start_time=int((NOW - 30) * 1000))
    run = WorkflowRun(99, sp, CONTINUE, WorkflowState.RUNNING_EXECUTION, [running])
    actions = run.start(now=NOW)
    assert ArmTimer(("task-timeout", 5), 90.0, TaskTimedOut(5, 1)) in actions


# -- stopping: kills are resent until the results arrive; late dispatches are killed ------------------


def _kills(actions: list[Any]) -> list[int]:
    return sorted(a.attempt.id for a in actions if isinstance(a, KillTask))


def test_a_stop_resends_its_kills_until_the_results_arrive() -> None:
    sim = Sim(spec({"a": [], "b": []}))
    sim.running("a")
    sim.running("b")
    first = sim.apply(sim.run.handle(StopRequested()))
    assert _kills(first) == [1, 2] and ("kill-resend",) in sim.timers
    sim.finish("a", K)  # a's result is in; b's kill was lost (an RPC error, a worker that was busy)
    again = sim.fire(("kill-resend",))
    assert _kills(again) == [2] and ("kill-resend",) in sim.timers
    sim.finish("b", K)
    assert sim.run.state is WorkflowState.STOP


def test_a_second_stop_of_a_stopping_run_sends_the_kills_again() -> None:
    sim = Sim(spec({"a": []}))
    sim.running("a")
    sim.apply(sim.run.handle(StopRequested()))
    assert _kills(sim.apply(sim.run.handle(StopRequested("api stop again")))) == [1]


def test_an_attempt_dispatched_after_the_stop_is_killed() -> None:
    sim = Sim(spec({"a": []}))
    a = sim.attempt("a")  # queued in the dispatcher (or in flight): no host to send a kill to yet
    assert _kills(sim.apply(sim.run.handle(StopRequested()))) == [1]
    assert _kills(sim.apply(sim.run.handle(TaskDispatched(a.id, a.attempt, "w:1")))) == [1]
    assert a.host == "w:1"
    assert _kills(sim.apply(sim.run.handle(TaskRunningEvent(a.id, a.attempt, "w:1", 7, "", "", 1)))) == [1]


def _cancelled(actions: list[Any]) -> list[int]:
    return sorted(a.id for x in actions if isinstance(x, CancelDispatch) for a in x.attempts)


def test_a_stop_cancels_the_attempts_still_queued_for_a_worker_and_ends_stop() -> None:
    # a is queued in the dispatcher (no live worker in its group, say), b runs: the stop drops a from the
    # queue (the dispatcher answers with a KILL result) instead of waiting for a dispatch that never comes
    sim = Sim(spec({"a": [], "b": []}))
    a = sim.attempt("a")
    sim.running("b")
    assert sim.run.wants_dispatch(a.id, a.attempt)
    out = sim.apply(sim.run.handle(StopRequested()))
    assert _cancelled(out) == [a.id]  # b has a host: it is killed there, not cancelled
    assert not sim.run.wants_dispatch(a.id, a.attempt)
    assert _cancelled(sim.fire(("kill-resend",))) == [a.id]  # again on every resend while it is queued
    assert _cancelled(sim.apply(sim.run.handle(StopRequested("again")))) == [a.id]
    sim.finish("b", K)
    out = sim.apply(sim.run.handle(TaskResultEvent(a.id, a.attempt, K, -1, 0, 3, message="stopped before dispatch")))
    assert final_state(out) is WorkflowState.STOP


def test_a_stopping_run_taken_over_cancels_its_queued_attempts() -> None:
    sp = spec({"a": []})
    queued = Attempt(1, 1, 0, TaskState.SUBMITTED_SUCCESS, id=5)
    run = WorkflowRun(99, sp, CONTINUE, WorkflowState.READY_STOP, [queued])
    assert _cancelled(run.start(now=NOW)) == [5] and not run.wants_dispatch(5, 1)


def test_a_stopping_run_taken_over_sends_its_kills() -> None:
    sp = spec({"a": []})
    running = Attempt(1, 1, 0, TaskState.RUNNING_EXECUTION, id=5, host="w:1")
    run = WorkflowRun(99, sp, CONTINUE, WorkflowState.READY_STOP, [running])
    actions = run.start(now=NOW)
    assert _kills(actions) == [5] and any(isinstance(a, ArmTimer) and a.key == ("kill-resend",) for a in actions)


# -- task-level alerts (a task's alert_on and alert group) -------------------------------------------


def _task_alerts(actions: list[Any]) -> list[RaiseAlert]:
    return [x for x in actions if isinstance(x, RaiseAlert) and x.task_instance_id]


def _fail(sim: Sim, name: str, tail: str) -> list[Any]:
    a = sim.attempt(name)
    ev = TaskResultEvent(a.id, a.attempt, F, 1, 1, 2, "w:1", "/l", log_tail=tail)
    return sim.apply(sim.run.handle(ev))


def test_a_failed_attempt_with_a_retry_left_raises_a_retry_alert_then_the_last_one_a_failure_alert() -> None:
    kw = {"retries": 1, "retry_interval": 0, "alert_on": frozenset({"retry", "failure"}), "alert_group_id": 7}
    sim = Sim(spec({"a": []}, a=kw))
    first = sim.attempt("a")
    out = _fail(sim, "a", "step 1\nboom 1")
    [retry] = _task_alerts(out)
    assert (retry.alert_type, retry.alert_group_id, retry.task_instance_id) == (ALERT_TASK_RETRY, 7, first.id)
    assert "task a" in retry.title and "attempt 1" in retry.content and "worker w:1" in retry.content
    assert retry.content.endswith("last log lines:\nstep 1\nboom 1")
    # recorded with the attempt's end: the same batch of actions persists the end and its log tail
    persist = next(x for x in out if isinstance(x, PersistTask))
    assert dict(persist.fields)["log_tail"] == "step 1\nboom 1"
    second = sim.attempt("a")
    out = _fail(sim, "a", "boom 2")
    [failure] = _task_alerts(out)
    assert (failure.alert_type, failure.task_instance_id) == (ALERT_TASK_FAILURE, second.id)
    assert "attempt 2" in failure.content and failure.content.endswith("boom 2")
    assert final_state(out) is WorkflowState.FAILURE


def test_task_alerts_only_for_the_ends_the_task_chose() -> None:
    sim = Sim(spec({"a": [], "b": []}, a={"alert_on": frozenset({"success"})}, b={"retries": 1}))
    out = sim.finish("a")
    [ok] = _task_alerts(out)
    assert ok.alert_type == ALERT_TASK_SUCCESS and ok.alert_group_id is None  # the instance's warning group
    assert _task_alerts(sim.finish("b", F)) == [] and _task_alerts(sim.finish("b", F)) == []


def test_a_stopped_retry_is_a_failure_alert() -> None:
    sim = Sim(spec({"a": []}, a={"retries": 3, "retry_interval": 5, "alert_on": frozenset({"retry", "failure"})}))
    sim.apply(sim.run.handle(StopRequested()))
    out = _fail(sim, "a", "x")  # its result after the stop: no retry runs any more
    assert [x.alert_type for x in _task_alerts(out)] == [ALERT_TASK_FAILURE]


def test_a_warn_timeout_raises_the_task_s_timeout_alert() -> None:
    timeout = {"timeout_flag": 1, "timeout": 5, "timeout_strategy": 0}
    sim = Sim(spec({"a": []}, a={**timeout, "alert_on": frozenset({"timeout"}), "alert_group_id": 3}))
    out = sim.running("a")
    fired = sim.fire(next(x for x in out if isinstance(x, ArmTimer)).key)
    assert [(x.alert_type, x.alert_group_id) for x in fired] == [(ALERT_TASK_TIMEOUT, None), (ALERT_TASK_TIMEOUT, 3)]
    assert "worker w:1" in fired[1].content and fired[1].task_instance_id == sim.attempt("a").id
    sim = Sim(spec({"a": []}, a={**timeout, "alert_on": frozenset({"timeout"})}))
    fired = sim.fire(next(x for x in sim.running("a") if isinstance(x, ArmTimer)).key)
    assert len(fired) == 1 and fired[0].task_instance_id  # to the warning group: one alert, the task's


def test_task_alert_fields_survive_a_save_and_a_get() -> None:
    sp = spec({"a": []}, a={"alert_on": frozenset({"retry", "failure"}), "alert_group_id": 4, "alert_group": "ops"})
    item = document.to_document(sp, "p")["tasks"][0]
    assert (item["alert_on"], item["alert_group"]) == (["failure", "retry"], "ops")
    parsed = document.parse(document.to_document(sp, "p")).tasks[0]
    assert (parsed.alert_on, parsed.alert_group) == (("failure", "retry"), "ops")
    plain = document.to_document(spec({"a": []}), "p")["tasks"][0]
    assert not {"alert_on", "alert_group"} & set(plain)


# -- the core's invariants (WorkflowRun.validate, called by Sim after every event) --------------------


def _corrupt_active_attempt_finished(sim: Sim) -> None:
    sim.attempt("a").state = TaskState.FAILURE  # its node still says ACTIVE


def _corrupt_counts(sim: Sim) -> None:
    sim.run.counts[Status.FAILED] += 1


def _corrupt_status_behind_the_table(sim: Sim) -> None:
    sim.run.nodes[sim.attempt("a").code].status = Status.SUCCEEDED  # no success order, counts unchanged


def _corrupt_ready_but_not_submitted(sim: Sim) -> None:
    sim.finish("a")
    b = sim.run.nodes[sim.attempt("b").code]
    sim.run._place(b, Status.NEW)  # b is forgotten: ready, yet nothing submits it
    sim.run._active.pop(b.code, None)
    b.attempt = None


def _corrupt_retry_while_paused(sim: Sim) -> None:
    sim.finish("a", F)  # a waits for its retry
    sim.run.state = WorkflowState.READY_PAUSE


def _corrupt_finished_with_work_left(sim: Sim) -> None:
    sim.run.finished, sim.run.state = True, WorkflowState.SUCCESS


def _corrupt_two_live_attempts(sim: Sim) -> None:
    old = sim.attempt("a")
    sim.finish("a", F)
    sim.fire(("retry", old.code))
    old.state = TaskState.RUNNING_EXECUTION  # the failed attempt is live again beside its retry


@pytest.mark.parametrize(
    "corrupt",
    [
        _corrupt_active_attempt_finished,
        _corrupt_counts,
        _corrupt_status_behind_the_table,
        _corrupt_ready_but_not_submitted,
        _corrupt_retry_while_paused,
        _corrupt_finished_with_work_left,
        _corrupt_two_live_attempts,
    ],
)
def test_validate_catches_a_corrupted_core(corrupt: Any) -> None:
    sim = Sim(spec({"a": [], "b": ["a"]}, a={"retries": 1, "retry_interval": 1}))
    sim.run.validate()  # sound
    corrupt(sim)
    with pytest.raises(CoreInvariantError):
        sim.run.validate()


def test_a_node_status_change_off_the_table_is_an_invalid_transition() -> None:
    sim = Sim(spec({"a": []}))
    node = sim.run.nodes[sim.attempt("a").code]
    sim.finish("a")
    with pytest.raises(InvalidTransition, match="SUCCEEDED -> FAILED"):
        sim.run._set(node, Status.FAILED, "test")


# -- timers and task group holding are the core's ----------------------------------------------------


def test_the_core_keeps_the_keys_of_the_timers_it_armed() -> None:
    sim = Sim(spec({"a": []}, a={"retries": 1, "retry_interval": 1}))
    a = sim.attempt("a")
    sim.finish("a", F)
    assert sim.run.timers == {("retry", a.code)}
    sim.apply(sim.run.handle(StopRequested()))  # the stop cancels the retry: its key goes
    assert ("retry", a.code) not in sim.run.timers and sim.run.finished


def test_a_logic_task_still_waiting_is_looked_at_again_by_a_timer_of_the_core() -> None:
    sim = Sim(spec({"a": []}))
    a = sim.attempt("a")
    out = sim.apply(sim.run.handle(LogicWaiting(a.id, a.attempt, 7.0)))
    assert out == [ArmTimer(("logic", a.id), 7.0, LogicCheck(a.id, a.attempt))]
    assert ("logic", a.id) in sim.run.timers
    assert sim.run.handle(LogicWaiting(a.id, a.attempt + 1, 7.0)) == []  # not its current attempt
    sim.finish("a")
    assert sim.run.handle(LogicWaiting(a.id, a.attempt, 7.0)) == []  # finished meanwhile


def _held_sim() -> tuple[Sim, Attempt]:
    sp = spec({"a": []})
    run = WorkflowRun(99, sp, CONTINUE)
    sim = Sim.__new__(Sim)
    sim.spec, sim.run, sim.ids, sim.actions, sim.timers = sp, run, itertools.count(1), [], {}
    sim.name = {t.code: t.name for t in sp.tasks.values()}
    (created,) = [x for x in run.start() if isinstance(x, CreateAttempts)]
    (a,) = created.attempts
    run.bind(a, next(sim.ids), held=True)  # its task group is full
    run.validate()
    return sim, a


def test_an_attempt_held_by_its_task_group_is_sent_once_its_slot_is_granted() -> None:
    sim, a = _held_sim()
    assert sim.run.held() == [a] and sim.run.is_held(a)
    assert sim.apply(sim.run.handle(GroupSlotGranted(a.id))) == [SendAttempt(a)]
    assert sim.run.held() == [] and sim.run.handle(GroupSlotGranted(a.id)) == []  # granted once


def test_a_stop_drops_an_attempt_still_held_instead_of_killing_it() -> None:
    sim, a = _held_sim()
    out = sim.apply(sim.run.handle(StopRequested()))
    assert CancelHeld(a) in out and not [x for x in out if isinstance(x, KillTask)]
    assert sim.run.handle(GroupSlotGranted(a.id)) == []  # admitted after the stop: never sent
    out = sim.apply(sim.run.handle(TaskResultEvent(a.id, a.attempt, K, -1, 0, 2)))  # the actor's KILL report
    assert final_state(out) is WorkflowState.STOP


def test_a_kill_decided_before_the_group_held_the_attempt_releases_it() -> None:
    sim, a = _held_sim()
    assert sim.run.release_held(a) and not sim.run.is_held(a) and not sim.run.release_held(a)
