"""Small asyncio helpers shared by the services that own background tasks."""

from __future__ import annotations

import asyncio
import contextlib
from typing import ClassVar


async def cancel_and_wait(*tasks: asyncio.Task[object] | None) -> None:
    """Cancel the given tasks (None entries are skipped) and wait until each has finished."""
    live = [t for t in tasks if t is not None]
    for task in live:
        task.cancel()
    for task in live:
        with contextlib.suppress(asyncio.CancelledError):
            await task


class BackgroundService:
    """Owns one background task running ``_run``: started once, cancelled and awaited on close."""

    task_name: ClassVar[str] = "background"
    _task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=self.task_name)

    async def close(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)

    async def _run(self) -> None:
        raise NotImplementedError
