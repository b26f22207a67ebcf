"""Every benchmark runs once at a tiny size so the scripts cannot rot, and the correctness figures each
one computes beside its timings must hold (timings themselves are not asserted)."""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from typing import Any

import pytest

from bench.__main__ import BENCHMARKS, NOT_IN_SMOKE


def _engine(r: dict[str, Any], size: dict[str, Any]) -> None:
    assert r["throughput_all_success"] == 1.0, "a throughput workflow did not end SUCCESS"
    assert r["throughput_tasks"] == size["workflows"] * size["tasks"], "tasks lost or run twice"


def _failover(r: dict[str, Any], size: dict[str, Any]) -> None:
    # once per lease TTL (the benchmarks' short one and the production default), keys prefixed ttl_<n>s_
    prefixes = sorted(k.removesuffix("master_failover_gated_reruns") for k in r if k.endswith("_gated_reruns"))
    assert len(prefixes) == 2, f"expected figures for two lease TTLs, got {prefixes}"
    for p in prefixes:
        assert r[p + "master_failover_gated_reruns"] == 0.0, f"{p}: an adopted task ran again after the failover"
        # every task ran on the killed worker (the other joined later), and every one moved
        assert r[p + "worker_failover_tasks_moved"] == size["tasks"], p


def _registry(r: dict[str, Any], size: dict[str, Any]) -> None:
    """Only timings: each of its measurements raises when the event it waits for never comes."""


def _scale(r: dict[str, Any], size: dict[str, Any]) -> None:
    assert r["concurrency_live_actors"] == size["concurrency"], "not one live actor per waiting instance"
    for masters in size["masters"][1:]:
        # command slots shard the backlog: no master claimed it all
        assert r[f"claims_{masters}_masters_max_share"] < 1.0, r


def _hosts(r: dict[str, Any], size: dict[str, Any]) -> None:
    # per link delay: measured on the bridge (every workflow SUCCESS), or said why not (no sch_netem in
    # this kernel) and then measured through the delay switch, whose undelayed round runs beside it
    switched = False
    for delay in size["delays_ms"]:
        tag = f"bridge_delay_{delay}ms"
        if isinstance(r.get(tag), str):
            assert r[tag].startswith("not measured"), r[tag]
            tag, switched = f"switch_delay_{delay}ms", True
        assert r[f"{tag}_throughput_all_success"] == 1.0, f"{tag}: a workflow did not end SUCCESS"
        assert r[f"{tag}_ping_lost"] == 0, f"{tag}: pings between hosts lost"
    assert r["bridge_delay_0ms_throughput_all_success"] == 1.0, "the bridge's undelayed round must always run"
    if switched:
        assert r["switch_delay_0ms_throughput_all_success"] == 1.0, "the switch's undelayed round must run too"


def _spark(r: dict[str, Any], size: dict[str, Any]) -> None:
    assert r["all_success"] == 1.0, "a Spark workflow did not end SUCCESS"
    assert r["runs"] == 1 + 3 * (size["trivial"] + size["example"]), "a run missing"


def _history(r: dict[str, Any], size: dict[str, Any]) -> None:
    assert r["history_generated_workflow_instances"] >= size["instances"], "the generator fell short"
    assert r["history_generated_task_instances"] >= size["instances"] * 10
    for phase in ("empty", "history"):
        assert r[f"{phase}_throughput_all_success"] == 1.0, f"{phase}: a workflow did not end SUCCESS"
        assert r[f"{phase}_master_failover_gated_reruns"] == 0.0, f"{phase}: an adopted task ran again"


def _ui(r: dict[str, Any], size: dict[str, Any]) -> None:
    # each timing raises when what it waits for never shows; these say the pages stayed bounded
    assert 0 < r["instance_1000_dom_rows"] < size["tasks"], "the task table is not virtualised"
    assert r["editor_1000_dom_nodes"] > 0, "the editor drew no node"


CORRECT: dict[str, Callable[[dict[str, Any], dict[str, Any]], None]] = {
    "engine": _engine, "failover": _failover, "registry": _registry, "scale": _scale, "hosts": _hosts,
    "spark": _spark,
    "history": _history,
    "ui": _ui,
}  # fmt: skip


def test_every_benchmark_has_its_correctness_checks() -> None:
    assert sorted(CORRECT) == sorted(BENCHMARKS)


@pytest.mark.parametrize("name", [b for b in BENCHMARKS if b not in NOT_IN_SMOKE])
def test_benchmark_runs_at_tiny_size(name: str) -> None:
    module = importlib.import_module(f"bench.{name}")
    result = module.run("tiny")
    assert result["benchmark"] == name
    assert not any(math.isnan(v) for v in result.values() if isinstance(v, float)), result
    CORRECT[name](result, module.SIZES["tiny"])
