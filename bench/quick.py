"""``make bench-quick`` (``python -m bench.quick``): the performance guard, under 3 minutes.

Runs the spawn limit and a reduced engine benchmark (bench/engine.py at size "quick": fan-out throughput,
chain gap, API start call -> first task, many runs) in one go, and prints each figure beside the reference
the last full run recorded in docs/BENCHMARKS.md (the JSON between the ``bench:reference`` markers, which
``python -m bench full engine`` writes), both as ratios to the spawn limit measured in the same run:

- a rate (tasks/s, runs/min) as a share of the spawn rate (higher is better);
- a latency (ms) in spawn times, i.e. how many ``bash script.sh`` bare Python starts and reaps meanwhile
  (lower is better).

A figure whose ratio is more than 20 % worse than the reference's is flagged, and the exit status is 1
when any is. Absolute figures on a shared machine move with its load; the ratios much less, as long as the
load stays put during a run: the spawn limit is measured before and after the engine rounds, and a run
whose two measurements differ by more than a quarter, or whose fan-out outran its spawn limit (each task
starts one ``bash``: the limit was measured at a quieter moment than the engine), is not sane. Such a run
is never written as the reference, and a reference that is not sane is not compared with (its reasons are
printed instead).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import exit_on_sigterm, machine

DOC = Path(__file__).resolve().parent.parent / "docs" / "BENCHMARKS.md"
BEGIN, END = "<!-- bench:reference -->", "<!-- /bench:reference -->"
#: a figure is flagged when its ratio is this much worse than the reference's
TOLERANCE = 0.20
SPAWN = "spawn_limit_per_s"
SPAWN_FIRST, SPAWN_LAST = "spawn_limit_first_per_s", "spawn_limit_last_per_s"
#: most the spawn limit may move between its two measurements in a sane run (as a fraction of the larger)
STEADY = 0.25
#: printed beside the comparison, not compared (CPU time moves less with the machine's load than rates do)
CPU = {
    "throughput_master_cpu_ms_per_task": "master",
    "throughput_worker_cpu_ms_per_task": "worker",
    "throughput_postgres_cpu_ms_per_task": "PostgreSQL",
}
#: the many runs' CPU per run (3 tasks, each a chain step: nothing shared between them), printed as well
RUN_CPU = {
    "many_runs_master_cpu_ms_per_run": "master",
    "many_runs_worker_cpu_ms_per_run": "worker",
    "many_runs_task_processes_cpu_ms_per_run": "its tasks",
    "many_runs_api_cpu_ms_per_run": "API",
    "many_runs_postgres_cpu_ms_per_run": "PostgreSQL",
}


@dataclass(frozen=True)
class Figure:
    key: str
    label: str
    unit: str
    higher_is_better: bool


FIGURES = (
    Figure("throughput_tasks_per_s", "fan-out throughput", "tasks/s", True),
    Figure("chain_gap_p50_ms", "chain gap p50", "ms", False),
    Figure("api_trigger_p50_ms", "API start -> first task p50", "ms", False),
    Figure("many_runs_per_min", "many runs (3-task chains)", "runs/min", True),
)


def ratio(figure: Figure, value: float, spawn_per_s: float) -> float:
    """``value`` relative to the spawn limit: a rate's share of it, or a latency in spawn times."""
    if figure.higher_is_better:
        per_s = value / 60 if figure.unit.endswith("/min") else value
        return per_s / spawn_per_s
    return value / 1000 * spawn_per_s


@dataclass(frozen=True)
class Row:
    figure: Figure
    reference: float
    reference_ratio: float
    now: float
    now_ratio: float
    #: how much better (> 0) or worse (< 0) the ratio is than the reference's, as a fraction of it
    change: float

    @property
    def fell(self) -> bool:
        return self.change < -TOLERANCE


def compare(reference: dict[str, Any], now: dict[str, Any]) -> list[Row]:
    """One row per figure both hold (a figure the reference lacks is not compared)."""
    rows = []
    for f in FIGURES:
        if f.key not in reference or f.key not in now:
            continue
        ref_ratio = ratio(f, float(reference[f.key]), float(reference[SPAWN]))
        now_ratio = ratio(f, float(now[f.key]), float(now[SPAWN]))
        if f.higher_is_better:
            change = now_ratio / ref_ratio - 1 if ref_ratio > 0 else 0.0
        else:
            change = ref_ratio / now_ratio - 1 if now_ratio > 0 else 0.0
        rows.append(Row(f, float(reference[f.key]), ref_ratio, float(now[f.key]), now_ratio, change))
    return rows


def insane(result: dict[str, Any]) -> list[str]:
    """Why ``result``'s ratios to its spawn limit mean nothing (the machine's load moved during the run),
    or nothing when they are sane."""
    why = []
    first, last = result.get(SPAWN_FIRST), result.get(SPAWN_LAST)
    if first and last and abs(first - last) / max(first, last) > STEADY:
        why.append(f"the spawn limit moved from {first:,.0f}/s to {last:,.0f}/s during the run")
    spawn, fan_out = result.get(SPAWN), result.get("throughput_tasks_per_s")
    if spawn and fan_out and fan_out > spawn:
        why.append(f"the fan-out ({fan_out:,.0f} tasks/s) outran the spawn limit ({spawn:,.0f}/s)")
    return why


def read_reference(text: str) -> dict[str, Any] | None:
    """The reference figures recorded in BENCHMARKS.md's text, or None when there are none."""
    m = re.search(re.escape(BEGIN) + r".*?```json\n(.*?)\n```.*?" + re.escape(END), text, re.S)
    return json.loads(m.group(1)) if m else None


def reference_block(result: dict[str, Any], facts: dict[str, object]) -> str:
    """The reference section for BENCHMARKS.md from a full engine run's result."""
    figures = {k: result[k] for k in (SPAWN, SPAWN_FIRST, SPAWN_LAST, *(f.key for f in FIGURES), *CPU) if k in result}
    data = {"date": dt.date.today().isoformat(), "commit": facts["commit"], "cpus": facts["cpus"]} | figures
    return (
        f"{BEGIN}\n"
        "### reference for `make bench-quick`\n\n"
        "Written by `python -m bench full engine` (and `make bench`); read by `make bench-quick`\n"
        "(bench/quick.py), which compares its figures, as ratios to the spawn limit, with these.\n\n"
        f"```json\n{json.dumps(data, indent=1)}\n```\n"
        f"{END}"
    )


def write_reference(text: str, block: str) -> str:
    """``text`` with its reference section replaced by ``block`` (appended when it has none)."""
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    if pattern.search(text):
        return pattern.sub(lambda _m: block, text)
    return text.rstrip() + "\n\n" + block + "\n"


def _value(f: Figure, value: float) -> str:
    return f"{value:,.1f} {f.unit}"


def _ratio(f: Figure, r: float) -> str:
    return f"{100 * r:.1f} % of the limit" if f.higher_is_better else f"{r:.2f} spawn times"


def report(reference: dict[str, Any] | None, now: dict[str, Any]) -> tuple[str, bool]:
    """The printed comparison, and whether any figure fell by more than the tolerance."""
    head = f"spawn limit now: {now[SPAWN]:,.0f} bash processes/s"
    if reference:
        head += f" (reference run: {reference[SPAWN]:,.0f}/s, {reference.get('date', '?')}, "
        head += f"commit {reference.get('commit', '?')})"
    lines = [head]
    if reference is not None and insane(reference):
        lines.append(f"the reference in {DOC.name} is not sane, not compared with: {'; '.join(insane(reference))}")
        lines.append("  (run `python -m bench full engine` at a quiet moment to record a new one)")
        reference = None
    elif reference is None:
        lines.append(f"no reference figures in {DOC.name} (run `python -m bench full engine` once)")
    if reference is None:
        for f in FIGURES:
            lines.append(f"  {f.label:30} {_value(f, now[f.key]):>18}  {_ratio(f, ratio(f, now[f.key], now[SPAWN]))}")
        return "\n".join(lines), False
    rows = compare(reference, now)
    head = f"  {'figure':30} {'reference':>18} {'(ratio)':>22}   {'now':>18} {'(ratio)':>22}   change"
    lines.append(head)
    for r in rows:
        lines.append(
            f"  {r.figure.label:30} {_value(r.figure, r.reference):>18} {_ratio(r.figure, r.reference_ratio):>22}"
            f"   {_value(r.figure, r.now):>18} {_ratio(r.figure, r.now_ratio):>22}   {100 * r.change:+.0f} %"
            + ("  FELL" if r.fell else "")
        )
    cpu = ", ".join(
        f"{name} {now[k]:.2f}" + (f" ({reference[k]:.2f})" if k in reference else "")
        for k, name in CPU.items()
        if k in now
    )
    lines.append(f"  CPU ms per task now (reference), not compared: {cpu}")
    per_run = ", ".join(f"{name} {now[k]:.1f}" for k, name in RUN_CPU.items() if k in now)
    if per_run:
        statements = now.get("many_runs_pg_statements_per_run")
        lines.append(f"  many runs, CPU ms per run: {per_run}"
                     + (f"; {statements:.1f} statements per run" if statements else ""))  # fmt: skip
    for why in insane(now):
        lines.append(f"  this run is not sane: {why} (the machine's load changed; run it again)")
    fell = [r.figure.label for r in rows if r.fell]
    lines.append(
        f"fell by more than {TOLERANCE:.0%} against the spawn limit: {', '.join(fell)}"
        if fell
        else f"no figure fell by more than {TOLERANCE:.0%} against the spawn limit"
    )
    return "\n".join(lines), bool(fell)


def run(size: str = "quick") -> dict[str, Any]:
    """The engine benchmark at the quick size (it measures the spawn limit first)."""
    from bench import engine

    return engine.run(size)


def main(argv: list[str]) -> int:
    from core import logs

    logs.configure("console", "warning")
    exit_on_sigterm()
    size = argv[0] if argv else "quick"
    now = run(size)
    facts = machine()
    print(f"make bench-quick ({size}), {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, commit {facts['commit']}, "
          f"{facts['cpus']} cores")  # fmt: skip
    print(json.dumps(now))
    text, fell = report(read_reference(DOC.read_text()) if DOC.exists() else None, now)
    print(text, flush=True)
    return 1 if fell else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
