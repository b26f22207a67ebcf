"""Every benchmark runs once at a tiny size so the scripts cannot rot (timings are not asserted)."""

from __future__ import annotations

import importlib
import math

import pytest

from bench.__main__ import BENCHMARKS


@pytest.mark.parametrize("name", BENCHMARKS)
def test_benchmark_runs_at_tiny_size(name: str) -> None:
    result = importlib.import_module(f"bench.{name}").run("tiny")
    assert result["benchmark"] == name
    assert not any(math.isnan(v) for v in result.values() if isinstance(v, float)), result
