"""The call stream (rpc/stream.py): JSON calls as signed, numbered frames on one WebSocket per pair of nodes.

In-process servers on loopback: the stream opens only where the peer offers one and only with a valid
signature (and client certificate, with the suite's TLS); a frame with a bad signature or an old number closes
it before anything runs; answers find their calls out of order; errors keep their meaning (4xx not delivered,
a timeout or a closed stream maybe delivered); calls go back to HTTP when the stream is gone and the stream
comes back; the server's stop closes streams and cancels the calls still running; a real master and worker
talk over it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import ssl
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import aiohttp
import pytest
from aiohttp import web

from engine.infra.ports import free_port
from rpc import BadRequest, RpcClient, RpcDisconnected, RpcError, RpcRefused, RpcTimeout, auth
from rpc import stream as stream_mod
from rpc.messages import Request
from rpc.stream import STREAM_MAX_BODY, STREAM_PATH
from rpc.tls import client_context, server_context
from tests import tls
from tests.helpers import TEST_SECRET, eventually
from tests.rpc_peer import Echo, EchoReply, Peer

ROOT = Path(__file__).resolve().parent.parent


@contextlib.asynccontextmanager
async def _pair(stream: bool = True, **client: object) -> AsyncIterator[tuple[Peer, RpcClient]]:
    peer = await Peer(stream).start()
    rpc = RpcClient(TEST_SECRET, ssl=tls.client_ssl(), **client)  # type: ignore[arg-type]
    try:
        yield peer, rpc
    finally:
        await rpc.close()
        await peer.stop()


async def _streaming(rpc: RpcClient, peer: Peer) -> None:
    """Make the first call (over HTTP: it brings the offer) and wait until the stream the client opens is up."""
    assert (await rpc.call(peer.address, Echo("hello"))).text == "HELLO"
    await eventually(
        lambda: peer.address in rpc.streams and rpc.streams[peer.address].open and len(peer.server.streams),
        10,
        "the stream open",
    )


@contextlib.asynccontextmanager
async def _raw_stream(peer: Peer, header: str | None) -> AsyncIterator[tuple[aiohttp.ClientWebSocketResponse, str]]:
    """A stream opened by hand with ``header`` as its signature: the socket, past the server's hello, and the
    stream's nonces (what its frames are signed over)."""
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(
            f"{'https' if tls.ENABLED else 'http'}://{peer.address}{STREAM_PATH}",
            headers={auth.HEADER: header} if header else {},
            ssl=tls.client_ssl() or True,
        ) as ws,
    ):
        hello = (await ws.receive(timeout=10)).data.split(b" ")
        assert hello[0] == b"hello" and header is not None
        yield ws, f"{auth.nonce_of(header)}.{hello[1].decode()}"


async def test_calls_go_on_the_stream_once_the_peer_offers_one() -> None:
    async with _pair() as (peer, rpc):
        await _streaming(rpc, peer)
        answers = await asyncio.gather(*(rpc.call(peer.address, Echo(f"m{i}")) for i in range(50)))
        assert [a.text for a in answers] == [f"M{i}" for i in range(50)]
        assert peer.http_calls == 1  # the first call only; fifty went on the stream
        assert sorted(peer.handled) == sorted(["hello", *(f"m{i}" for i in range(50))])


async def test_answers_find_their_calls_in_any_order() -> None:
    async with _pair() as (peer, rpc):
        await _streaming(rpc, peer)
        slow = asyncio.ensure_future(rpc.call(peer.address, Echo("slow", wait=0.5)))
        await eventually(lambda: "slow" in peer.running, 10, "the slow call running")
        fast = await rpc.call(peer.address, Echo("fast"))  # answered while the slow one still runs
        assert fast.text == "FAST" and not slow.done()
        assert (await slow).text == "SLOW"
        assert peer.http_calls == 1


async def test_no_stream_to_a_peer_that_offers_none() -> None:
    async with _pair(stream=False) as (peer, rpc):
        for i in range(3):
            assert (await rpc.call(peer.address, Echo(f"m{i}"))).text == f"M{i}"
        assert peer.http_calls == 3 and not rpc.streams
        with pytest.raises(BadRequest, match="HTTP 405"):  # GET /rpc/stream is not served
            await rpc.open_stream(peer.address)


async def test_a_client_told_not_to_stays_on_http() -> None:
    async with _pair(use_streams=False) as (peer, rpc):
        for i in range(3):
            await rpc.call(peer.address, Echo(f"m{i}"))
        assert peer.http_calls == 3 and not rpc.streams and not len(peer.server.streams)


@pytest.mark.parametrize("header", ["none", "bad", "other-method", "replayed"])
async def test_a_stream_opens_only_with_a_valid_signature(header: str) -> None:
    async with _pair() as (peer, _):
        good = auth.sign(TEST_SECRET, auth.STREAM_METHOD, b"")
        if header == "replayed":
            async with _raw_stream(peer, good):
                pass
        sent = {
            "none": None,
            "bad": auth.sign("another-secret-0123456789-abcdefghijklmno", auth.STREAM_METHOD, b""),
            "other-method": auth.sign(TEST_SECRET, "test.echo", b""),
            "replayed": good,
        }[header]
        with pytest.raises(aiohttp.WSServerHandshakeError) as info:
            async with _raw_stream(peer, sent):
                pass
        assert info.value.status == 401
        assert not len(peer.server.streams)


async def test_over_mutual_tls_a_stream_needs_the_cluster_s_client_certificate() -> None:
    files = tls.node_files()
    peer = await Peer(context=server_context(files)).start()
    rpc = RpcClient(TEST_SECRET, ssl=client_context(files))
    try:
        await _streaming(rpc, peer)  # with the certificate: the stream opens, calls go on it
        assert (await rpc.call(peer.address, Echo("tls"))).text == "TLS" and peer.http_calls == 1
        header = auth.sign(TEST_SECRET, auth.STREAM_METHOD, b"")
        async with aiohttp.ClientSession() as session:  # trusting the CA, but showing no certificate
            with pytest.raises(aiohttp.WSServerHandshakeError) as info:
                await session.ws_connect(
                    f"https://{peer.address}{STREAM_PATH}",
                    headers={auth.HEADER: header},
                    ssl=ssl.create_default_context(cafile=files.ca),
                )
        assert info.value.status == 401 and len(peer.server.streams) == 1
    finally:
        await rpc.close()
        await peer.stop()


def _frame(seq: int, text: str, nonces: str = "", mac: bytes | None = None) -> bytes:
    body = json.dumps({"text": text}).encode()
    mac = mac if mac is not None else auth.frame_mac(auth.frame_key(TEST_SECRET), nonces, seq, Echo.METHOD, body)
    return b"%d %s %s\n" % (seq, Echo.METHOD.encode(), mac) + body


_CLOSED = (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.CLOSING)


@pytest.mark.parametrize(
    "fault", ["bad-signature", "replayed-number", "lower-number", "malformed", "huge-number", "text"]
)
async def test_a_bad_frame_closes_the_stream_before_anything_runs(fault: str) -> None:
    header = auth.sign(TEST_SECRET, auth.STREAM_METHOD, b"")
    async with _pair() as (peer, _):
        async with _raw_stream(peer, header) as (ws, nonces):
            await ws.send_bytes(_frame(5, "first", nonces))
            answer = await ws.receive(timeout=10)
            assert answer.data.split(b"\n", 1)[0].split(b" ")[:2] == [b"5", b"200"]
            if fault == "text":
                await ws.send_str("6 test.echo x\n{}")
            else:
                bad = {
                    "bad-signature": _frame(6, "bad", mac=b"0" * 64),
                    "replayed-number": _frame(5, "bad", nonces),
                    "lower-number": _frame(4, "bad", nonces),
                    "malformed": b"6 test.echo\n{}",
                    "huge-number": b"9" * 5000 + b" test.echo " + b"0" * 64 + b"\n{}",
                }[fault]
                await ws.send_bytes(bad)
            with contextlib.suppress(ConnectionError):
                await ws.send_bytes(_frame(7, "after", nonces))
            message = await ws.receive(timeout=10)
            assert message.type in _CLOSED
        assert peer.handled == ["first"]  # neither the bad frame nor any after it ran


@pytest.mark.parametrize("other", ["caller", "server"])
async def test_a_frame_signed_for_another_stream_is_refused(other: str) -> None:
    """Each side's nonce is in a frame's signature: a frame of one stream is refused on another, even on one
    opened with the same (replayed) signature, whose server nonce differs."""
    async with _pair() as (peer, _):
        one, two = (auth.sign(TEST_SECRET, auth.STREAM_METHOD, b"") for _ in range(2))
        async with _raw_stream(peer, one) as (_, nonces_one), _raw_stream(peer, two) as (ws, nonces_two):
            if other == "caller":
                nonces = f"{nonces_one.split('.')[0]}.{nonces_two.split('.')[1]}"
            else:
                nonces = f"{nonces_two.split('.')[0]}.{nonces_one.split('.')[1]}"
            await ws.send_bytes(_frame(1, "elsewhere", nonces))
            message = await ws.receive(timeout=10)
            assert message.type in _CLOSED
        assert peer.handled == []


@pytest.mark.parametrize(
    ("fail", "kind", "status", "maybe"),
    [("bad", BadRequest, 409, False), ("boom", None, 500, True)],
    ids=["handler-refuses", "handler-fails"],
)
async def test_errors_on_the_stream_say_whether_the_handler_may_have_acted(fail, kind, status, maybe) -> None:  # type: ignore[no-untyped-def]
    async with _pair() as (peer, rpc):
        await _streaming(rpc, peer)
        with pytest.raises(Exception) as info:
            await rpc.call(peer.address, Echo("x", fail=fail))
        exc = info.value
        assert exc.status == status and exc.maybe_delivered is maybe  # type: ignore[attr-defined]
        if kind is not None:
            assert type(exc) is kind
        assert (await rpc.call(peer.address, Echo("still"))).text == "STILL"  # the stream stays open
        assert peer.http_calls == 1


async def test_an_unknown_method_on_the_stream_is_refused_and_not_delivered() -> None:
    @dataclass(frozen=True)
    class Nobody(Request[EchoReply]):
        METHOD: ClassVar[str] = "test.nobody"

    async with _pair() as (peer, rpc):
        await _streaming(rpc, peer)
        with pytest.raises(BadRequest, match="HTTP 404: unknown RPC method") as info:
            await rpc.call(peer.address, Nobody())
        assert info.value.maybe_delivered is False and peer.http_calls == 1


async def test_a_large_body_goes_over_http() -> None:
    async with _pair() as (peer, rpc):
        await _streaming(rpc, peer)
        big = "x" * (STREAM_MAX_BODY + 1)
        assert (await rpc.call(peer.address, Echo(big))).text == big.upper()
        assert peer.http_calls == 2 and rpc.streams[peer.address].open


async def test_a_body_over_the_peer_s_limit_is_refused_as_over_http_and_the_stream_stays() -> None:
    peer = await Peer(max_body_bytes=2048).start()
    rpc = RpcClient(TEST_SECRET, ssl=tls.client_ssl())
    try:
        await _streaming(rpc, peer)
        assert rpc.streams[peer.address].max_body == 2048
        assert (await rpc.call(peer.address, Echo("y" * 1500))).text == "Y" * 1500  # on the stream
        with pytest.raises(BadRequest, match="413") as info:
            await rpc.call(peer.address, Echo("z" * 3000))  # over HTTP, refused there: not delivered
        assert info.value.maybe_delivered is False
        assert rpc.streams[peer.address].open and peer.http_calls == 2
    finally:
        await rpc.close()
        await peer.stop()


async def test_one_call_timing_out_leaves_the_others_on_the_stream_alone() -> None:
    async with _pair() as (peer, rpc):
        await _streaming(rpc, peer)
        long = asyncio.ensure_future(rpc.call(peer.address, Echo("long", wait=1), timeout=5))
        with pytest.raises(RpcTimeout) as info:
            await rpc.call(peer.address, Echo("short", wait=3), timeout=0.3)
        assert info.value.maybe_delivered is True  # it was sent: it may run (it does)
        assert (await long).text == "LONG"
        assert rpc.streams[peer.address].open
        assert (await rpc.call(peer.address, Echo("after"))).text == "AFTER" and peer.http_calls == 1


async def test_calls_beyond_the_limit_wait_their_turn_and_one_that_times_out_waiting_was_not_sent() -> None:
    async with _pair(limit_per_host=2) as (peer, rpc):
        await _streaming(rpc, peer)
        most = 0

        async def watch() -> None:
            nonlocal most
            while True:
                most = max(most, len(peer.running))
                await asyncio.sleep(0.005)

        watcher = asyncio.ensure_future(watch())
        try:
            calls = [asyncio.ensure_future(rpc.call(peer.address, Echo(f"c{i}", wait=0.3))) for i in range(6)]
            await eventually(lambda: len(peer.running) == 2, 10, "two calls running")
            with pytest.raises(RpcTimeout, match="before the call was sent") as info:
                await rpc.call(peer.address, Echo("late"), timeout=0.1)  # behind six others
            assert info.value.maybe_delivered is False
            assert [c.text for c in await asyncio.gather(*calls)] == [f"C{i}" for i in range(6)]
        finally:
            watcher.cancel()
        assert most == 2 and "late" not in peer.handled


async def test_a_graceful_stop_answers_the_running_calls_and_refuses_new_ones_as_not_delivered() -> None:
    async with _pair() as (peer, rpc):
        await _streaming(rpc, peer)
        running = [asyncio.ensure_future(rpc.call(peer.address, Echo(f"r{i}", wait=0.5))) for i in range(3)]
        await eventually(lambda: len(peer.running) == 3, 10, "three calls running")
        channel = rpc.streams[peer.address]
        stopping = asyncio.ensure_future(peer.stop())
        assert peer.server.streams is not None
        await eventually(lambda: peer.server.streams._closing, 10, "the stop begun")
        # refused on the stream before anything ran, then sent over HTTP, which the node still takes
        assert (await rpc.call(peer.address, Echo("new"))).text == "NEW"
        assert channel.stopping and not channel.open and peer.http_calls == 2 and peer.handled.count("new") == 1
        assert [c.text for c in await asyncio.gather(*running)] == ["R0", "R1", "R2"]  # answered, not cut off
        await stopping
        assert not peer.cancelled


async def test_calls_still_running_after_the_drain_are_cancelled_and_in_doubt() -> None:
    async with _pair() as (peer, rpc):
        await _streaming(rpc, peer)
        assert peer.server.streams is not None
        streams = peer.server.streams
        streams.drain_seconds = 0.2
        drains = 0
        drain = streams._drain

        async def counted() -> None:
            nonlocal drains
            drains += 1
            await drain()

        streams._drain = counted  # type: ignore[method-assign]
        waiting = [asyncio.ensure_future(rpc.call(peer.address, Echo(f"w{i}", wait=30))) for i in range(3)]
        await eventually(lambda: len(peer.running) == 3, 10, "three calls running")
        await peer.stop()  # close_streams, then the listener's on_shutdown and on_cleanup: one drain, not three
        assert drains == 1
        for call in waiting:
            with pytest.raises(RpcDisconnected) as info:
                await call
            assert info.value.maybe_delivered is True
        assert sorted(peer.cancelled) == ["w0", "w1", "w2"] and not peer.running
        with pytest.raises(RpcRefused) as refused:
            await rpc.call(peer.address, Echo("after"))
        assert refused.value.maybe_delivered is False


async def test_a_call_the_server_cannot_answer_gets_a_500_not_a_wait() -> None:
    async with _pair() as (peer, rpc):
        await _streaming(rpc, peer)

        async def broken(method: str, body: bytes, raw_ok: bool = False) -> tuple[int, bytes]:
            raise RuntimeError("a bug in the server")

        peer.server.handle = broken  # type: ignore[method-assign]
        with pytest.raises(RpcError, match="HTTP 500") as info:
            await rpc.call(peer.address, Echo("x"), timeout=30)
        assert info.value.maybe_delivered is True


@contextlib.asynccontextmanager
async def _process_peer() -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    """A peer in its own process (tests/rpc_peer.py): (the process, its address)."""
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.rpc_peer", str(port), stdout=asyncio.subprocess.PIPE, cwd=ROOT
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        assert line.strip() == b"ready", line
        yield proc, f"127.0.0.1:{port}"
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()


async def _stream_to(rpc: RpcClient, address: str) -> None:
    await rpc.call(address, Echo("hello"))
    await eventually(lambda: address in rpc.streams and rpc.streams[address].open, 10, "the stream open")


async def test_a_peer_killed_mid_call_fails_it_as_maybe_delivered_and_the_next_call_is_refused() -> None:
    rpc = RpcClient(TEST_SECRET, ssl=tls.client_ssl())
    try:
        async with _process_peer() as (proc, address):
            await _stream_to(rpc, address)
            waiting = asyncio.ensure_future(rpc.call(address, Echo("w", wait=30), timeout=30))
            await asyncio.sleep(0)  # the frame goes out
            await asyncio.wait([waiting], timeout=0.3)
            proc.send_signal(signal.SIGKILL)
            with pytest.raises(RpcDisconnected) as info:
                await waiting
            assert info.value.maybe_delivered is True
            await proc.wait()
            with pytest.raises(RpcRefused) as refused:
                await rpc.call(address, Echo("after"))
            assert refused.value.maybe_delivered is False
    finally:
        await rpc.close()


async def test_a_stopped_peer_s_stream_is_dropped_by_the_heartbeat_and_comes_back_when_it_resumes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(stream_mod, "HEARTBEAT_MIN", 0.0)
    rpc = RpcClient(TEST_SECRET, timeout=0.5, ssl=tls.client_ssl())  # a ping after 1 s of silence
    try:
        async with _process_peer() as (proc, address):
            await _stream_to(rpc, address)
            channel = rpc.streams[address]
            proc.send_signal(signal.SIGSTOP)
            try:
                with pytest.raises(RpcTimeout) as info:
                    await rpc.call(address, Echo("stuck"))
                assert info.value.maybe_delivered is True
                await eventually(lambda: not channel.open, 20, "the silent stream dropped")
            finally:
                proc.send_signal(signal.SIGCONT)
            assert (await rpc.call(address, Echo("back"))).text == "BACK"  # over HTTP; the stream reopens
            await eventually(lambda: rpc.streams[address].open and rpc.streams[address] is not channel, 10, "reopened")
            assert (await rpc.call(address, Echo("again"))).text == "AGAIN"
    finally:
        await rpc.close()


async def test_the_stream_comes_back_after_the_peer_restarts() -> None:
    async with _pair() as (peer, rpc):
        await _streaming(rpc, peer)
        await peer.stop()
        again = await Peer(port=peer.port).start()
        try:
            await eventually(lambda: not rpc.streams[peer.address].open, 10, "the old stream closed")
            await _streaming(rpc, again)
            assert (await rpc.call(again.address, Echo("back"))).text == "BACK"
            assert again.http_calls == 1
        finally:
            await again.stop()


async def test_clock_readings_come_with_stream_answers() -> None:
    readings: list[tuple[str, float, float]] = []
    async with _pair(clock=lambda *r: readings.append(r)) as (peer, rpc):
        await _streaming(rpc, peer)
        before = len(readings)
        await rpc.call(peer.address, Echo("tick"))
        assert len(readings) == before + 1
        address, skew, uncertainty = readings[-1]
        assert address == peer.address and abs(skew) < 1 + uncertainty


async def test_closing_the_client_closes_its_streams_and_opens_none_meanwhile() -> None:
    async with _pair() as (peer, rpc):
        await _streaming(rpc, peer)
        channel = rpc.streams[peer.address]
        await rpc.close()
        assert not channel.open and channel.reader is not None and channel.reader.done()
        await eventually(lambda: not len(peer.server.streams), 10, "the server's stream closed")
        rpc._closing = True  # as while close() runs: an offer opens nothing
        rpc._offer(peer.address)
        assert not rpc._opening
        rpc._closing = False


async def test_a_stream_that_fails_to_open_is_tried_again_later_not_at_every_call() -> None:
    async with _pair() as (peer, rpc):
        assert peer.server.streams is not None
        peer.server.streams._closing = True  # it answers 503 to a new stream from now on
        await rpc.call(peer.address, Echo("one"))
        await eventually(lambda: peer.address in rpc._retry_at, 10, "the stream given up for now")
        for i in range(3):
            await rpc.call(peer.address, Echo(f"m{i}"))
        assert not rpc.streams and not rpc._opening and peer.http_calls == 4


@pytest.mark.parametrize("hello", [b"hello \xff\xfe 100", b"hello abcdef0123 " + b"9" * 5000, b"welcome", b""])
async def test_a_server_s_unreadable_hello_is_a_refusal_and_the_stream_is_not_tried_at_every_call(hello: bytes) -> None:
    async def serve(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_bytes(hello)
        async for _ in ws:
            pass
        return ws

    async def offer(_: web.Request) -> web.Response:
        return web.json_response({"text": "OFFERED"}, headers={auth.STREAM_HEADER: "1"})

    app = web.Application()
    app.router.add_get(STREAM_PATH, serve)
    app.router.add_post("/rpc/test.echo", offer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    rpc = RpcClient(TEST_SECRET)
    address = f"127.0.0.1:{port}"
    try:
        with pytest.raises(BadRequest, match="no hello"):
            await rpc.open_stream(address)
        await rpc.call(address, Echo("x"))  # the offer: a stream is tried in the background, and fails
        await eventually(lambda: address in rpc._retry_at, 10, "the stream given up for now")
        assert not rpc.streams
    finally:
        await rpc.close()
        await runner.cleanup()
