"""The master's own metrics: event-loop lag and garbage-collection pauses."""

from __future__ import annotations

import gc

from engine.master.gcpolicy import GcPolicy
from engine.metrics import NodeMetrics


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
