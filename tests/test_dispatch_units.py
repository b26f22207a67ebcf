"""Dispatch order and host selectors (pure)."""

from __future__ import annotations

import collections
import heapq

from hypothesis import given
from hypothesis import strategies as st

from engine.master.actor import DispatchRequest
from engine.master.selectors import (
    WARM_UP_MS,
    Candidate,
    LowerWeightSelector,
    RandomSelector,
    RoundRobinSelector,
    load_weight,
)


@given(
    st.lists(st.tuples(st.integers(0, 4), st.integers(1, 50), st.integers(0, 4), st.integers(1, 10_000)), max_size=60)
)
def test_dispatch_queue_follows_dolphinscheduler_order(keys: list[tuple[int, int, int, int]]) -> None:
    heap: list[DispatchRequest] = []
    for key in keys:
        heapq.heappush(heap, DispatchRequest(key, None, "default", None))  # type: ignore[arg-type]
    popped = [heapq.heappop(heap).sort_key for _ in range(len(heap))]
    # workflow priority, then workflow instance id, then task priority, then task instance id
    assert popped == sorted(keys)


def _picks(selector, candidates, n=1000):  # type: ignore[no-untyped-def]
    return collections.Counter(selector.select(candidates).address for _ in range(n))


def test_round_robin_is_smooth_and_weighted() -> None:
    cands = [Candidate("a:1", host_weight=5), Candidate("b:1", host_weight=1), Candidate("c:1", host_weight=1)]
    sel = RoundRobinSelector()
    seq = [sel.select(cands).address for _ in range(7)]
    assert collections.Counter(seq) == {"a:1": 5, "b:1": 1, "c:1": 1}
    assert seq[:3] != ["a:1", "a:1", "a:1"]  # smooth: the heavy host is interleaved, not bunched
    assert _picks(sel, cands, 700) == {"a:1": 500, "b:1": 100, "c:1": 100}


def test_random_is_weighted() -> None:
    cands = [Candidate("a:1", host_weight=300), Candidate("b:1", host_weight=100)]
    counts = _picks(RandomSelector(seed=7), cands, 4000)
    assert 0.70 < counts["a:1"] / 4000 < 0.80
    zero = [Candidate("a:1", host_weight=0), Candidate("b:1", host_weight=0)]
    assert set(_picks(RandomSelector(seed=1), zero, 200)) == {"a:1", "b:1"}


def test_lower_weight_prefers_the_less_loaded_in_proportion() -> None:
    light = Candidate("light:1", cpu_usage=0.1, memory_usage=0.1, load_average=0.5)
    heavy = Candidate("heavy:1", cpu_usage=0.9, memory_usage=0.9, load_average=1.5)
    counts = _picks(LowerWeightSelector(), [light, heavy], 1000)
    ratio = load_weight(heavy) / load_weight(light)
    assert abs(counts["light:1"] / counts["heavy:1"] - ratio) < 0.1 * ratio


def test_lower_weight_rotates_equal_hosts_and_avoids_waiting_ones() -> None:
    idle = [Candidate(f"w{i}:1") for i in range(3)]
    assert _picks(LowerWeightSelector(), idle, 300) == {"w0:1": 100, "w1:1": 100, "w2:1": 100}
    busy = [Candidate("q:1", waiting_tasks=3), Candidate("free:1", load_average=5.0)]
    assert _picks(LowerWeightSelector(), busy, 50) == {"free:1": 50}


def test_warm_up_makes_a_new_worker_look_heavier() -> None:
    old = Candidate("old:1", load_average=1.0)
    new = Candidate("new:1", load_average=1.0, uptime_ms=WARM_UP_MS // 10)
    assert load_weight(new) == 10 * load_weight(old)
    counts = _picks(LowerWeightSelector(), [old, new], 1100)
    assert counts["old:1"] == 1000 and counts["new:1"] == 100


def test_lower_weight_running_totals_start_at_the_hosts_weight() -> None:
    # DolphinScheduler 3.1.9 dispatch/host/assign/HostWeight.java (constructor: currentWeight = weight)
    # and LowerWeightRoundRobin.doSelect (current += weight; lowest wins; winner += total).
    # a (weight 1) and b (weight 2): totals a=1, b=2 -> picks a a b a a b. Starting from 0 gives a b a ...
    a, b = Candidate("a:1", cpu_usage=0.1), Candidate("b:1", cpu_usage=0.2)
    assert (load_weight(a), load_weight(b)) == (1.0, 2.0)
    sel = LowerWeightSelector()
    assert [sel.select([a, b]).address for _ in range(6)] == ["a:1", "a:1", "b:1", "a:1", "a:1", "b:1"]
