"""Reports for instances this master is taking over, held until their actors exist.

A takeover points the workers at this master (host updates) before it starts the instances' actors: a
worker sends its pending reports at once, and those that arrive before their actor would find none. They
are held instead (bounded in number and in time) and handed to the actor once it is started; refusing
them made every worker send them again and again while the takeover went on, a storm that starved it.
A report held too long, or beyond the bound, is refused as before: the worker backs off and sends it again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

#: reports held at once; more are refused (the worker backs off and sends them again)
HOLD_LIMIT = 20_000

#: seconds a report waits for its instance's actor: below a worker's report call timeout (5 s), so a
#: report held that long is answered (refused) before the worker gives up on the call and sends it again
HOLD_TIMEOUT = 3.0


class Arrivals:
    """The instances whose takeover by this master is under way (their actors are not started yet)."""

    def __init__(self, limit: int = HOLD_LIMIT, timeout: float = HOLD_TIMEOUT) -> None:
        self.limit = limit
        self.timeout = timeout
        #: instance id -> resolved when its actor exists (or its takeover ended without one)
        self._coming: dict[int, asyncio.Future[None]] = {}
        #: reports waiting now
        self.held = 0
        #: reports held since the start (observability, tests)
        self.held_total = 0

    def expect(self, instance_ids: Iterable[int]) -> None:
        """A takeover of these instances begins: their reports wait for :meth:`arrived`."""
        loop = asyncio.get_running_loop()
        for i in instance_ids:
            if i not in self._coming:
                self._coming[i] = loop.create_future()

    def arrived(self, instance_ids: Iterable[int]) -> None:
        """Their actors exist now, or their takeover ended without one: the held reports go on."""
        for i in instance_ids:
            fut = self._coming.pop(i, None)
            if fut is not None and not fut.done():
                fut.set_result(None)

    def expecting(self, instance_id: int) -> bool:
        return instance_id in self._coming

    async def wait(self, instance_ids: Iterable[int], reports: int = 1) -> bool:
        """Hold ``reports`` reports until the takeovers of ``instance_ids`` under way end; False (at once)
        when holding them would exceed the limit, or when they did not end within the timeout."""
        futs = {self._coming[i] for i in instance_ids if i in self._coming}
        if not futs:
            return True
        if self.held + reports > self.limit:
            return False
        self.held += reports
        self.held_total += reports
        try:
            _, pending = await asyncio.wait(futs, timeout=self.timeout)
        finally:
            self.held -= reports
        return not pending
