"""The delay switch (tests/delay_switch.py), the multi-host harness's link layer on kernels without
``sch_netem``: two namespaces through it, a TCP echo server in one and a client in the other. Its
delay is a functional property of the emulation, so a round trip's lower bound is asserted (two
one-way delays); nothing about how fast it is (bench/hosts.py measures that)."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from engine.infra.process import in_netns
from tests.delay_switch import Port, Switch
from tests.helpers import ROOT, eventually
from tests.hosts import Network, network

PORT = 7000
#: connect plus these round trips per exchange
ROUND_TRIPS = 3


def _mac(n: int) -> bytes:
    """MAC 02:00:00:00:00:<n>; 0xff: broadcast."""
    return b"\xff" * 6 if n == 0xFF else bytes([2, 0, 0, 0, 0, n])


def _frame(dst: int, src: int, body: bytes) -> bytes:
    return _mac(dst) + _mac(src) + b"\x08\x00" + body


def _received(sock: socket.socket) -> list[bytes]:
    frames = []
    while True:
        try:
            frames.append(sock.recv(65536)[14:])
        except BlockingIOError:
            return frames


async def test_frames_leave_in_order_after_the_delay_to_the_learned_port_or_else_to_all() -> None:
    """The forwarding itself, on message-preserving socket pairs instead of TAPs (no root needed)."""
    loop = asyncio.get_running_loop()
    pairs = [socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET) for _ in range(3)]
    hosts = [a for a, _ in pairs]  # the hosts' ends; the switch's are the others
    for sock in (s for pair in pairs for s in pair):
        sock.setblocking(False)
    switch = Switch(loop, [Port(f"p{i}", b.fileno()) for i, (_, b) in enumerate(pairs)], 0.05)
    try:
        start = loop.time()
        hosts[0].send(_frame(0xFF, 1, b"hello"))  # broadcast from MAC 1 on port 0: flooded, 1 learned
        await eventually(lambda: _received(hosts[1]) == [b"hello"], timeout=5)
        assert loop.time() - start >= 0.05
        assert _received(hosts[2]) == [b"hello"] and _received(hosts[0]) == []
        switch.delay = 0.2
        start = loop.time()
        hosts[1].send(_frame(1, 2, b"first"))  # to the learned MAC 1: port 0 only
        await eventually(lambda: switch.counts["received"] == 2, timeout=5, what="the switch took 'first'")
        switch.delay = 0.0
        hosts[2].send(_frame(1, 3, b"second"))
        got: list[bytes] = []
        await eventually(lambda: got.extend(_received(hosts[0])) or len(got) == 2, timeout=5)
        assert got == [b"first", b"second"], "a frame overtook one ahead of it when the delay was lowered"
        assert loop.time() - start >= 0.2
        assert _received(hosts[1]) == [] and _received(hosts[2]) == []
        assert switch.counts == {"received": 3, "sent": 4, "dropped": 0}
    finally:
        switch.close()
        for sock in hosts:
            sock.close()
        for _, b in pairs:
            b.detach()  # closed by the switch


@contextmanager
def echo_server(net: Network, name: str) -> Iterator[str]:
    """A TCP echo server on host ``name``; yields its address once it listens."""
    h = net.host(name)
    argv = in_netns(h.netns, [sys.executable, "-m", "tests.netprobe", "echo", h.address, str(PORT)])
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT) as proc:
        try:
            assert proc.stdout is not None and proc.stderr is not None
            line = proc.stdout.readline()  # the server prints one line once it listens, or exits
            assert json.loads(line or "{}").get("ready"), proc.stderr.read()
            yield h.address
        finally:
            proc.kill()


def exchange(net: Network, client: str, server: str, timeout: float = 2.0) -> dict[str, object]:
    return net.probe(client, "tcp", server, str(PORT), "--count", str(ROUND_TRIPS), "--timeout", str(timeout))


@pytest.mark.slow  # real processes in namespaces, a few seconds
def test_every_tcp_round_trip_through_the_switch_takes_its_delay_both_ways() -> None:
    with network(["a", "b"], link="switch", delay_ms=50) as net, echo_server(net, "a") as address:
        result = exchange(net, "b", address)
        assert "error" not in result, result
        # SYN there, SYN-ACK back; each line there and back: two one-way delays of 50 ms at least
        assert result["connect_s"] >= 0.1, result
        assert len(result["rtt_s"]) == ROUND_TRIPS and min(result["rtt_s"]) >= 0.1, result  # type: ignore[arg-type]


@pytest.mark.slow  # real processes in namespaces, a few seconds
def test_with_no_delay_the_switch_forwards_and_its_delay_can_be_set_while_it_runs() -> None:
    with network(["a", "b"], link="switch", delay_ms=0) as net, echo_server(net, "a") as address:
        result = exchange(net, "b", address)
        assert "error" not in result and len(result["rtt_s"]) == ROUND_TRIPS, result  # type: ignore[arg-type]
        net.delay(50)
        result = exchange(net, "b", address)
        assert "error" not in result and min(result["rtt_s"]) >= 0.1, result  # type: ignore[type-var]


@pytest.mark.slow  # real processes in namespaces, a few seconds
def test_a_cut_host_gets_no_traffic_through_the_switch_until_restored() -> None:
    with network(["a", "b"], link="switch", delay_ms=0) as net, echo_server(net, "a") as address:
        assert "error" not in exchange(net, "b", address)
        assert net.switch is not None
        dropped = net.switch.stats()["dropped"]
        net.cut("a")
        result = exchange(net, "b", address, timeout=1.0)
        assert str(result.get("error", "")).startswith("connect"), result
        assert net.switch.stats()["dropped"] > dropped, "the SYNs to the cut host were not dropped by the switch"
        net.restore("a")
        result = exchange(net, "b", address)
        assert "error" not in result and len(result["rtt_s"]) == ROUND_TRIPS, result  # type: ignore[arg-type]
