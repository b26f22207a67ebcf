"""Every benchmark runs once at a tiny size so the scripts cannot rot, and the correctness figures each
one computes beside its timings must hold (timings themselves are not asserted)."""

from __future__ import annotations

import importlib
import itertools
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench import quick, steps
from bench.__main__ import BENCHMARKS, NOT_IN_SMOKE


def _engine(r: dict[str, Any], size: dict[str, Any]) -> None:
    assert r["throughput_all_success"] == 1.0, "a throughput workflow did not end SUCCESS"
    assert r["throughput_tasks"] == size["workflows"] * size["tasks"], "tasks lost or run twice"
    assert r["throughput_max_attempt"] == 1, "a throughput task ran again"
    assert r["many_runs_all_success"] == 1.0, "a many-runs instance or task did not end SUCCESS"
    assert r["many_runs_tasks"] == 3 * size["runs"], "many runs: tasks lost or run twice"
    assert r["many_runs_max_attempt"] == 1, "a many-runs task ran again"
    assert r["spawn_limit_processes"] == size["spawns"]
    # the statements per task come from pg_stat_statements, which the benchmark's PostgreSQL preloads
    assert r["throughput_pg_statements_per_task"] > 0, "pg_stat_statements counted no statement"
    assert "chain_gap_result_to_write_p50_ms" in r and "api_trigger_claim_to_write_p50_ms" in r
    assert r["many_runs_pg_statements_per_run"] > 0, "pg_stat_statements counted no statement of the many runs"
    for part in ("master", "worker", "api", "postgres"):
        assert r[f"many_runs_{part}_cpu_ms_per_run"] > 0, f"no CPU measured for the many runs' {part}"


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
    assert r["held_live_actors"] == size["held"], "not one live actor per instance taken over at start-up"
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


def _sql(r: dict[str, Any], size: dict[str, Any]) -> None:
    assert r["all_success"] == 1.0, "a SQL workflow did not end SUCCESS"
    assert r["runs"] == len(size["kinds"]) * (1 + size["runs"]), "a run missing"


def _resources(r: dict[str, Any], size: dict[str, Any]) -> None:
    assert r["upload_checksum_ok"] == 1.0 and r["download_checksum_ok"] == 1.0, "the large file came back changed"
    assert r["task_runs_all_success"] == 1.0, "a task using a resource did not end SUCCESS"
    assert r["task_runs"] == 2 * size["runs"], "a run missing"


def _jars(r: dict[str, Any], size: dict[str, Any]) -> None:
    assert r["all_success"] == 1.0, "an MR, Spark jar or PySpark workflow did not end SUCCESS"
    assert r["runs"] == 3 * (size["runs"] + size["first_apart"]), "a run missing"


def _steps(r: dict[str, Any], size: dict[str, Any]) -> None:
    # every step of both rounds passed every mark of its way, in order: a mark dropped from the code (or moved
    # out of order) leaves steps not marked whole, and its hops missing
    # and a step lost or merged into the next changes their count: a chain of n has n - 1, n starts n
    expected = {"chain": size["chain"] - 1, "start": size["starts"]}
    for round_, way in (("chain", steps.CHAIN_WAY), ("start", steps.START_WAY)):
        assert r[f"{round_}_steps"] == len(steps.trimmed(list(range(expected[round_])))), f"{round_} steps lost"
        assert r[f"{round_}_steps_marked_whole"] == r[f"{round_}_steps"], f"a {round_} step missed a mark"
        for a, b in itertools.pairwise(way):
            assert f"{round_} {a} -> {b} ms" in r, f"{round_}: no figure for the hop {a} -> {b}"


CORRECT: dict[str, Callable[[dict[str, Any], dict[str, Any]], None]] = {
    "engine": _engine, "steps": _steps, "failover": _failover, "registry": _registry, "scale": _scale, "hosts": _hosts,
    "spark": _spark, "sql": _sql, "jars": _jars,
    "history": _history,
    "ui": _ui,
    "resources": _resources,
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


def test_the_jars_benchmark_s_tasks_pass_their_plugins_checks(tmp_path: Path) -> None:
    """bench/jars.py is not in the tiny round (JVMs): its task definitions are checked here instead."""
    from bench.jars import KINDS, task_params
    from engine.tasks import registry

    tasks = task_params(tmp_path / "jars", tmp_path / "data")
    assert sorted(tasks) == sorted(KINDS)
    for task_type, params in tasks.values():
        registry.plugin(task_type).validate(params)


def test_the_guard_flags_the_figures_whose_ratio_to_the_spawn_limit_fell_by_more_than_a_fifth() -> None:
    reference = {"spawn_limit_per_s": 1000.0, "throughput_tasks_per_s": 600.0, "chain_gap_p50_ms": 2.0,
                 "api_trigger_p50_ms": 5.0, "many_runs_per_min": 6000.0}  # fmt: skip
    # a machine half as fast: every absolute figure halved (latencies doubled) is no fall at all
    slower = {"spawn_limit_per_s": 500.0, "throughput_tasks_per_s": 300.0, "chain_gap_p50_ms": 4.0,
              "api_trigger_p50_ms": 10.0, "many_runs_per_min": 3000.0}  # fmt: skip
    assert [r.fell for r in quick.compare(reference, slower)] == [False] * 4
    assert all(abs(r.change) < 1e-9 for r in quick.compare(reference, slower))
    # same spawn limit: throughput at 79 % (fell), chain gap 1.3x longer (fell), trigger 1.2x (within the
    # fifth), many runs better
    now = {"spawn_limit_per_s": 1000.0, "throughput_tasks_per_s": 474.0, "chain_gap_p50_ms": 2.6,
           "api_trigger_p50_ms": 6.0, "many_runs_per_min": 9000.0}  # fmt: skip
    rows = {r.figure.key: r for r in quick.compare(reference, now)}
    assert [k for k, r in rows.items() if r.fell] == ["throughput_tasks_per_s", "chain_gap_p50_ms"]
    assert rows["throughput_tasks_per_s"].now_ratio == pytest.approx(0.474)
    assert rows["chain_gap_p50_ms"].now_ratio == pytest.approx(2.6)  # spawn times: 2.6 ms at 1 ms per spawn
    assert rows["many_runs_per_min"].change == pytest.approx(0.5)
    text, fell = quick.report(reference, now)
    assert fell and "fan-out throughput, chain gap p50" in text.splitlines()[-1]
    # a figure the reference lacks is not compared
    assert [r.figure.key for r in quick.compare({"spawn_limit_per_s": 1.0, "chain_gap_p50_ms": 1.0}, now)] == [
        "chain_gap_p50_ms"
    ]


def test_the_reference_is_written_between_its_markers_and_read_back() -> None:
    result = {"spawn_limit_per_s": 900.5, "throughput_tasks_per_s": 300.0, "chain_gap_p50_ms": 3.0,
              "api_trigger_p50_ms": 8.0, "many_runs_per_min": 2000.0, "trigger_p50_ms": 4.0}  # fmt: skip
    facts = {"commit": "abc1234", "cpus": 2}
    text = quick.write_reference("# Benchmarks\n\nprose\n", quick.reference_block(result, facts))
    read = quick.read_reference(text)
    assert read is not None and read["commit"] == "abc1234"
    assert {k: read[k] for k in result if k in read} == {k: v for k, v in result.items() if k != "trigger_p50_ms"}
    replaced = quick.write_reference(text, quick.reference_block(result | {"chain_gap_p50_ms": 2.0}, facts))
    assert replaced.count(quick.BEGIN) == 1 and quick.read_reference(replaced)["chain_gap_p50_ms"] == 2.0  # type: ignore[index]
    assert quick.read_reference("# Benchmarks\n") is None


def test_the_recorded_reference_holds_every_figure_the_guard_compares() -> None:
    reference = quick.read_reference(quick.DOC.read_text())
    assert reference is not None, "docs/BENCHMARKS.md has no bench:reference block"
    assert {quick.SPAWN, quick.SPAWN_FIRST, quick.SPAWN_LAST, *(f.key for f in quick.FIGURES)} <= reference.keys()
    assert quick.insane(reference) == []


def test_a_run_whose_spawn_limit_moved_or_was_outrun_is_not_sane_and_not_compared_with() -> None:
    sane = {"spawn_limit_per_s": 900.0, "spawn_limit_first_per_s": 1000.0, "spawn_limit_last_per_s": 820.0,
            "throughput_tasks_per_s": 500.0, "chain_gap_p50_ms": 2.0, "api_trigger_p50_ms": 5.0,
            "many_runs_per_min": 6000.0}  # fmt: skip
    assert quick.insane(sane) == []
    moved = sane | {"spawn_limit_first_per_s": 95.0, "spawn_limit_last_per_s": 44.0}
    assert quick.insane(moved) == ["the spawn limit moved from 95/s to 44/s during the run"]
    outrun = sane | {"spawn_limit_per_s": 60.0}  # 500 tasks/s, each starting a bash, against 60 bash/s
    assert quick.insane(outrun) == ["the fan-out (500 tasks/s) outran the spawn limit (60/s)"]
    # an insane reference flags nothing: every figure is printed with its ratio, and the reason why
    slow = sane | {"throughput_tasks_per_s": 100.0, "chain_gap_p50_ms": 20.0}
    text, fell = quick.report(outrun, slow)
    assert not fell and "FELL" not in text and "not sane, not compared with: the fan-out" in text
    assert quick.report(sane, slow)[1]  # the same run against a sane reference fell
    text, _ = quick.report(sane, slow | {"spawn_limit_first_per_s": 2000.0})
    assert "this run is not sane: the spawn limit moved from 2,000/s to 820/s" in text


def test_the_quick_guard_runs_at_tiny_size(capsys: pytest.CaptureFixture[str]) -> None:
    """make bench-quick end to end (tiny): correctness of every workflow it ran; its timings not asserted."""
    from bench.engine import SIZES

    assert quick.main(["tiny"]) in (0, 1)
    out = capsys.readouterr().out
    result = next(json.loads(line) for line in out.splitlines() if line.startswith("{"))
    _engine(result, SIZES["tiny"])
    for f in quick.FIGURES:
        assert f.label in out
    assert "many runs, CPU ms per run: master" in out and "statements per run" in out


def test_the_hot_path_figures_run_at_tiny_size() -> None:
    """bench/hotpath.py (pure parts, no I/O): it drives both workflows to their end; timings not asserted."""
    from bench import hotpath

    result = hotpath.run("tiny")
    assert {k for k in result if k.endswith("_us")} == {
        "worker_decode_dispatch_us", "master_decode_report_us", "worker_task_environment_us", "worker_builtins_us",
        "master_workflow_fan_out_100_us", "master_workflow_chain_100_us",
    }  # fmt: skip


def test_the_steps_are_cut_at_their_way_s_ends_and_split_at_its_marks() -> None:
    way = ("a", "b", "c", "a")
    marks = [(0, "a"), (1, "x"), (3, "b"), (6, "c"), (10, "a"), (11, "b"), (15, "c"), (16, "b"), (20, "a"), (21, "b")]
    cut = steps.steps([(ns * 1_000_000, name) for ns, name in marks], way)
    assert [[ns // 1_000_000 for ns, _ in step] for step in cut] == [[0, 1, 3, 6, 10], [10, 11, 15, 16, 20]]
    assert all(steps.passes(step, way) for step in cut)
    assert not steps.passes([(0, "a"), (1, "c"), (2, "b"), (3, "a")], way)  # out of order
    # a way whose ends differ: a start that never ended is cut off by the next one, and is not whole
    start = ("s", "m", "e")
    started = steps.steps([(0, "s"), (1, "m"), (2, "s"), (3, "m"), (4, "e")], start)
    assert [[ns for ns, _ in step] for step in started] == [[0, 1], [2, 3, 4]]
    assert [steps.passes(step, start) for step in started] == [False, True]
    # the first mark of each name after the previous hop's: 3, 3, 4 and 1, 4, 5 ms -> medians
    assert steps.hops(cut, way) == {"a -> b": 2.0, "b -> c": 3.5, "c -> a": 4.5, "step": 10.0}
