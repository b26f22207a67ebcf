"""Keep full garbage collections short while thousands of workflow actors are live.

CPython's full collection walks every tracked object and stops the event loop while it does: with
10,000 live actors that measured 300 ms, several times during a claim storm (a full collection runs
each time the heap grew by a quarter). Actors are long-lived by nature, so after each page of claimed
commands the master moves everything allocated so far out of the collector's sight (``gc.freeze``:
O(1)); later collections walk only what came after.

What the actors allocate after they start (their first checks, timers, caches) is not frozen with them and
reaches the oldest generation; so while the heap is frozen, whatever survives a full collection that took
longer than ``REFREEZE_PAUSE`` is frozen too, right after it (with 100,000 live actors full collections took
65-90 ms without this, every few seconds of the hold). A short full collection refreezes nothing: on a heap
that small, cyclic garbage older than it is collected as before, not kept until the unfreeze. (CPython 3.11-3.13
report full collections as generation 2; 3.14's incremental collector reports its old-generation steps as
generation 1, so there this refreeze does not happen and its increments keep the pauses short instead.)

Frozen objects are still freed when their reference count drops to zero; only reference cycles among
them wait. So once as many actors have ended since the last freeze as were live then (at least
``min_ended``), everything is unfrozen and the next full collection reclaims those cycles — one long
pause per generation of actors instead of one per growth step.
"""

from __future__ import annotations

import gc
import time

from core import logs

log = logs.get(__name__)

#: a full collection longer than this, while frozen, freezes its survivors
REFREEZE_PAUSE = 0.02


class GcPolicy:
    def __init__(self, min_ended: int = 1000) -> None:
        self.min_ended = min_ended
        self.frozen = False
        self._live_at_freeze = 0
        self._ended = 0
        self._full_started = 0.0

    def install(self) -> None:
        """Freeze what survives each full collection while frozen (:meth:`uninstall` stops it)."""
        if self._after_collection not in gc.callbacks:
            gc.callbacks.append(self._after_collection)

    def uninstall(self) -> None:
        if self._after_collection in gc.callbacks:
            gc.callbacks.remove(self._after_collection)

    def _after_collection(self, phase: str, info: dict[str, int]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._full_started = time.perf_counter()
        elif self.frozen and time.perf_counter() - self._full_started > REFREEZE_PAUSE:
            gc.freeze()  # the survivors are long-lived by now: the next full collection walks only what is newer

    def claimed(self, live_actors: int) -> None:
        """A page of commands became actors: freeze what exists."""
        gc.freeze()
        if not self.frozen:
            self._ended = 0
        self.frozen = True
        self._live_at_freeze = max(self._live_at_freeze, live_actors)

    def ended(self) -> None:
        """An actor ended; unfreeze once a generation of them has."""
        if not self.frozen:
            return
        self._ended += 1
        if self._ended >= max(self.min_ended, self._live_at_freeze):
            self.release()

    def release(self) -> None:
        if self.frozen:
            log.info("unfreezing the heap", ended=self._ended)
        self.frozen = False  # first: a full collection on another thread in between must not freeze it all again
        gc.unfreeze()
        self._ended = 0
        self._live_at_freeze = 0
