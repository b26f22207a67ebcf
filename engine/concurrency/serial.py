"""Serial execution and per-workflow concurrency caps: the pure decisions (no I/O).

A workflow's rule is its ``execution_type`` (what to do with a run that finds the workflow full) and
its ``max_active_runs`` (how many runs may be active at once; 0 = the mode's default: no limit for
PARALLEL, one for the serial types). PARALLEL with a cap behaves as SERIAL_WAIT with that cap.

- SERIAL_WAIT: a new run that finds the workflow full (or any earlier run still waiting, so runs start
  in the order they were made) waits (instance state SERIAL_WAIT, no owner); when an active run ends,
  the oldest waiting runs are woken, as many as there are free places.
- SERIAL_DISCARD: a new run that finds the workflow full is not started: its instance is recorded as
  STOP with the reason.
- SERIAL_PRIORITY: a new run that finds the workflow full stops the oldest active runs (enough to make
  room for itself) and supersedes every run still waiting (recorded as STOP with the reason); it then
  waits until the stopped runs have ended, so two runs never overlap (DolphinScheduler starts the new
  run at once, next to the run it is stopping).

"Active" = an unfinished instance that is not waiting: SUBMITTED_SUCCESS, RUNNING_EXECUTION, READY_PAUSE,
READY_STOP, DELAY_EXECUTION. The callers (``engine/concurrency/serial_sql.py``) take these decisions under a
per-workflow database lock, so they hold across masters.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass


class Mode(enum.IntEnum):
    """``workflow_definition.execution_type`` (DolphinScheduler's codes)."""

    PARALLEL = 0
    SERIAL_WAIT = 1
    SERIAL_DISCARD = 2
    SERIAL_PRIORITY = 3


@dataclass(frozen=True)
class Rule:
    mode: Mode
    #: active runs allowed at once; 0 = no limit
    limit: int

    @classmethod
    def of(cls, execution_type: int, max_active_runs: int = 0) -> Rule:
        """The rule of a definition's columns; an unknown mode (a newer writer) counts as PARALLEL."""
        try:
            mode = Mode(execution_type)
        except ValueError:
            mode = Mode.PARALLEL
        limit = max(0, max_active_runs) or (0 if mode is Mode.PARALLEL else 1)
        return cls(mode, limit)

    @property
    def limited(self) -> bool:
        return self.limit > 0


class Verdict(enum.Enum):
    RUN = "run"
    WAIT = "wait"
    DISCARD = "discard"


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    #: active runs to stop (SERIAL_PRIORITY)
    stop: tuple[int, ...] = ()
    #: waiting runs superseded by this one (SERIAL_PRIORITY): recorded as STOP with ``superseded_reason``
    supersede: tuple[int, ...] = ()
    #: why the run waits or is discarded (recorded on the instance)
    reason: str = ""


def admit(rule: Rule, active: Sequence[int], waiting: Sequence[int], name: str = "the workflow") -> Decision:
    """What becomes of a new run (or a restarted one) of a workflow whose ``active`` and ``waiting``
    instance ids (oldest first) are given. The run itself is in neither list."""
    if not rule.limited:
        return Decision(Verdict.RUN)
    full = len(active) >= rule.limit
    if not full and not waiting:
        return Decision(Verdict.RUN)
    runs = ", ".join(str(i) for i in active) or "none"
    if rule.mode is Mode.SERIAL_DISCARD:
        why = f"{name} is SERIAL_DISCARD and already runs {len(active)} of at most {rule.limit} (instances {runs})"
        if not full:
            why = f"{name} is SERIAL_DISCARD and has runs waiting (instances {', '.join(map(str, waiting))})"
        return Decision(Verdict.DISCARD, reason=why)
    if rule.mode is Mode.SERIAL_PRIORITY:
        excess = max(0, len(active) - rule.limit + 1)
        stop = tuple(sorted(active)[:excess])
        return Decision(
            Verdict.WAIT,
            stop=stop,
            supersede=tuple(waiting),
            reason=f"{name} is SERIAL_PRIORITY: waiting for instance(s) {', '.join(map(str, stop)) or runs} to stop",
        )
    if full:
        why = f"{name} runs {len(active)} of at most {rule.limit} (instances {runs}): waiting for one to end"
    else:
        why = f"{name} has earlier runs waiting: waiting behind them"
    return Decision(Verdict.WAIT, reason=why)


def superseded_reason(newer: int) -> str:
    return f"superseded by the newer run {newer} (SERIAL_PRIORITY)"


def to_wake(rule: Rule, active: int, pending: int, waiting: Sequence[int]) -> list[int]:
    """The waiting runs to wake now, oldest first: ``active`` runs are active, ``pending`` waiting runs
    have a wake-up queued already (they are about to be active), ``waiting`` are the other waiting ids."""
    ordered = sorted(waiting)
    if not rule.limited:
        return ordered
    free = rule.limit - active - pending
    return ordered[: max(0, free)]
