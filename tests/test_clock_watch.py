"""Each node measures its peers' clocks from their RPC answers (X-Porpoise-Time) and alarms past the margin
(an in-process RPC server on loopback whose clock is moved: no other process)."""

from __future__ import annotations

import time
import types
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from engine.clocks import SkewWatch
from engine.metrics import NodeMetrics
from rpc import RpcClient, RpcServer
from rpc import server as server_module
from rpc.messages import DispatchReply, TaskDispatch

SECRET = "a-test-secret-of-enough-length-0123456789"


@pytest.fixture
async def peer(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[str]:
    """A peer whose wall clock reads 5 s ahead of ours (its answers say so); its address."""
    real = time.time
    monkeypatch.setattr(server_module, "time", types.SimpleNamespace(time=lambda: real() + 5))
    app = web.Application()
    server = RpcServer(app, SECRET)

    async def handle(_: TaskDispatch) -> DispatchReply:
        return DispatchReply(True, "")

    server.register(TaskDispatch, handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def _dispatch() -> TaskDispatch:
    return TaskDispatch(1, 1, 2, 3, 4, "t", "SHELL", {"rawScript": "true"}, "m:1")


async def test_a_peer_s_clock_off_past_the_margin_is_measured_and_alarmed(peer: str) -> None:
    metrics = NodeMetrics("worker")
    watch = SkewWatch(1.0, metrics)
    seen: list[tuple[str, float, float]] = []

    def clock(address: str, skew: float, uncertainty: float) -> None:
        seen.append((address, skew, uncertainty))
        watch.observe(address, skew, uncertainty)

    client = RpcClient(SECRET, clock=clock)
    try:
        for _ in range(3):
            await client.call(peer, _dispatch())
    finally:
        await client.close()
    assert len(seen) == 3
    for address, skew, uncertainty in seen:
        assert address == peer and abs(skew - 5) <= uncertainty + 0.01  # ms resolution
    assert 4 < watch.skews[peer] < 6
    text = metrics.render().decode()
    assert "clock_skew_alarms_total 3.0" in text
    assert f'clock_skew_seconds{{peer="{peer}"}}' in text


def test_a_skew_within_the_margin_or_its_uncertainty_raises_no_alarm() -> None:
    metrics = NodeMetrics("worker")
    watch = SkewWatch(1.0, metrics)
    watch.observe("m:1", 0.8, 0.01)  # within the margin
    watch.observe("m:1", -1.5, 0.6)  # maybe within: the round trip was long
    watch.observe("m:1", -1.2, 0.1)  # certainly behind by more than 1 s
    assert "clock_skew_alarms_total 1.0" in metrics.render().decode()
    assert SkewWatch(0, None).margin == 0  # 0: measured only
