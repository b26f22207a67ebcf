"""``python -m bench.steps [tiny|full]``: where the time of one step of a chain and of one API start goes, hop by
hop, from the step marks the nodes record (core/marks.py, turned on by ``debug.step_marks``).

Two rounds on one stack, one thing at a time so the marks of all nodes can be put in one timeline (one
machine, one wall clock): a chain of SHELL ``true`` tasks (a step: a task's exit seen by the worker -> the
next task's exit) and API starts of a one-task workflow (a step: the API's start handler -> the task's exit).
Each step is split at every mark in it; the figure of a hop (``a -> b``) is its median over the steps, so the
hops add up to about the median step. Printed as a table on stderr; the JSON object holds the same figures.
No timing is asserted anywhere (tests/test_bench_smoke.py checks that every hop of the way is marked)."""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.common import UNGUARDED, bench_config, main, rounded, workdir
from bench.engine import _api_trigger, _chain
from engine.infra.stack import Stack

SIZES = {"tiny": {"chain": 6, "starts": 6}, "full": {"chain": 100, "starts": 100}}
#: the marks every chain step passes, in order (a task's exit -> the next one's)
CHAIN_WAY = (
    "worker exited", "worker report", "master report", "master write", "master written",
    "master dispatch", "worker dispatch", "worker run", "worker set up", "worker spawned", "worker exited",
)  # fmt: skip
#: the marks every API start passes, in order (the start handler -> the task's exit)
START_WAY = (
    "api start", "api insert", "master poll", "master fetched", "master claimed", "master dispatch",
    "worker dispatch", "worker run", "worker set up", "worker spawned", "worker exited",
)  # fmt: skip
#: steps left out at each end of a round (the first ones warm caches, the last ones meet the round's end)
EDGE = 2


def read_marks(directory: Path) -> list[tuple[int, str]]:
    """Every node's marks, in time order: (nanoseconds, name)."""
    out = []
    for path in directory.glob("*.marks"):
        for line in path.read_text().splitlines():
            ns, _, name = line.partition(" ")
            out.append((int(ns), name))
    return sorted(out)


def steps(marks: list[tuple[int, str]], way: tuple[str, ...]) -> list[list[tuple[int, str]]]:
    """The marks cut into steps: each from a mark named ``way[0]`` to the first ``way[-1]`` after it (a chain's
    way starts and ends with the same name: each step's end is the next one's start). A ``way[0]`` that comes
    before the open step ended closes it unended (:func:`passes` then says it is not whole)."""
    cut: list[list[tuple[int, str]]] = []
    current: list[tuple[int, str]] | None = None
    for ns, name in marks:
        if current is not None and name == way[0] and way[0] != way[-1]:
            cut.append(current)  # a step that never ended (its task did not run?): kept, not whole
            current = None
        if current is not None:
            current.append((ns, name))
            if name == way[-1] and len(current) > 1:
                cut.append(current)
                current = None
        if current is None and name == way[0]:
            current = [(ns, name)]
    return cut


def passes(step: list[tuple[int, str]], way: tuple[str, ...]) -> bool:
    """Whether ``step`` passes every mark of ``way`` in that order (other marks may come between)."""
    names = iter(name for _, name in step)
    return all(any(name == wanted for name in names) for wanted in way)


def hops(cut: list[list[tuple[int, str]]], way: tuple[str, ...]) -> dict[str, float]:
    """Median milliseconds of each hop between consecutive marks of ``way`` over the steps, and of the step."""
    times: dict[str, list[float]] = defaultdict(list)
    for step in cut:
        at, i = step[0][0], 1
        for ns, name in step[1:]:
            if i < len(way) and name == way[i]:
                times[f"{way[i - 1]} -> {name}"].append((ns - at) / 1e6)
                at, i = ns, i + 1
        times["step"].append((step[-1][0] - step[0][0]) / 1e6)
    return {hop: statistics.median(values) for hop, values in times.items()}


def trimmed(cut: list[Any]) -> list[Any]:
    """The steps without EDGE at each end, when there are enough to leave some."""
    return cut[EDGE:-EDGE] if len(cut) > 2 * EDGE + 1 else cut


def _round(
    marks: list[tuple[int, str]], way: tuple[str, ...], since: int, until: int
) -> tuple[dict[str, float], int, int]:
    kept = trimmed(steps([m for m in marks if since <= m[0] < until], way))
    whole = [s for s in kept if passes(s, way)]
    return hops(whole, way), len(kept), len(whole)


def run(size: str = "full") -> dict[str, Any]:
    params = SIZES[size]
    with workdir() as base:
        marks_dir = base / "marks"
        on = [f"debug.step_marks={marks_dir}", "logging.level=warning"]
        stack = Stack(base / "stack", bench_config())
        try:
            stack.start_infra()
            stack.start_node("master", "master", [*on, *UNGUARDED["master"]])
            stack.start_node("worker", "worker", ["worker.exec_slots=400", *on, *UNGUARDED["worker"]])
            api = stack.start_node("api", "api", on)
            assert api.record is not None and stack.postgres is not None
            chain = asyncio.run(_chain(stack.postgres.dsn, params["chain"]))
            between = time.time_ns()
            start = asyncio.run(_api_trigger(stack.postgres.dsn, f"http://127.0.0.1:{api.record.extra['port']}",
                                             params["starts"]))  # fmt: skip
        finally:
            stack.stop_all()  # each node writes its marks as it stops
        marks = read_marks(marks_dir)
        chain_hops, chain_steps, chain_whole = _round(marks, CHAIN_WAY, 0, between)
        start_hops, start_steps, start_whole = _round(marks, START_WAY, between, time.time_ns())
    _print("chain step (a task's exit -> the next task's exit)", chain_hops)
    _print("API start (the start handler -> the task's exit)", start_hops)
    return rounded(
        {
            "benchmark": "steps",
            "size": size,
            "chain_gap_p50_ms": chain["chain_gap_p50_ms"],
            "chain_steps": chain_steps,
            "chain_steps_marked_whole": chain_whole,
            **{f"chain {hop} ms": v for hop, v in chain_hops.items()},
            "api_trigger_p50_ms": start["api_trigger_p50_ms"],
            "start_steps": start_steps,
            "start_steps_marked_whole": start_whole,
            **{f"start {hop} ms": v for hop, v in start_hops.items()},
        }
    )


def _print(title: str, figures: dict[str, float]) -> None:
    print(f"{title}: median ms", file=sys.stderr)
    for hop, ms in figures.items():
        print(f"  {ms:7.3f}  {hop}", file=sys.stderr)


if __name__ == "__main__":
    main(run)
