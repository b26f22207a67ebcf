"""The API server's token cache (engine/api/tokencache.py): concurrent calls with an uncached token share one
lookup; a forgotten token or user is never served from a lookup that was under way when it was forgotten;
with a cache time of 0 every call looks for itself; a caller that goes away does not cancel the others."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from engine.accounts.tokens import create_token, ensure_user, token_hash
from engine.api import tokens
from engine.api.access import Principal
from engine.api.tokencache import SWEEP_AT, TokenCache


def who(user_id: int = 7) -> Principal:
    return Principal(user_id, f"u{user_id}", False, None, "token", 1)


class Lookups:
    """The database's side: counts lookups and holds each one until released."""

    def __init__(self, answer: Principal | None) -> None:
        self.answer, self.calls, self.release = answer, 0, asyncio.Event()
        self.counted = asyncio.Condition()

    async def __call__(self, digest: str) -> Principal | None:
        async with self.counted:
            self.calls += 1
            self.counted.notify_all()
        await self.release.wait()
        return self.answer


async def _started(lookups: Lookups, calls: int) -> None:
    async with lookups.counted:
        await lookups.counted.wait_for(lambda: lookups.calls >= calls)


async def test_concurrent_calls_with_a_new_token_share_one_lookup_and_then_the_cache() -> None:
    lookups = Lookups(who())
    cache = TokenCache(10, lookups)
    calls = [asyncio.create_task(cache.principal("d")) for _ in range(50)]
    await _started(lookups, 1)
    lookups.release.set()
    assert [p.user_id if p else None for p in await asyncio.gather(*calls)] == [7] * 50
    assert lookups.calls == 1
    assert (await cache.principal("d")) == who() and lookups.calls == 1  # cached now


async def test_without_a_cache_time_every_call_looks_for_itself() -> None:
    lookups = Lookups(who())
    lookups.release.set()
    cache = TokenCache(0, lookups)
    await asyncio.gather(*(cache.principal("d") for _ in range(5)))
    assert lookups.calls == 5


async def test_an_unknown_token_is_not_cached() -> None:
    lookups = Lookups(None)
    lookups.release.set()
    cache = TokenCache(10, lookups)
    assert await cache.principal("d") is None
    assert await cache.principal("d") is None
    assert lookups.calls == 2


@pytest.mark.parametrize("forget", ["token", "user"])
async def test_a_lookup_under_way_when_its_token_is_forgotten_is_neither_cached_nor_shared(forget: str) -> None:
    lookups = Lookups(who())
    cache = TokenCache(10, lookups)
    early = asyncio.create_task(cache.principal("d"))
    await _started(lookups, 1)
    cache.forget("d") if forget == "token" else cache.forget_user(7)
    late = asyncio.create_task(cache.principal("d"))  # after the revocation: a lookup of its own
    await _started(lookups, 2)
    lookups.release.set()
    await asyncio.gather(early, late)
    await cache.principal("d")
    # the early lookup was not cached; the late one was, so a third call looks nothing up
    assert lookups.calls == 2


async def test_a_caller_that_goes_away_does_not_cancel_the_shared_lookup() -> None:
    lookups = Lookups(who())
    cache = TokenCache(10, lookups)
    first = asyncio.create_task(cache.principal("d"))
    second = asyncio.create_task(cache.principal("d"))
    await _started(lookups, 1)
    first.cancel()
    lookups.release.set()
    assert (await second) == who()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert lookups.calls == 1


@pytest.mark.parametrize("forgotten", [False, True])
async def test_close_cancels_the_lookups_under_way(forgotten: bool) -> None:
    """Shared lookups, and one whose token was forgotten while it ran (no longer shared, still running)."""
    lookups = Lookups(who())
    cache = TokenCache(10, lookups)
    call = asyncio.create_task(cache.principal("d"))
    await _started(lookups, 1)
    if forgotten:
        cache.forget("d")
    await cache.close()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert not cache._running


async def test_a_token_is_not_served_from_the_cache_past_its_expiry() -> None:
    now = [100.0]
    expiring = Principal(7, "u7", False, None, "token", 1, valid_for=5)
    lookups = Lookups(expiring)
    lookups.release.set()
    cache = TokenCache(60, lookups, clock=lambda: now[0])
    assert await cache.principal("d") == expiring
    now[0] = 104.0
    assert await cache.principal("d") == expiring and lookups.calls == 1  # still valid: from the cache
    now[0] = 105.0
    lookups.answer = None  # expired: the database no longer finds it
    assert await cache.principal("d") is None
    assert lookups.calls == 2


async def test_a_looked_up_token_says_how_long_it_stays_valid(pool: asyncpg.Pool) -> None:
    """The cache's bound comes from the database's clock: the token row's expiry less now()."""
    async with pool.acquire() as conn:
        user_id = await ensure_user(conn, "expiring", admin=False)
        soon = await conn.fetchval("SELECT now() + interval '30 seconds'")
        _, expiring = await create_token(conn, user_id, "soon", soon)
        _, lasting = await create_token(conn, user_id, "never")
    found = await tokens.token_user(pool, token_hash(expiring))
    assert found is not None and found.valid_for is not None and 0 < found.valid_for <= 30
    found = await tokens.token_user(pool, token_hash(lasting))
    assert found is not None and found.valid_for is None


async def test_a_failed_lookup_reaches_every_caller_sharing_it_and_is_not_remembered() -> None:
    """The database down: each caller gets the error (the API answers 503), the next call looks again."""
    lookups = Lookups(who())
    cache = TokenCache(10, lookups)

    async def refused(digest: str) -> Principal | None:
        await lookups(digest)
        raise ConnectionRefusedError("the database is down")

    cache._lookup = refused
    calls = [asyncio.create_task(cache.principal("d")) for _ in range(3)]
    await _started(lookups, 1)
    lookups.release.set()
    for outcome in await asyncio.gather(*calls, return_exceptions=True):
        assert isinstance(outcome, ConnectionRefusedError)
    assert not cache._pending and not cache._running and not cache._known
    cache._lookup = lookups
    assert await cache.principal("d") == who() and lookups.calls == 2


async def test_tokens_used_once_do_not_stay_in_the_cache_for_ever() -> None:
    now = [0.0]
    lookups = Lookups(who())
    lookups.release.set()
    cache = TokenCache(10, lookups, clock=lambda: now[0])
    for n in range(3 * SWEEP_AT):
        now[0] = n / SWEEP_AT * 20  # each token is looked up once, and expires 10 s later
        await cache.principal(f"d{n}")
    assert len(cache._known) <= SWEEP_AT
    assert await cache.principal(f"d{3 * SWEEP_AT - 1}") == who() and lookups.calls == 3 * SWEEP_AT  # still held
