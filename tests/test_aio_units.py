"""core.aio: the supervised background loop."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import pytest

from core.aio import BackgroundService, ThreadTrips, acquire_in_thread, bounded
from engine.storage.failures import CONNECTION_LOST, DB_FAILURES
from tests.helpers import eventually


class Flaky(BackgroundService):
    task_name = "flaky"
    restart_delays = (0.01, 0.02)

    def __init__(self, failures: list[BaseException]) -> None:
        self.failures = failures
        self.calls = 0
        self.running = asyncio.Event()
        self.raised = asyncio.Event()

    async def _run(self) -> None:
        self.calls += 1
        if self.failures:
            self.raised.set()
            raise self.failures.pop(0)
        self.running.set()
        await asyncio.Event().wait()


async def test_an_unexpected_error_restarts_the_loop_instead_of_ending_it() -> None:
    svc = Flaky([asyncpg.InternalClientError("cannot switch to state 12"), RuntimeError("surprise")])
    svc.start()
    await asyncio.wait_for(svc.running.wait(), 5)
    assert (svc.calls, svc.restarts) == (3, 2)
    await svc.close()
    assert svc._task is None


async def test_close_cancels_a_loop_waiting_to_restart() -> None:
    svc = Flaky([RuntimeError("boom")])
    svc.restart_delays = (60.0, 60.0)
    svc.start()
    await asyncio.wait_for(svc.raised.wait(), 5)  # set in the step that raises: the supervisor is in its backoff now
    await asyncio.wait_for(svc.close(), 5)  # not the 60 s backoff
    assert (svc.calls, svc.restarts) == (1, 1)


@pytest.mark.parametrize(
    "exc",
    [
        asyncpg.InternalClientError("cannot switch to state 12; another operation (2) is in progress"),
        asyncpg.AdminShutdownError("terminating connection due to administrator command"),
        asyncpg.CannotConnectNowError("the database system is shutting down"),
        asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
        asyncpg.InterfaceError("connection is closed"),
        ConnectionResetError(),
        TimeoutError(),
    ],
)
def test_what_postgresql_going_away_raises_counts_as_a_lost_connection(exc: Exception) -> None:
    assert isinstance(exc, CONNECTION_LOST)
    assert isinstance(exc, DB_FAILURES)


def test_a_server_side_error_is_a_failure_but_not_a_lost_connection() -> None:
    exc = asyncpg.UniqueViolationError("duplicate key")
    assert not isinstance(exc, CONNECTION_LOST)  # an actor write must not retry what would fail again
    assert isinstance(exc, DB_FAILURES)


def _trip_acquire(release: Callable[[str], None], fn: Callable[[], str]) -> Awaitable[str]:
    return ThreadTrips().acquire(release, fn)


ACQUIRERS = pytest.mark.parametrize("acquirer", [acquire_in_thread, _trip_acquire], ids=["own", "trip"])


@ACQUIRERS
@pytest.mark.parametrize("cancellations", [1, 2])
async def test_what_a_thread_acquires_after_its_caller_gave_up_is_released(cancellations: int, acquirer: Any) -> None:
    started, proceed = threading.Event(), threading.Event()
    released: list[str] = []

    def acquire() -> str:
        started.set()
        proceed.wait(10)
        return "the resource"

    call = asyncio.create_task(acquirer(released.append, acquire))
    await asyncio.to_thread(started.wait, 10)  # the thread is inside acquire()
    for _ in range(cancellations):  # a second one arrives while it waits for the thread
        call.cancel()
        await asyncio.sleep(0)  # the cancellation is delivered
    proceed.set()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert released == ["the resource"]


@ACQUIRERS
async def test_what_a_thread_acquires_is_returned_when_nobody_cancels(acquirer: Any) -> None:
    released: list[str] = []
    assert await acquirer(released.append, lambda: "the resource") == "the resource"
    assert released == []


class SwallowsOneCancel(BackgroundService):
    """A poll loop whose library turns the cancellation into an error of its own, which the loop takes
    for a database failure and polls on (asyncpg's pool release after a query cut off by the network)."""

    task_name = "swallows"

    def __init__(self) -> None:
        self.polling = asyncio.Event()
        self.swallowed = 0

    async def _run(self) -> None:
        while True:
            try:
                self.polling.set()
                try:
                    await asyncio.sleep(3600)
                except asyncio.CancelledError:
                    if self.swallowed:
                        raise
                    raise asyncpg.InternalClientError("release() called on a free connection holder") from None
            except DB_FAILURES:
                self.swallowed += 1
            await asyncio.sleep(0.01)


async def test_closing_a_loop_whose_cancellation_was_turned_into_a_caught_error_still_stops_it() -> None:
    service = SwallowsOneCancel()
    service.start()
    await asyncio.wait_for(service.polling.wait(), 5)
    task = service._task
    closing = asyncio.ensure_future(service.close())
    await asyncio.wait([closing], timeout=5)  # not wait_for: its cancellation would stop the loop itself
    assert closing.done(), "close() waits for a loop that carries on"
    assert task is not None and task.done() and service.swallowed == 1
    closing.cancel()


async def test_a_loop_that_ignores_cancellation_for_good_is_abandoned_after_the_timeout() -> None:
    release = asyncio.Event()

    class Stuck(BackgroundService):
        task_name = "stuck"

        async def _run(self) -> None:
            while not release.is_set():
                with contextlib.suppress(asyncio.CancelledError):
                    await release.wait()

    service = Stuck()
    service.start()
    await asyncio.sleep(0)
    task = service._task
    await asyncio.wait_for(service.close(timeout=0.3), 5)  # returns although the loop runs on
    assert task is not None and not task.done()
    release.set()
    await asyncio.wait_for(task, 5)


async def test_a_shutdown_step_that_ignores_cancellation_is_abandoned_and_the_next_steps_run() -> None:
    release = asyncio.Event()
    ended: list[str] = []

    async def stubborn() -> None:
        while not release.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await release.wait()
        ended.append("stubborn")

    async def failing() -> None:
        raise RuntimeError("boom")

    async def quick() -> None:
        ended.append("quick")

    assert await bounded("stubborn", stubborn(), 0.05) is False  # overran, cancelled, ignored it: abandoned
    assert await bounded("failing", failing(), 1) is True  # ended in time: its error is logged, not raised
    assert await bounded("quick", quick(), 1) is True
    assert ended == ["quick"]
    release.set()  # the abandoned step ends once what it waited for comes
    await eventually(lambda: ended == ["quick", "stubborn"], 5, "the abandoned step to end")


class CountingExecutor(concurrent.futures.ThreadPoolExecutor):
    def __init__(self) -> None:
        super().__init__(max_workers=4)
        self.trips = 0

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        self.trips += 1
        return super().submit(fn, *args, **kwargs)


CALLER: contextvars.ContextVar[str] = contextvars.ContextVar("caller", default="nobody")


async def test_calls_made_in_one_turn_go_to_a_thread_in_one_trip_each_with_its_own_outcome_and_context() -> None:
    executor = CountingExecutor()
    asyncio.get_running_loop().set_default_executor(executor)
    trips = ThreadTrips()

    def work(n: int) -> tuple[str, int]:
        if n == 3:
            raise ValueError("three fails alone")
        return CALLER.get(), n * n

    async def caller(n: int) -> tuple[str, int]:
        CALLER.set(f"caller {n}")
        return await trips.run(work, n)

    outcomes = await asyncio.gather(*(caller(n) for n in range(6)), return_exceptions=True)
    assert executor.trips == 1
    assert outcomes[:3] == [("caller 0", 0), ("caller 1", 1), ("caller 2", 4)]
    assert isinstance(outcomes[3], ValueError) and outcomes[4:] == [("caller 4", 16), ("caller 5", 25)]
    # the next turn's calls make a trip of their own
    assert await trips.run(work, 7) == ("nobody", 49) and executor.trips == 2
    # past per_trip calls, a turn makes more trips (side by side on a slow disk)
    many = await asyncio.gather(*(trips.run(work, n) for n in range(20)), return_exceptions=True)
    assert [m for n, m in enumerate(many) if n != 3] == [("nobody", n * n) for n in range(20) if n != 3]
    assert executor.trips == 2 + 3  # 8 + 8 + 4


async def test_a_call_whose_caller_stopped_waiting_does_not_disturb_the_others_of_its_trip() -> None:
    trips, proceed, troubles = ThreadTrips(), threading.Event(), []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, context: troubles.append(context))
    blocked = trips.run(proceed.wait, 10)
    other = trips.run(lambda: "the other's result")  # the same turn: the same trip, behind the blocked call
    waited = asyncio.create_task(asyncio.wait_for(blocked, 0.01))
    with pytest.raises(TimeoutError):
        await waited
    assert not other.done()  # behind the blocked call, in the same trip
    proceed.set()
    assert await other == "the other's result"
    assert troubles == []


async def test_calls_after_the_executor_shut_down_fail_instead_of_waiting_for_ever() -> None:
    executor = CountingExecutor()
    asyncio.get_running_loop().set_default_executor(executor)
    executor.shutdown()
    with pytest.raises(RuntimeError):
        await ThreadTrips().run(lambda: "never")


class Unusual(BaseException):
    """Not an Exception: still its own caller's only."""


async def test_each_outcome_goes_back_when_its_call_returns_whatever_the_call_raised() -> None:
    trips, proceed = ThreadTrips(), threading.Event()

    def stop_iteration() -> None:
        raise StopIteration("a future cannot hold one")

    def unusual() -> None:
        raise Unusual

    quick = trips.run(lambda: "before the slow one")
    stopped = trips.run(stop_iteration)
    odd = trips.run(unusual)
    slow = trips.run(proceed.wait, 10)  # the same trip: behind the three above
    assert await quick == "before the slow one"  # while the slow call still runs
    with pytest.raises(RuntimeError, match="StopIteration"):
        await stopped
    with pytest.raises(Unusual):
        await odd
    assert not slow.done()
    proceed.set()
    assert await slow is True
