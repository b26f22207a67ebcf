"""This node's wall clock against the database's: measured when a master starts, refused past a margin.

Leases, timers and every local interval run on monotonic time; the wall clock still matters between
hosts: dispatches and kills carry the sender's lease validity in epoch milliseconds (checked on the
worker's clock), and schedules fire at the master's clock for times the database records. A master whose
clock is off the database's by more than ``master.max_clock_skew`` does not start (NTP not synchronised
yet, a stepped clock): it exits with the figures, and a supervisor starts it again once the clock is right.

``debug.clock_offset`` (test-only) moves this process's ``time.time()`` by a fixed amount, as a clock
stepped on one node would; ``datetime.now()`` and the monotonic clocks are not moved.
"""

from __future__ import annotations

import time
from typing import Any

from core import logs
from core.errors import PorpoiseError

log = logs.get(__name__)

#: round trips measured; the shortest is kept (its midpoint is the closest to the database's reading)
ROUND_TRIPS = 3


def now_ms() -> int:
    """The wall clock in epoch milliseconds (what the database's and the peers' timestamps are compared with)."""
    return int(time.time() * 1000)


class ClockSkew(PorpoiseError):
    """This node's wall clock is off the database's by more than the allowed margin."""


def offset_wall_clock(seconds: float) -> None:
    """Test-only (debug.clock_offset): ``time.time()`` of this process reads ``seconds`` ahead (behind
    when negative) of the machine's clock."""
    if not seconds:
        return
    real = time.time

    def stepped() -> float:
        return real() + seconds

    time.time = stepped
    log.warning("debug.clock_offset: this process's wall clock is moved", seconds=seconds)


async def database_skew(pool: Any) -> tuple[float, float]:
    """(the database's clock less ours, the uncertainty of that figure) in seconds: ``clock_timestamp()``
    against the midpoint of the shortest of a few round trips (uncertainty: half that round trip)."""
    best: tuple[float, float] | None = None
    for _ in range(ROUND_TRIPS):
        sent, started = time.time(), time.monotonic()
        theirs = await pool.fetchval("SELECT extract(epoch FROM clock_timestamp())::float8")
        trip = time.monotonic() - started
        skew = float(theirs) - (sent + trip / 2)
        if best is None or trip / 2 < best[1]:
            best = (skew, trip / 2)
    assert best is not None
    return best


async def check_skew(pool: Any, margin: float, role: str) -> float:
    """Measure the skew against the database; raise ClockSkew when it is certainly above ``margin``
    (0: measured and logged only). Returns the skew (the database's clock less ours)."""
    skew, error = await database_skew(pool)
    log.info("clock skew against the database", skew=round(skew, 4), uncertainty=round(error, 4))
    if margin > 0 and abs(skew) - error > margin:
        side = "behind" if skew > 0 else "ahead of"
        raise ClockSkew(
            f"this {role}'s clock is {abs(skew):.3f} s {side} the database's (at most {margin} s allowed: "
            f"master.max_clock_skew); synchronise the clocks (NTP) and start it again"
        )
    return skew


class SkewWatch:
    """This node's wall clock against its peers', from every RPC answer (``RpcClient.clock``): a worker has
    no database to measure against, but it calls its masters (reports) and each answer carries the master's
    clock; a master likewise sees its workers' in their dispatch answers. A peer certainly off by more
    than ``margin`` seconds (its figure less the round trip's half) raises an alarm: a warning in the log
    (at most once a minute per peer) and the ``clock_skew_alarms`` counter; ``clock_skew_seconds`` shows
    each peer's last figure. Nothing is refused: a worker keeps running what it runs."""

    #: seconds between two warnings about the same peer
    REPEAT = 60.0

    def __init__(self, margin: float, metrics: Any = None) -> None:
        self.margin = margin
        self.metrics = metrics
        #: peer address -> its clock less ours (seconds), from its last answer
        self.skews: dict[str, float] = {}
        self._warned: dict[str, float] = {}
        if metrics is not None:
            metrics.gauge("clock_skew_seconds", lambda: dict(self.skews))

    def observe(self, peer: str, skew: float, uncertainty: float) -> None:
        if len(self.skews) >= 1000 and peer not in self.skews:
            self.skews.pop(next(iter(self.skews)))  # bounded: peers come and go
        self.skews[peer] = round(skew, 4)
        if self.margin <= 0 or abs(skew) - uncertainty <= self.margin:
            return
        if self.metrics is not None:
            self.metrics.inc("clock_skew_alarms")
        now = time.monotonic()
        if now - self._warned.get(peer, -self.REPEAT) >= self.REPEAT:
            self._warned[peer] = now
            side = "ahead of" if skew > 0 else "behind"
            log.warning("a peer's clock is off ours past the margin (master.max_clock_skew): synchronise the clocks",
                        peer=peer, skew=round(skew, 3), uncertainty=round(uncertainty, 3), peer_is=side,
                        margin=self.margin)  # fmt: skip
