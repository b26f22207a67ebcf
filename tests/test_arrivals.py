"""Reports for instances a takeover is taking (engine/master/arrivals.py): held until the actor exists,
bounded in number and in time (then refused: the worker backs off and sends them again)."""

from __future__ import annotations

import asyncio

from engine.master.arrivals import Arrivals


async def test_a_report_waits_for_its_instance_s_takeover_and_goes_on_when_it_arrives() -> None:
    arrivals = Arrivals()
    arrivals.expect([1, 2])
    waiting = asyncio.create_task(arrivals.wait([1, 3], reports=2))  # 3: no takeover, nothing to wait for
    await asyncio.sleep(0)
    assert not waiting.done() and arrivals.held == 2
    arrivals.arrived([1])
    assert await waiting is True
    assert arrivals.held == 0 and arrivals.expecting(2) and not arrivals.expecting(1)
    assert await arrivals.wait([3]) is True  # not being taken over: at once


async def test_reports_beyond_the_limit_or_held_too_long_are_refused_not_held_forever() -> None:
    arrivals = Arrivals(limit=3, timeout=0.05)
    arrivals.expect([1])
    held = asyncio.create_task(arrivals.wait([1], reports=2))
    await asyncio.sleep(0)
    assert await arrivals.wait([1], reports=2) is False, "over the limit: refused at once"
    assert await held is False, "the takeover did not end within the timeout"
    assert arrivals.held == 0 and arrivals.held_total == 2
