"""StateWheel: one deadline heap for every timer of the master (task and workflow timeouts, retry
delays, re-checks). It owns no workflow state: a due timer posts its event to its owner.

Entries are ``(due, seq, key)``; re-arming or cancelling a key bumps its generation, and stale heap
entries are skipped when popped (lazy invalidation). The clock is injected so tests jump time, and
``expire(now)`` is pure: it returns what is due.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from core.aio import cancel_and_wait


@dataclass
class _Timer:
    due: float
    generation: int
    owner: Any
    payload: Any


class StateWheel:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._heap: list[tuple[float, int, Hashable, int]] = []
        self._timers: dict[Hashable, _Timer] = {}
        self._seq = itertools.count()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self._timers)

    def arm(self, key: Hashable, delay: float, owner: Any, payload: Any) -> None:
        """(Re-)arm ``key`` to deliver ``payload`` to ``owner`` after ``delay`` seconds."""
        old = self._timers.get(key)
        generation = old.generation + 1 if old else 0
        due = self.clock() + max(0.0, delay)
        self._timers[key] = _Timer(due, generation, owner, payload)
        heapq.heappush(self._heap, (due, next(self._seq), key, generation))
        if self._heap[0][2] == key:
            self._wake.set()

    def due(self, key: Hashable) -> float | None:
        """When ``key`` is due (on ``clock``), or None when it is not armed."""
        timer = self._timers.get(key)
        return None if timer is None else timer.due

    def cancel(self, key: Hashable) -> None:
        self._timers.pop(key, None)
        if len(self._heap) > 64 and len(self._heap) > 4 * len(self._timers):
            self._prune()

    def _prune(self) -> None:
        self._heap = [e for e in self._heap if (t := self._timers.get(e[2])) is not None and t.generation == e[3]]
        heapq.heapify(self._heap)

    def expire(self, now: float) -> list[tuple[Any, Any]]:
        """Pop every timer due at ``now``: a list of (owner, payload)."""
        due: list[tuple[Any, Any]] = []
        while self._heap and self._heap[0][0] <= now:
            _, _, key, generation = heapq.heappop(self._heap)
            timer = self._timers.get(key)
            if timer is None or timer.generation != generation:
                continue  # cancelled or re-armed
            del self._timers[key]
            due.append((timer.owner, timer.payload))
        return due

    def next_due(self) -> float | None:
        while self._heap:
            due, _, key, generation = self._heap[0]
            timer = self._timers.get(key)
            if timer is not None and timer.generation == generation:
                return due
            heapq.heappop(self._heap)
        return None

    # -- the running service ----------------------------------------------------------------------

    def start(self, deliver: Callable[[Any, Any], None]) -> None:
        self._task = asyncio.create_task(self._run(deliver), name="state-wheel")

    async def close(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)

    async def _run(self, deliver: Callable[[Any, Any], None]) -> None:
        while True:
            for owner, payload in self.expire(self.clock()):
                deliver(owner, payload)
            nxt = self.next_due()
            self._wake.clear()
            timeout = None if nxt is None else max(0.0, nxt - self.clock())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)
