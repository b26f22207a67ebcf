"""Small asyncio helpers shared by the services that own background tasks."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, TypeVar

from core import logs

log = logs.get(__name__)

T = TypeVar("T")


async def cancel_and_wait(*tasks: asyncio.Task[object] | None) -> None:
    """Cancel the given tasks (None entries are skipped) and wait until each has finished."""
    live = [t for t in tasks if t is not None]
    for task in live:
        task.cancel()
    for task in live:
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def cancel_until_done(task: asyncio.Task[Any], timeout: float | None = None) -> bool:
    """Cancel ``task`` and wait for it to end, cancelling it again at every step: a library may turn
    a cancellation into an error of its own that a loop catches and carries on from (asyncpg, when a
    query is cancelled while its connection's network is gone, raises InternalClientError from the
    pool's release, which the poller took for a database failure and polled on: a fenced master that
    never stopped). With ``timeout``, give up after it (a call that ignores cancellation for good)
    and return False: the task is abandoned. A task's own error is not raised here."""
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    while not task.done():
        task.cancel()
        step = 0.1 if deadline is None else min(0.1, deadline - loop.time())
        if step <= 0:
            return False
        await asyncio.wait([task], timeout=step)
    if not task.cancelled():
        task.exception()  # retrieved: the owner logged it already, or it ended on the cancellation
    return True


async def bounded(what: str, work: Awaitable[Any], timeout: float) -> bool:
    """Run one step of a shutdown for at most ``timeout`` seconds: past it the step is cancelled, and
    abandoned if it ignores the cancellation (cancel_until_done) for a moment more. Its error is logged,
    never raised (the next steps run anyway). True when it ended in time, error or not."""
    task = asyncio.ensure_future(work)
    await asyncio.wait([task], timeout=max(timeout, 0.0))
    if not task.done():
        log.warning("shutdown step overran its bound; cancelling it", step=what, seconds=timeout)
        if not await cancel_until_done(task, ABANDON_AFTER):
            log.error("shutdown step ignored its cancellation; abandoned", step=what)
        return False
    if not task.cancelled() and task.exception() is not None:
        log.error("shutdown step failed", step=what, error=repr(task.exception()))
    return True


#: seconds a cancelled shutdown step may take to end before it is abandoned
ABANDON_AFTER = 1.0


async def acquire_in_thread(
    release: Callable[[T], Awaitable[None] | None], fn: Callable[..., T], *args: Any, **kwargs: Any
) -> T:
    """``asyncio.to_thread(fn, ...)`` for a call that acquires something (opens a file, starts a process).

    Cancelling the wait does not stop the thread: what it acquires after the caller gave up would be
    leaked (a file left open, a task process running unowned). So on cancellation this waits for the
    thread (further cancellations meanwhile included), hands its result to ``release`` and re-raises."""
    return await _acquired(asyncio.ensure_future(asyncio.to_thread(fn, *args, **kwargs)), release)


async def _acquired(call: asyncio.Future[T], release: Callable[[T], Awaitable[None] | None]) -> T:
    """The outcome of ``call`` (a thread's work); if the wait is cancelled, waits for it (further cancellations
    meanwhile included), hands what it acquired to ``release`` and re-raises."""
    try:
        return await asyncio.shield(call)
    except asyncio.CancelledError:
        while not call.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait([call])
        if call.exception() is None:
            with contextlib.suppress(Exception):
                released = release(call.result())
                if inspect.isawaitable(released):
                    await released
        raise


class ThreadTrips:
    """Blocking calls made in one turn of the loop go to a thread together, in one trip: a worker starting
    or ending many tasks at once sets up (or closes) each one's files with one hand-over to a thread, not
    one per task (each a wake-up of a thread, a wake-up of the loop and two GIL hand-overs: with a dozen
    per batch, most of a busy worker's loop time went to them).

    The calls of a trip run one after the other, each in the context of its caller (its log ids). Each
    outcome goes back as soon as its call returns (one wake-up of the loop for the outcomes that arrive
    together): a slow call delays the calls after it in its trip, not those before. One that raises
    (whatever it raises) fails its own caller only. Trips run in the loop's default executor, several at
    once: a turn's calls past ``per_trip`` make further trips, so on a slow disk a batch of starts still
    goes to several threads side by side."""

    def __init__(self, per_trip: int = 8) -> None:
        self.per_trip = per_trip
        self._pending: list[_Call] = []
        self._flush: asyncio.Handle | None = None
        #: outcomes back from the threads, not handed to their futures yet (appended by the threads)
        self._back: collections.deque[tuple[asyncio.Future[Any], bool, Any]] = collections.deque()
        self._waking = False

    def run(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """``fn(*args)`` in the next trip; its outcome. A caller that stops waiting cancels the future, not the
        call (see ``acquire`` for a call that acquires something)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._pending.append((future, contextvars.copy_context(), fn, args))
        if self._flush is None:
            self._flush = loop.call_soon(self._send, loop)
        return future

    async def acquire(self, release: Callable[[T], Awaitable[None] | None], fn: Callable[..., T], *args: Any) -> T:
        """``acquire_in_thread`` in a trip: on cancellation, waits for the call and hands what it acquired to
        ``release`` before re-raising."""
        return await _acquired(self.run(fn, *args), release)

    def _send(self, loop: asyncio.AbstractEventLoop) -> None:
        self._flush = None
        pending, self._pending = self._pending, []
        for i in range(0, len(pending), self.per_trip):
            calls = pending[i : i + self.per_trip]
            try:
                trip = loop.run_in_executor(None, self._make_calls, loop, calls)
            except RuntimeError as exc:  # the executor is shut down (the loop is closing)
                for future, *_ in calls:
                    _settle(future, False, exc)
                continue
            trip.add_done_callback(functools.partial(_after_trip, calls))

    def _make_calls(self, loop: asyncio.AbstractEventLoop, calls: list[_Call]) -> None:
        """In a thread: each call, its outcome handed back as soon as it returns."""
        for future, ctx, fn, args in calls:
            try:
                outcome = (future, True, ctx.run(fn, *args))
            except BaseException as exc:  # the caller's to see, whatever it is; the trip goes on
                outcome = (future, False, exc)
            self._back.append(outcome)
            if not self._waking:  # else a wake-up is on its way and takes this one too
                self._waking = True
                with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                    loop.call_soon_threadsafe(self._deliver)

    def _deliver(self) -> None:
        self._waking = False  # first: an outcome appended from now on wakes the loop again
        while self._back:
            _settle(*self._back.popleft())


#: a call waiting for its trip: its future, its caller's context, the function and its arguments
_Call = tuple[asyncio.Future[Any], contextvars.Context, Callable[..., Any], tuple[Any, ...]]


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if future.done():  # its caller stopped waiting
        return
    if ok:
        future.set_result(value)
    elif isinstance(value, StopIteration):  # a future cannot hold one
        future.set_exception(RuntimeError(f"the call raised StopIteration: {value!r}"))
    else:
        future.set_exception(value)


def _after_trip(calls: list[_Call], trip: asyncio.Future[None]) -> None:
    """A trip that failed outside its calls (it never ran, or the executor's machinery failed): its calls
    not answered yet fail, rather than wait for ever."""
    if trip.cancelled() or trip.exception() is not None:
        why = RuntimeError("the trip to a thread did not run") if trip.cancelled() else trip.exception()
        for future, *_ in calls:
            _settle(future, False, why)


class BackgroundService:
    """Owns one background task running ``_run``: started once, cancelled and awaited on close.

    ``_run`` is supervised: an exception it did not expect is logged with its traceback and the loop
    starts again after a backoff (``restart_delays``), so a surprise from a library (say an asyncpg
    error class a loop's ``except`` did not name) cannot leave a master silently without its command
    poller or failover sweep.
    """

    task_name: ClassVar[str] = "background"
    restart_delays: ClassVar[tuple[float, float]] = (0.5, 30.0)  # first, cap (doubling)
    _task: asyncio.Task[None] | None = None
    restarts: int = 0

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._supervise(), name=self.task_name)

    async def _supervise(self) -> None:
        delay, cap = self.restart_delays
        while True:
            try:
                await self._run()
                return
            except Exception:
                self.restarts += 1
                log.exception("background loop failed; restarting it", service=self.task_name, restart_in=delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, cap)

    async def close(self, timeout: float | None = None) -> None:
        """Cancel the loop and wait for it; with ``timeout``, at most that long (then it is abandoned,
        logged: it ends when whatever ignores the cancellation returns, and ``start`` makes a new one)."""
        task, self._task = self._task, None
        if task is not None and not await cancel_until_done(task, timeout):
            log.error("background loop did not stop when cancelled; abandoned", service=self.task_name)

    async def _run(self) -> None:
        raise NotImplementedError
