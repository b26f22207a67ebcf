"""Figures from the rows a workload left in Airflow's metadata database, the correctness checks on them, and
the side-by-side table (pure: tested without Airflow in tests/test_peers_airflow.py)."""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from bench.common import percentile

SUCCESS = "success"


class Incorrect(AssertionError):
    """A workload did not run as it must: a run or task not successful, a task lost or run again."""


@dataclass(frozen=True)
class RunRow:
    """One DAG run (``dag_run``)."""

    run_id: str
    state: str
    end: dt.datetime | None


@dataclass(frozen=True)
class TaskRow:
    """One task instance (``task_instance``): ``try_number`` 1 is its first try."""

    run_id: str
    task_id: str
    state: str
    try_number: int
    start: dt.datetime | None
    end: dt.datetime | None


def check(
    workload: str,
    runs: Sequence[RunRow],
    tasks: Sequence[TaskRow],
    expected_runs: int,
    task_ids: Sequence[str],
    history: int,
) -> None:
    """Every run and task ended successfully, each task of each run exactly once, on its first try;
    ``history``: the rows ``task_instance_history`` holds for these runs (one per earlier try)."""
    problems = []
    if len(runs) != expected_runs:
        problems.append(f"{len(runs)} runs, expected {expected_runs}")
    bad_runs = [r.run_id for r in runs if r.state != SUCCESS]
    if bad_runs:
        problems.append(f"runs not successful: {bad_runs[:5]}")
    seen = sorted((t.run_id, t.task_id) for t in tasks)
    wanted = sorted((r.run_id, task) for r in runs for task in task_ids)
    if seen != wanted:
        problems.append(f"{len(seen)} task instances, expected {len(wanted)} (one per task per run)")
    bad_tasks = [f"{t.run_id}/{t.task_id}={t.state}" for t in tasks if t.state != SUCCESS]
    if bad_tasks:
        problems.append(f"tasks not successful: {bad_tasks[:5]}")
    again = [f"{t.run_id}/{t.task_id} try {t.try_number}" for t in tasks if t.try_number != 1]
    if again or history:
        problems.append(f"tasks ran again: {again[:5]} ({history} earlier tries recorded)")
    if problems:
        raise Incorrect(f"Airflow {workload}: " + "; ".join(problems))


def _times(tasks: Iterable[TaskRow]) -> list[tuple[dt.datetime, dt.datetime]]:
    out = []
    for t in tasks:
        if t.start is None or t.end is None:
            raise Incorrect(f"task {t.run_id}/{t.task_id} has no start or end time")
        out.append((t.start, t.end))
    return out


def fanout(tasks: Sequence[TaskRow]) -> dict[str, float]:
    """Tasks per second from the first task's start to the last one's end."""
    times = _times(tasks)
    seconds = (max(e for _, e in times) - min(s for s, _ in times)).total_seconds()
    return {"fanout_tasks_per_s": len(times) / seconds}


def chain_gaps(tasks: Sequence[TaskRow]) -> dict[str, float]:
    """The gap between each task's end and the next one's start (tasks ``t0``..``t<n-1>`` of one run), ms."""
    by_id = {t.task_id: t for t in tasks}
    order = sorted(by_id, key=lambda task_id: int(task_id.removeprefix("t")))
    times = _times(by_id[i] for i in order)
    gaps = [(times[i][0] - times[i - 1][1]).total_seconds() * 1000 for i in range(1, len(times))]
    return {"chain_gap_p50_ms": percentile(gaps, 50), "chain_gap_max_ms": max(gaps)}


def first_start_ms(tasks: Sequence[TaskRow], sent: float) -> float:
    """From the trigger call's sending (a Unix time) to the run's first task start, ms."""
    return (min(s for s, _ in _times(tasks)).timestamp() - sent) * 1000


def trigger(latencies_ms: Sequence[float]) -> dict[str, float]:
    return {"trigger_p50_ms": percentile(list(latencies_ms), 50), "trigger_max_ms": max(latencies_ms)}


def many_runs(runs: Sequence[RunRow], sent: float) -> dict[str, float]:
    """Runs per minute from the first start call to the last run's end."""
    ends = [r.end for r in runs]
    if any(e is None for e in ends):
        raise Incorrect("a many-runs run has no end time")
    seconds = max(e.timestamp() for e in ends if e is not None) - sent
    return {"many_runs_per_min": len(runs) / seconds * 60, "many_runs_seconds": seconds}


@dataclass(frozen=True)
class Figure:
    key: str
    label: str
    unit: str
    higher_is_better: bool


FIGURES = (
    Figure("fanout_tasks_per_s", "fan-out ({fanout} tasks `true` at once)", "tasks/s", True),
    Figure("chain_gap_p50_ms", "chain of {chain}: gap between tasks, p50", "ms", False),
    Figure("trigger_p50_ms", "API trigger -> first task starts, p50 of {triggers}", "ms", False),
    Figure("many_runs_per_min", "many runs ({runs} x 3-task chain at once)", "runs/min", True),
    Figure("many_runs_seconds", "many runs: first start call -> last run final", "s", False),
)


def medians(rounds: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Each figure's median over the rounds."""
    return {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}


def advantage(figure: Figure, porpoise: float, airflow: float) -> float:
    """How many times better Porpoise's figure is than Airflow's (> 1: Porpoise is better)."""
    better, worse = (porpoise, airflow) if figure.higher_is_better else (airflow, porpoise)
    return better / worse if worse > 0 else float("inf")


def _number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.1f}" if abs(value) >= 10 else f"{value:,.2f}"


def table(porpoise: Mapping[str, float], airflow: Mapping[str, float], sizes: Mapping[str, int], version: str) -> str:
    """The figures side by side, Markdown, with Porpoise's advantage as a ratio."""
    lines = [
        f"| workload | unit | Porpoise | Airflow {version} | Porpoise vs Airflow |",
        "|---|---|---:|---:|---:|",
    ]
    for f in FIGURES:
        p, a = porpoise[f.key], airflow[f.key]
        ratio = advantage(f, p, a)
        label = f.label.format(**sizes)
        lines.append(f"| {label} | {f.unit} | {_number(p)} | {_number(a)} | {_number(ratio)}x |")
    return "\n".join(lines)


def rounds_table(porpoise: Sequence[Mapping[str, float]], airflow: Sequence[Mapping[str, float]]) -> str:
    """Each round's figures, Porpoise / Airflow, Markdown (how much they moved between rounds)."""
    header = "| round | " + " | ".join(f"{f.key} (Porpoise / Airflow)" for f in FIGURES) + " |"
    lines = [header, "|---|" + "---:|" * len(FIGURES)]
    for i, (p, a) in enumerate(zip(porpoise, airflow, strict=False), 1):
        cells = " | ".join(f"{_number(p[f.key])} / {_number(a[f.key])}" for f in FIGURES)
        lines.append(f"| {i} | {cells} |")
    return "\n".join(lines)
