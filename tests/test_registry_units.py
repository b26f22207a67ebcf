"""Pure registry logic: key layout, slot computation, heartbeat parsing."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from registry import Heartbeat, NodeId, compute_slot, node_key
from registry.heartbeat import HostSample, LoadLimits
from registry.keys import failover_lock_key, parse_node_key
from registry.load import CpuMeter
from tests.helpers import eventually

ROOT = "/porpoise"


def test_node_keys_round_trip() -> None:
    m = NodeId("master", "10.0.0.1:5678")
    w = NodeId("worker", "10.0.0.2:1234", "etl")
    assert node_key(ROOT, m) == "/porpoise/nodes/master/10.0.0.1:5678"
    assert node_key(ROOT, w) == "/porpoise/nodes/worker/etl/10.0.0.2:1234"
    assert parse_node_key(ROOT, node_key(ROOT, m)) == m
    assert parse_node_key(ROOT, node_key(ROOT, w)) == w
    assert failover_lock_key(ROOT, m) == "/porpoise/lock/failover/master/10.0.0.1:5678"


@pytest.mark.parametrize(
    "key",
    [
        "/porpoise/nodes/master",
        "/porpoise/nodes/master/",
        "/porpoise/nodes/master/nohostport",
        "/porpoise/nodes/master/h:99999",
        "/porpoise/nodes/master/a:1/extra",
        "/porpoise/nodes/worker/h:1",
        "/porpoise/nodes/worker//h:1",
        "/porpoise/nodes/alert/h:1",
        "/other/nodes/master/h:1",
    ],
)
def test_garbage_keys_are_not_nodes(key: str) -> None:
    assert parse_node_key(ROOT, key) is None


addresses = st.lists(
    st.builds(lambda h, p: f"10.0.{h}.1:{p}", st.integers(0, 255), st.integers(1, 65535)),
    min_size=1,
    max_size=12,
    unique=True,
)


@given(addresses)
def test_slots_are_a_bijection_onto_0_to_n_minus_1(masters: list[str]) -> None:
    slots = [compute_slot(masters, me) for me in masters]
    assert sorted(s.index for s in slots) == list(range(len(masters)))
    assert {s.count for s in slots} == {len(masters)}
    # every command id is owned by exactly one master
    for command_id in range(50):
        assert sum(s.owns(command_id) for s in slots) == 1


@given(addresses, st.permutations(list(range(12))))
def test_slots_do_not_depend_on_listing_order(masters: list[str], perm: list[int]) -> None:
    shuffled = [masters[i] for i in perm if i < len(masters)]
    assert [compute_slot(masters, m) for m in masters] == [compute_slot(shuffled, m) for m in masters]


def test_unregistered_master_has_no_slot() -> None:
    slot = compute_slot(["a:1", "b:2"], "c:3")
    assert slot.count == 0 and not any(slot.owns(i) for i in range(10))


def test_heartbeat_round_trip_and_rejections() -> None:
    hb = Heartbeat(1, 2, 0.5, 0.25, 1.5, 10.0, 100.0, 42, status=1, running_tasks=3, exec_slots=8)
    assert Heartbeat.from_json(hb.to_json()) == hb
    for bad in (
        b"not json",
        b"[1,2]",
        b'{"startup_time": 1}',
        json.dumps({**json.loads(hb.to_json()), "pid": "x"}),
    ):
        with pytest.raises(ValueError):
            Heartbeat.from_json(bad)


def test_overload_limits() -> None:
    sample = HostSample(0.5, 0.5, load_average=3.0, available_memory_gb=1.0, disk_available_gb=10)
    assert sample.overload(LoadLimits(max_cpu_load_avg=2.0, reserved_memory_gb=0.3), busy=1.0) is not None
    assert sample.overload(LoadLimits(max_cpu_load_avg=4.0, reserved_memory_gb=0.3)) is None
    assert sample.overload(LoadLimits(max_cpu_load_avg=4.0, reserved_memory_gb=2.0)) is not None


def test_a_load_average_over_the_limit_holds_work_back_only_while_the_cpus_are_busy() -> None:
    limits = LoadLimits(max_cpu_load_avg=4.0, reserved_memory_gb=0.3)
    loaded = HostSample(0.2, 0.5, load_average=9.0, available_memory_gb=1.0, disk_available_gb=10)
    assert loaded.overload(limits, busy=0.5) is None  # the average lags: the cpus have room now
    assert loaded.overload(limits, busy=0.95) is not None
    assert "load average 9.00" in loaded.overload(limits, busy=0.95).reason  # type: ignore[union-attr]
    assert loaded.overload(limits, busy=0.95).hold  # type: ignore[union-attr]  # saturated: hold, not stop
    assert loaded.overload(limits) is None  # no live figure: this sample's own cpu usage (0.2)
    light = HostSample(1.0, 0.5, load_average=1.0, available_memory_gb=1.0, disk_available_gb=10)
    assert light.overload(limits, busy=1.0) is None  # busy but under the load limit: a burst
    short = HostSample(0.0, 0.9, load_average=0.0, available_memory_gb=0.1, disk_available_gb=10)
    assert "free memory 0.10 GB" in short.overload(limits, busy=0.0).reason  # type: ignore[union-attr]
    assert not short.overload(limits).hold  # type: ignore[union-attr]  # short of memory: take nothing


def test_the_cpu_meter_reports_the_busy_share_of_the_last_period() -> None:
    meter = CpuMeter(period=0.5, read=lambda: (0.0, 0.0))
    assert meter.busy is None
    meter.add(100.0, 40.0)
    assert meter.busy is None  # one sample is no interval
    meter.add(110.0, 41.0)  # 10 cpu-seconds passed, 1 of them idle
    assert meter.busy == pytest.approx(0.9)
    meter.add(120.0, 51.0)
    assert meter.busy == 0.0
    meter.add(120.0, 51.0)  # no time passed: keep the last figure
    assert meter.busy == 0.0
    with pytest.raises(ValueError):
        CpuMeter(period=0)


async def test_the_cpu_meter_samples_the_machine() -> None:
    meter = CpuMeter(period=0.05)
    meter.start()
    try:
        await eventually(lambda: meter.busy is not None, 5, "a busy share")
        assert 0.0 <= (meter.busy or 0.0) <= 1.0
    finally:
        await meter.close()
