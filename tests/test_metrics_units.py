"""The master's own metrics: event-loop lag and garbage-collection pauses."""

from __future__ import annotations

import gc
from types import SimpleNamespace

from engine.master.actor import WorkflowActor
from engine.master.gcpolicy import GcPolicy
from engine.master.state_tally import StateTally
from engine.metrics import NodeMetrics
from engine.states import WorkflowState


async def test_full_collections_are_timed_and_rendered() -> None:
    metrics = NodeMetrics("master")
    metrics.start_lag_probe()
    try:
        junk = [[i] for i in range(200_000)]  # something for a full collection to walk
        gc.collect(2)
        assert metrics.gc_pause_max(2) > 0
        text = metrics.render().decode()
        line = next(ln for ln in text.splitlines() if 'gc_pause_max_60s_seconds{generation="2"}' in ln)
        assert float(line.split()[-1]) > 0
        del junk
    finally:
        await metrics.close()
    assert metrics._on_gc not in gc.callbacks  # closed: no callback left behind


def test_the_gc_policy_freezes_after_claims_and_unfreezes_after_a_generation_of_actors_ended() -> None:
    policy = GcPolicy(min_ended=3)
    try:
        live = [[i] for i in range(1000)]
        policy.claimed(live_actors=5)
        assert gc.get_freeze_count() >= 1000  # what existed is out of the collector's sight
        for _ in range(4):
            policy.ended()
        assert policy.frozen  # 4 of the 5 that were live: not yet a generation
        policy.ended()
        assert not policy.frozen and gc.get_freeze_count() == 0
        policy.ended()  # nothing frozen: nothing to count
        assert not policy.frozen
        del live
    finally:
        policy.release()
    assert gc.get_freeze_count() == 0


def test_while_frozen_the_survivors_of_a_long_full_collection_are_frozen_after_it(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    policy = GcPolicy(min_ended=3)
    policy.install()
    try:
        policy.claimed(live_actors=5)
        frozen = gc.get_freeze_count()
        later = [[i] for i in range(1000)]  # allocated after the freeze: what actors allocate once started
        gc.collect(0)
        assert gc.get_freeze_count() == frozen  # a young collection freezes nothing
        monkeypatch.setattr("engine.master.gcpolicy.REFREEZE_PAUSE", 3600.0)  # every collection is short
        gc.collect()
        assert gc.get_freeze_count() == frozen  # a short full collection freezes nothing either
        monkeypatch.setattr("engine.master.gcpolicy.REFREEZE_PAUSE", 0.0)  # every collection is long
        gc.collect()
        assert gc.get_freeze_count() >= frozen + 1000  # survivors of a long one go out of the collector's sight
        policy.release()
        assert gc.get_freeze_count() == 0
        after = [[i] for i in range(1000)]
        gc.collect()
        assert gc.get_freeze_count() == 0  # not frozen: a full collection leaves the heap as it is
        del later, after
    finally:
        policy.uninstall()
        policy.release()
    assert policy._after_collection not in gc.callbacks


def test_the_state_tally_counts_each_run_once_in_its_current_state() -> None:
    tally = StateTally()
    tally.move(None, WorkflowState.RUNNING_EXECUTION)
    tally.move(None, WorkflowState.RUNNING_EXECUTION)
    tally.move(WorkflowState.RUNNING_EXECUTION, WorkflowState.READY_STOP)
    tally.move(WorkflowState.READY_STOP, WorkflowState.READY_STOP)  # no change: counted once still
    assert tally.by_name() == {"RUNNING_EXECUTION": 1.0, "READY_STOP": 1.0}
    tally.move(WorkflowState.READY_STOP, None)
    tally.move(WorkflowState.RUNNING_EXECUTION, WorkflowState.SUCCESS)
    tally.move(WorkflowState.SUCCESS, None)
    assert tally.by_name() == {}  # a state nobody is in is not reported as 0


async def test_an_actor_told_to_stop_leaves_the_tally_at_once_and_for_good() -> None:
    """Counted out when told to stop, not when its task ends: a task stuck in a call may be abandoned, and a
    replacement actor for the same instance may be counted first; a last write after that counts nothing."""
    tally = StateTally()
    actor = SimpleNamespace(_tally=tally, _uncounted=False, _counted=None, task=None, _kills=set(),
                            logic=SimpleNamespace(close=lambda: None),
                            run=SimpleNamespace(state=WorkflowState.RUNNING_EXECUTION))  # fmt: skip
    actor._cancel_timers = lambda: None
    actor._count_state = lambda gone=False: WorkflowActor._count_state(actor, gone)  # type: ignore[arg-type]
    actor._count_state()
    assert tally.by_name() == {"RUNNING_EXECUTION": 1.0}
    await WorkflowActor.stop(actor)  # type: ignore[arg-type]
    assert tally.by_name() == {}
    actor.run.state = WorkflowState.SUCCESS
    actor._count_state()  # the stopped actor's own last write
    actor._count_state(gone=True)  # and its end
    assert tally.by_name() == {}
