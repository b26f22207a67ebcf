"""Worker selection (host selectors), as DolphinScheduler: LOWER_WEIGHT (default), RANDOM, ROUND_ROBIN.

All selectors are pure objects over ``Candidate`` lists, with their rotation state kept per worker
group, and a seeded RNG where they draw. They never see the registry.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

#: a worker younger than this looks heavier (DolphinScheduler's 10-minute warm-up), in ms
WARM_UP_MS = 600_000


@dataclass(frozen=True)
class Candidate:
    address: str
    cpu_usage: float = 0.0
    memory_usage: float = 0.0
    load_average: float = 0.0
    host_weight: int = 100
    waiting_tasks: int = 0
    running_tasks: int = 0
    exec_slots: int = 0
    uptime_ms: int = WARM_UP_MS


def load_weight(c: Candidate) -> float:
    """Higher = more loaded: DolphinScheduler's 10*cpu + 20*memory + 70*load, plus exec-slot usage
    (3.2's thread-pool usage), scaled up during the warm-up; never below 1 so equals rotate."""
    weight = 10 * c.cpu_usage + 20 * c.memory_usage + 70 * c.load_average
    if c.exec_slots:
        weight += 10 * c.running_tasks / c.exec_slots
    weight = max(weight, 1.0)
    if 0 < c.uptime_ms < WARM_UP_MS:
        weight *= WARM_UP_MS / c.uptime_ms
    return weight


class LowerWeightSelector:
    """Smooth lowest-weight round robin: each candidate's current weight grows by its load weight,
    the smallest wins and is charged the total. Hosts with waiting tasks are avoided when possible.

    A host's running total starts at its own weight, as DolphinScheduler's HostWeight (currentWeight =
    weight when built), so its first pick adds the weight a second time."""

    def __init__(self) -> None:
        self.current: dict[str, float] = {}

    def select(self, candidates: Sequence[Candidate]) -> Candidate:
        least_waiting = min(c.waiting_tasks for c in candidates)
        pool = [c for c in candidates if c.waiting_tasks == least_waiting]
        weights = {c.address: load_weight(c) for c in pool}
        for c in pool:
            start = self.current.get(c.address, weights[c.address])
            self.current[c.address] = start + weights[c.address]
        chosen = min(pool, key=lambda c: (self.current[c.address], c.address))
        self.current[chosen.address] += sum(weights.values())
        for gone in set(self.current) - {c.address for c in candidates}:
            del self.current[gone]
        return chosen


class RandomSelector:
    """Weighted by host_weight; all zero weights -> uniform."""

    def __init__(self, seed: int | None = None) -> None:
        self.rng = random.Random(seed)

    def select(self, candidates: Sequence[Candidate]) -> Candidate:
        total = sum(max(c.host_weight, 0) for c in candidates)
        if total <= 0:
            return self.rng.choice(list(candidates))
        r = self.rng.uniform(0, total)
        for c in candidates:
            r -= max(c.host_weight, 0)
            if r < 0:
                return c
        return candidates[-1]


class RoundRobinSelector:
    """Smooth weighted round robin by host_weight (each pick: current += weight, max wins,
    winner -= total)."""

    def __init__(self) -> None:
        self.current: dict[str, int] = {}

    def select(self, candidates: Sequence[Candidate]) -> Candidate:
        total = 0
        for c in candidates:
            w = max(c.host_weight, 0) or 1
            self.current[c.address] = self.current.get(c.address, 0) + w
            total += w
        chosen = max(candidates, key=lambda c: self.current[c.address])  # first of equals wins
        self.current[chosen.address] -= total
        for gone in set(self.current) - {c.address for c in candidates}:
            del self.current[gone]
        return chosen


SELECTORS = {"lower_weight": LowerWeightSelector, "random": RandomSelector, "round_robin": RoundRobinSelector}
