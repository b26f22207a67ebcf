"""Who an API token acts for, as one API server remembers it: a checked token is trusted for
``api.token_cache_seconds``, and never past its expiry; a revoked token or a changed user is forgotten at
once on this server.

Concurrent calls with a token that is not cached share one lookup (and its one "last used" write) instead
of each reading the token and each updating its row: a client sending 50 calls at once with a new token
made 50 lookups and 50 updates of the same row, which PostgreSQL runs one after another (the row's lock).
With ``token_cache_seconds`` 0 nothing is shared: every call checks the token itself.

A lookup that was under way when its token or user was forgotten is not cached and not shared with later
calls: they look again (a revocation committed after such a lookup read the row must not be undone by it).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

from engine.api.access import Principal

Lookup = Callable[[str], Awaitable[Principal | None]]
#: the fewest tokens the cache holds before it drops expired ones
SWEEP_AT = 1024


class TokenCache:
    def __init__(self, seconds: float, lookup: Lookup, clock: Callable[[], float] = time.monotonic) -> None:
        self._seconds, self._lookup, self._clock = seconds, lookup, clock
        #: checked tokens: hash -> (trusted until, on the clock; who)
        self._known: dict[str, tuple[float, Principal]] = {}
        #: lookups under way: hash -> the task, shared by every call that needs it meanwhile
        self._pending: dict[str, asyncio.Task[Principal | None]] = {}
        #: every lookup task not ended yet, shared or no longer (forgotten meanwhile): cancelled on close
        self._running: set[asyncio.Task[Principal | None]] = set()
        #: bumped by every forget: a lookup started before it is not cached
        self._generation = 0
        #: when the cache holds this many tokens, the expired ones are dropped (tokens used once would
        #: otherwise stay for the life of the process)
        self._sweep_at = SWEEP_AT

    async def principal(self, digest: str) -> Principal | None:
        """Who the token with this hash acts for; None when it is unknown, expired or its user disabled."""
        cached = self._known.get(digest)
        if cached is not None and self._clock() < cached[0]:
            return cached[1]
        if self._seconds <= 0:
            return await self._lookup(digest)
        task = self._pending.get(digest)
        if task is None:
            task = asyncio.create_task(self._look_up(digest), name="token-lookup")
            self._pending[digest] = task
            self._running.add(task)
            task.add_done_callback(lambda done: self._done(digest, done))
        # one caller's cancellation (its client went away) does not cancel the others' lookup
        return await asyncio.shield(task)

    async def _look_up(self, digest: str) -> Principal | None:
        generation, started = self._generation, self._clock()
        principal = await self._lookup(digest)
        if principal is None:
            self._known.pop(digest, None)
        elif generation == self._generation:
            left = self._seconds if principal.valid_for is None else min(self._seconds, principal.valid_for)
            self._known[digest] = (started + left, principal)
            if len(self._known) >= self._sweep_at:
                self._sweep()
        return principal

    def _sweep(self) -> None:
        now = self._clock()
        for digest in [d for d, (until, _) in self._known.items() if until <= now]:
            del self._known[digest]
        self._sweep_at = max(SWEEP_AT, 2 * len(self._known))  # each sweep pays for the inserts before it

    def _done(self, digest: str, task: asyncio.Task[Principal | None]) -> None:
        self._running.discard(task)
        if self._pending.get(digest) is task:
            del self._pending[digest]
        if not task.cancelled():
            task.exception()  # retrieved: every waiter got it already

    def forget(self, digest: str) -> None:
        """A revoked token stops working on this server at once."""
        self._generation += 1
        self._known.pop(digest, None)
        self._pending.pop(digest, None)

    def forget_user(self, user_id: int) -> None:
        """A changed or disabled user's tokens are looked up again."""
        self._generation += 1
        for digest in [d for d, (_, p) in self._known.items() if p.user_id == user_id]:
            self._known.pop(digest, None)
        self._pending.clear()  # whose they are is not known before they end

    async def close(self) -> None:
        """Cancel the lookups still under way (their callers are gone)."""
        tasks, self._pending = list(self._running), {}
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
