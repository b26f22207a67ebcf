"""Small asyncio helpers shared by the services that own background tasks."""

from __future__ import annotations

import asyncio
import contextlib


async def cancel_and_wait(*tasks: asyncio.Task[object] | None) -> None:
    """Cancel the given tasks (None entries are skipped) and wait until each has finished."""
    live = [t for t in tasks if t is not None]
    for task in live:
        task.cancel()
    for task in live:
        with contextlib.suppress(asyncio.CancelledError):
            await task
