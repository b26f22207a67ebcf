"""Request rate limits of one API process: a token bucket per signed-in user and per client address.

Cheap and in memory (no shared state between API servers: N servers allow N times the rate). A bucket holds
at most ``burst`` requests and refills at ``rate`` per second; a request finding it empty is answered 429 with
``Retry-After`` (whole seconds until one request's worth has refilled). Buckets that have refilled completely
carry no information and are dropped when the table grows past ``max_keys``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Hashable


class RateLimiter:
    def __init__(
        self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic, max_keys: int = 100_000
    ) -> None:
        #: requests per second refilled; 0: no limit
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self.max_keys = max_keys
        #: key -> (requests left, when that was computed)
        self._buckets: dict[Hashable, tuple[float, float]] = {}

    def take(self, key: Hashable) -> int:
        """Count one request of ``key``: 0 when allowed, else the seconds to wait (at least 1)."""
        if self.rate <= 0:
            return 0
        now = self.clock()
        left, then = self._buckets.get(key, (float(self.burst), now))
        left = min(float(self.burst), left + (now - then) * self.rate)
        if left < 1.0:
            self._buckets[key] = (left, now)
            return max(1, math.ceil((1.0 - left) / self.rate))
        self._buckets[key] = (left - 1.0, now)
        if len(self._buckets) > self.max_keys:
            self._prune(now)
        return 0

    def _prune(self, now: float) -> None:
        full_after = self.burst / self.rate
        self._buckets = {k: v for k, v in self._buckets.items() if now - v[1] < full_after}
        if len(self._buckets) > self.max_keys:  # all recent: forget the oldest half (they may burst again)
            keep = sorted(self._buckets.items(), key=lambda kv: kv[1][1])[len(self._buckets) // 2 :]
            self._buckets = dict(keep)
