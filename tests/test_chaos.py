"""The chaos suite at test size (tests/chaos.py): about 200 random workflows on 3 masters and 2 workers
while masters and workers are killed, paused and gracefully restarted, and etcd and PostgreSQL
restarted once. ``PORPOISE_CHAOS_FAULTS="poison=1 kill-master=0"`` sets fault weights (tests/chaos_faults.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.chaos import run
from tests.chaos_faults import parse_weights

pytestmark = pytest.mark.slow


@pytest.mark.timeout(1500)
async def test_chaos_nothing_lost_nothing_run_twice(workdir: Path) -> None:
    seed = int(os.environ.get("PORPOISE_CHAOS_SEED", "20261121"))
    workflows = int(os.environ.get("PORPOISE_CHAOS_WORKFLOWS", "200"))
    faults = parse_weights(os.environ.get("PORPOISE_CHAOS_FAULTS", "").split())
    base = workdir / "chaos"
    base.mkdir()
    summary = await run(workflows, seed, base, deadline=1200, faults=faults)
    print(summary.text())  # shown with -s, and in the failure report below
    assert not summary.violations, summary.text()
    assert sum(summary.faults.values()) >= 5, summary.text()
    assert summary.faults["restart etcd"] == 1 and summary.faults["restart postgres"] == 1, summary.text()
    # the driver injects every enabled kind once before drawing by weight: each one was exercised
    for kind, weight in faults.items():
        assert (summary.faults[kind] > 0) == (weight > 0), (kind, summary.text())
    assert (summary.poison_commands > 0) == (faults["poison"] > 0), summary.text()
