"""Small asyncio helpers shared by the services that own background tasks."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, TypeVar

from engine import logs

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


async def acquire_in_thread(
    release: Callable[[T], Awaitable[None] | None], fn: Callable[..., T], *args: Any, **kwargs: Any
) -> T:
    """``asyncio.to_thread(fn, ...)`` for a call that acquires something (opens a file, starts a process).

    Cancelling the wait does not stop the thread: what it acquires after the caller gave up would be
    leaked (a file left open, a task process running unowned). So on cancellation this waits for the
    thread (further cancellations meanwhile included), hands its result to ``release`` and re-raises."""
    call = asyncio.ensure_future(asyncio.to_thread(fn, *args, **kwargs))
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

    async def close(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)

    async def _run(self) -> None:
        raise NotImplementedError
