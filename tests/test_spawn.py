"""engine.worker.spawn: a task process started from a thread, and what a cancellation does to it."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import psutil

from engine.worker.spawn import spawn


def running(marker: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if marker in " ".join(p.info["cmdline"] or []) and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except psutil.Error:
            continue
    return found


async def test_a_process_whose_start_was_cancelled_does_not_run_on(tmp_path: Path) -> None:
    marker = f"porpoise-spawn-{uuid.uuid4().hex}"
    start = asyncio.create_task(spawn(["bash", "-c", f"sleep 60; : {marker}"], tmp_path, {"PATH": "/usr/bin:/bin"}))
    await asyncio.sleep(0)  # the start is under way in its thread (the await is what is cancelled)
    start.cancel()
    try:
        await start
    except asyncio.CancelledError:
        pass
    else:
        raise AssertionError("the start was not cancelled")
    assert running(marker) == []  # created by the thread all the same, then killed and reaped


async def test_a_started_process_is_watched_and_its_output_read(tmp_path: Path) -> None:
    child = await spawn(["bash", "-c", "echo out; echo err >&2; exit 3"], tmp_path, {"PATH": "/usr/bin:/bin"})
    output = await asyncio.wait_for(child.stdout.read(), 10)
    assert await asyncio.wait_for(child.wait(), 10) == 3
    assert output.split() == [b"out", b"err"]
