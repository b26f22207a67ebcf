"""The master's own metrics: event-loop lag and garbage-collection pauses."""

from __future__ import annotations

import gc

from engine.master.metrics import Metrics


async def test_full_collections_are_timed_and_rendered() -> None:
    metrics = Metrics()
    metrics.start_lag_probe()
    try:
        junk = [[i] for i in range(200_000)]  # something for a full collection to walk
        gc.collect(2)
        assert metrics.gc_pause_max(2) > 0
        text = metrics.render()
        line = next(ln for ln in text.splitlines() if 'gc_pause_max_60s_seconds{generation="2"}' in ln)
        assert float(line.split()[-1]) > 0
        del junk
    finally:
        await metrics.close()
    assert metrics._on_gc not in gc.callbacks  # closed: no callback left behind
