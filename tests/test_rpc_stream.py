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
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import ClassVar

import aiohttp
import pytest
from aiohttp import web

from engine.infra.ports import free_port
from rpc import BadRequest, RpcClient, RpcDisconnected, RpcRefused, RpcServer, RpcTimeout, auth
from rpc.messages import Request
from rpc.stream import STREAM_MAX_BODY, STREAM_PATH
from rpc.tls import client_context, server_context
from tests import tls
from tests.helpers import TEST_SECRET, eventually


@dataclass(frozen=True)
class EchoReply:
    text: str


@dataclass(frozen=True)
class Echo(Request[EchoReply]):
    METHOD: ClassVar[str] = "test.echo"
    text: str
    #: seconds the handler waits before it answers
    wait: float = 0
    #: the handler fails: "bad" (BadRequest), "boom" (an unexpected error)
    fail: str = ""


class Peer:
    """An RpcServer on loopback answering Echo; counts the calls it got over HTTP and the ones it handled."""

    def __init__(self, stream: bool = True, context: ssl.SSLContext | None = None) -> None:
        self.context = context or tls.server_ssl()
        self.app = web.Application()
        self.http_calls = 0
        self.handled: list[str] = []
        self.running: set[str] = set()
        self.cancelled: list[str] = []

        @web.middleware
        async def count(request: web.Request, handler):  # type: ignore[no-untyped-def]
            if request.method == "POST":
                self.http_calls += 1
            return await handler(request)

        self.app.middlewares.append(count)
        self.server = RpcServer(self.app, TEST_SECRET, require_client_cert=self.context is not None, stream=stream)
        self.server.register(Echo, self.echo)
        self.runner = web.AppRunner(self.app, access_log=None)
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"

    async def echo(self, msg: Echo) -> EchoReply:
        self.running.add(msg.text)
        try:
            if msg.wait:
                await asyncio.sleep(msg.wait)
        except asyncio.CancelledError:
            self.cancelled.append(msg.text)
            raise
        finally:
            self.running.discard(msg.text)
        if msg.fail == "bad":
            raise BadRequest("Echo.text: not today", 409)
        if msg.fail == "boom":
            raise RuntimeError("boom")
        self.handled.append(msg.text)
        return EchoReply(msg.text.upper())

    async def start(self) -> Peer:
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port, ssl_context=self.context).start()
        return self

    async def stop(self) -> None:
        await self.runner.cleanup()


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
async def _raw_stream(peer: Peer, header: str | None) -> AsyncIterator[aiohttp.ClientWebSocketResponse]:
    """A stream opened by hand with ``header`` as its signature."""
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(
            f"{'https' if tls.ENABLED else 'http'}://{peer.address}{STREAM_PATH}",
            headers={auth.HEADER: header} if header else {},
            ssl=tls.client_ssl() or True,
        ) as ws,
    ):
        yield ws


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


def _frame(seq: int, text: str, nonce: str = "", key: bytes = b"", mac: bytes | None = None) -> bytes:
    body = json.dumps({"text": text}).encode()
    mac = mac if mac is not None else auth.frame_mac(key, nonce, seq, Echo.METHOD, body)
    return b"%d %s %s\n" % (seq, Echo.METHOD.encode(), mac) + body


@pytest.mark.parametrize("fault", ["bad-signature", "replayed-number", "lower-number", "malformed", "text"])
async def test_a_bad_frame_closes_the_stream_before_anything_runs(fault: str) -> None:
    header = auth.sign(TEST_SECRET, auth.STREAM_METHOD, b"")
    nonce, key = auth.nonce_of(header), auth.frame_key(TEST_SECRET)
    first = _frame(5, "first", nonce, key)
    bad = {
        "bad-signature": _frame(6, "bad", mac=b"0" * 64),
        "replayed-number": _frame(5, "bad", nonce, key),
        "lower-number": _frame(4, "bad", nonce, key),
        "malformed": b"6 test.echo\n{}",
        "text": b"",
    }[fault]
    after = _frame(7, "after", nonce, key)
    async with _pair() as (peer, _):
        async with _raw_stream(peer, header) as ws:
            await ws.send_bytes(first)
            answer = await ws.receive(timeout=10)
            assert answer.data.split(b"\n", 1)[0].split(b" ")[:2] == [b"5", b"200"]
            if fault == "text":
                await ws.send_str("5 test.echo x\n{}")
            else:
                await ws.send_bytes(bad)
            with contextlib.suppress(ConnectionError):
                await ws.send_bytes(after)
            message = await ws.receive(timeout=10)
            assert message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.CLOSING)
        assert peer.handled == ["first"]  # neither the bad frame nor any after it ran


async def test_a_frame_signed_for_another_stream_is_refused() -> None:
    async with _pair() as (peer, _):
        one = auth.sign(TEST_SECRET, auth.STREAM_METHOD, b"")
        other = auth.sign(TEST_SECRET, auth.STREAM_METHOD, b"")
        async with _raw_stream(peer, other) as ws:
            await ws.send_bytes(_frame(1, "elsewhere", auth.nonce_of(one), auth.frame_key(TEST_SECRET)))
            message = await ws.receive(timeout=10)
            assert message.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.CLOSING)
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


async def test_a_timeout_with_the_peer_still_answering_keeps_the_stream() -> None:
    async with _pair() as (peer, rpc):
        await _streaming(rpc, peer)
        slow = asyncio.ensure_future(rpc.call(peer.address, Echo("slow", wait=5), timeout=1))
        await eventually(lambda: "slow" in peer.running, 10, "the slow call running")
        await rpc.call(peer.address, Echo("heard"))  # the peer answers on the stream after the slow call left
        with pytest.raises(RpcTimeout) as info:
            await slow
        assert info.value.maybe_delivered is True
        assert rpc.streams[peer.address].open
        assert (await rpc.call(peer.address, Echo("after"))).text == "AFTER" and peer.http_calls == 1


async def test_a_timeout_from_a_silent_peer_drops_the_stream_and_the_next_call_uses_http() -> None:
    async with _pair() as (peer, rpc):
        await _streaming(rpc, peer)
        channel = rpc.streams[peer.address]
        with pytest.raises(RpcTimeout) as info:
            await rpc.call(peer.address, Echo("slow", wait=3), timeout=0.3)
        assert info.value.maybe_delivered is True and not channel.open
        assert (await rpc.call(peer.address, Echo("next"))).text == "NEXT"
        assert peer.http_calls == 2


async def test_a_peer_that_dies_fails_the_calls_in_flight_as_maybe_delivered_and_the_next_is_refused() -> None:
    async with _pair() as (peer, rpc):
        await _streaming(rpc, peer)
        waiting = [asyncio.ensure_future(rpc.call(peer.address, Echo(f"w{i}", wait=30))) for i in range(3)]
        await eventually(lambda: len(peer.running) == 3, 10, "three calls running")
        await peer.stop()  # closes the streams and cancels the calls still running
        for call in waiting:
            with pytest.raises(RpcDisconnected) as info:
                await call
            assert info.value.maybe_delivered is True
        assert sorted(peer.cancelled) == ["w0", "w1", "w2"] and not peer.running
        with pytest.raises(RpcRefused) as refused:
            await rpc.call(peer.address, Echo("after"))
        assert refused.value.maybe_delivered is False


async def test_the_stream_comes_back_after_the_peer_restarts() -> None:
    async with _pair() as (peer, rpc):
        await _streaming(rpc, peer)
        await peer.stop()
        again = Peer()
        again.port, again.address = peer.port, peer.address
        await again.start()
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


async def test_closing_the_client_closes_its_streams() -> None:
    async with _pair() as (peer, rpc):
        await _streaming(rpc, peer)
        channel = rpc.streams[peer.address]
        await rpc.close()
        assert not channel.open and channel.reader is not None and channel.reader.done()
        await eventually(lambda: not len(peer.server.streams), 10, "the server's stream closed")


async def test_a_stream_that_fails_to_open_is_tried_again_later_not_at_every_call() -> None:
    async with _pair() as (peer, rpc):
        assert peer.server.streams is not None
        peer.server.streams._closing = True  # it answers 503 to a new stream from now on
        await rpc.call(peer.address, Echo("one"))
        await eventually(lambda: peer.address in rpc._retry_at, 10, "the stream given up for now")
        for i in range(3):
            await rpc.call(peer.address, Echo(f"m{i}"))
        assert not rpc.streams and not rpc._opening and peer.http_calls == 4
