"""The call stream: RPC calls as frames on one WebSocket per pair of nodes, beside ``POST /rpc/<method>``.

An HTTP call costs each side about a quarter of a millisecond of CPU (a request and a response parsed and
built, headers signed, a pooled connection checked out); a frame on an open stream about a tenth of that. A
node that serves streams says so on its HTTP answers (``X-Porpoise-Stream``); a caller that sees it opens one
in the background (``GET /rpc/stream``, signed like a call for the method ``stream`` with an empty body, so it
passes the same signature, replay and client-certificate checks) and sends later JSON calls on it. Files (a
``Request[Raw]``), bodies over ``STREAM_MAX_BODY`` or over the peer's ``rpc.max_body_bytes`` stay on HTTP, as do
calls to a node that serves no stream or whose stream is not open.

Frames (binary)::

    hello:  b"hello <server nonce> <max body bytes>"   the server's first frame; the stream is open after it
    call:   b"<seq> <method> <mac>\\n" + JSON body      mac: auth.frame_mac over both nonces, seq, method, body
    answer: b"<seq> <status> <epoch ms>\\n" + JSON body  status as HTTP's: 200, or 4xx/5xx with {"error": ...}

Both sides' nonces are in every frame's signature: a frame is good on its own stream only, even if its opening
were replayed to this or another node; sequence numbers rise strictly on a stream, so a frame is good once. A
frame with a bad signature or an old number closes the stream before anything runs. Each call runs as its own
task (a slow handler holds up no other call), at most ``limit_per_host`` at a time per stream, as over HTTP.

At the server's stop (``RpcServer.close_streams``, before the listener's cleanup, after which aiohttp drops
whatever arrives) the streams take no new call (each is answered ``STOPPING`` at once, before anything ran: the
caller stops using the stream and sends the call again over HTTP), the running calls have ``DRAIN_SECONDS`` to
finish and send their answers, then the streams close and, at the listener's cleanup, the calls still running
are cancelled.

The caller's errors keep ``rpc.errors``' meaning: a call waiting for its turn on the stream was not sent; a
frame handed to the connection may have been acted on (a timeout, or the stream closing before the answer:
``maybe_delivered``). WebSocket heartbeats find a silent peer: with nothing heard for ``max(2 x the RPC timeout,
HEARTBEAT_MIN)`` the caller pings, and drops the stream if no pong comes within half that; later calls use HTTP
until a stream is opened again.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import re
import secrets
import socket
import time
from collections.abc import Awaitable
from typing import Any, Protocol

import aiohttp
from aiohttp import web

from core import jsonbody, logs
from rpc import auth
from rpc.errors import BadRequest, RpcDisconnected, RpcRefused, RpcTimeout
from rpc.tls import peer_verified

log = logs.get(__name__)

STREAM_PATH = "/rpc/stream"
#: bodies larger than this go over HTTP (a large frame would hold up every call behind it on the stream)
STREAM_MAX_BODY = 256 << 10
#: seconds a caller waits before it tries again to open a stream that could not be opened
REOPEN_AFTER = 5.0
#: seconds the calls running at a server's stop have to finish, and to wait for the callers' close replies (both
#: within the node's 2 s shutdown step)
DRAIN_SECONDS = 1.0
CLOSE_SECONDS = 0.5
#: a caller pings after max(2 x its RPC timeout, this) seconds of silence and drops the stream without a pong
#: within half that: a peer must be stuck for 10 s or more (a busy 2-core machine stalls a loop for 1-2 s)
HEARTBEAT_MIN = 20.0
#: seconds the server waits for a pong when nothing came from a caller for twice this long (a gone caller)
SERVER_HEARTBEAT = 30.0
#: the answer status of a call that arrived after the server began to stop: refused, nothing ran (no handler
#: answers 0; the caller sends the call again over HTTP)
STOPPING = 0


_HEX = re.compile(rb"[0-9a-f]{8,64}")
_DIGITS = re.compile(rb"[0-9]{1,18}")


def _answer(seq: int, status: int, body: bytes) -> bytes:
    return b"%d %d %d\n" % (seq, status, int(time.time() * 1000)) + body


class _Serving(Protocol):
    secret: str
    max_skew: float
    max_body_bytes: int
    require_client_cert: bool
    replay: auth.ReplayGuard

    def handle(self, method: str, body: bytes, raw_ok: bool = False) -> Awaitable[tuple[int, Any]]: ...


class StreamServer:
    """The node's side of its callers' streams: each frame checked, then handled as a call in its own task."""

    def __init__(self, server: _Serving) -> None:
        self.server = server
        self._key = auth.frame_key(server.secret)
        self._sockets: set[web.WebSocketResponse] = set()
        self._calls: set[asyncio.Task[None]] = set()
        self._closing = False
        self._closed: asyncio.Task[None] | None = None
        #: seconds the running calls have at the stop (DRAIN_SECONDS)
        self.drain_seconds = DRAIN_SECONDS

    def __len__(self) -> int:
        """How many streams are open."""
        return len(self._sockets)

    async def serve(self, request: web.Request) -> web.StreamResponse:
        server = self.server
        if self._closing:
            return web.json_response({"error": "the node is stopping"}, status=503)
        if server.require_client_cert and not peer_verified(request.transport):
            return web.json_response({"error": "a client certificate signed by the cluster CA is required"}, status=401)
        header = request.headers.get(auth.HEADER)
        reason = auth.verify(server.secret, auth.STREAM_METHOD, b"", header, server.max_skew, replay=server.replay)
        if reason or header is None:
            return web.json_response({"error": reason}, status=401)
        mine = secrets.token_hex(12)
        nonces = f"{auth.nonce_of(header)}.{mine}"
        ws = web.WebSocketResponse(
            max_msg_size=server.max_body_bytes + 1024, compress=False, autoping=True, heartbeat=SERVER_HEARTBEAT
        )
        await ws.prepare(request)
        if self._closing:  # the stop began while the stream opened
            await ws.close(code=aiohttp.WSCloseCode.GOING_AWAY)
            return ws
        self._sockets.add(ws)
        try:
            await ws.send_bytes(b"hello %s %d" % (mine.encode(), server.max_body_bytes))
            await self._frames(ws, nonces, request.remote)
        finally:
            self._sockets.discard(ws)
            await ws.close()
        return ws

    async def _frames(self, ws: web.WebSocketResponse, nonces: str, peer: str | None) -> None:
        last = 0
        async for msg in ws:
            if msg.type is not aiohttp.WSMsgType.BINARY:
                return
            head, _, body = msg.data.partition(b"\n")
            parts = head.split(b" ")
            if len(parts) != 3 or not _DIGITS.fullmatch(parts[0]):
                log.warning("RPC stream closed: a malformed frame", peer=peer)
                return
            seq, method = int(parts[0]), parts[1].decode(errors="replace")
            if seq <= last or not hmac.compare_digest(parts[2], auth.frame_mac(self._key, nonces, seq, method, body)):
                log.warning("RPC stream closed: a frame with a bad signature or an old number", peer=peer)
                return
            last = seq
            if self._closing:  # refused before anything ran: the caller may send it elsewhere
                await _send(ws, _answer(seq, STOPPING, jsonbody.dumps({"error": "the node is stopping"})))
                continue
            call = asyncio.ensure_future(self._call(ws, seq, method, body))
            self._calls.add(call)
            call.add_done_callback(self._calls.discard)

    async def _call(self, ws: web.WebSocketResponse, seq: int, method: str, body: bytes) -> None:
        try:
            status, answer = await self.server.handle(method, body)
        except Exception:  # handle() answers a handler's failure itself: this is a bug of the server's own
            log.exception("RPC stream call failed", method=method)
            status, answer = 500, jsonbody.dumps({"error": f"{method} failed on the server; see its log"})
        await _send(ws, _answer(seq, status, answer))

    async def close(self, _: web.Application | None = None) -> None:
        """At the stop: take no new call, give the running ones ``drain_seconds`` to answer, close the streams.
        Once: a later call waits for the first one's end."""
        self._closing = True
        if self._closed is None:
            self._closed = asyncio.ensure_future(self._drain())
        await asyncio.wait([self._closed])

    async def _drain(self) -> None:
        if self._calls:
            await asyncio.wait(set(self._calls), timeout=self.drain_seconds)
        await self._close_all()

    async def _close_all(self) -> None:
        await asyncio.gather(*(self._close(ws) for ws in list(self._sockets)))

    @staticmethod
    async def _close(ws: web.WebSocketResponse) -> None:
        with contextlib.suppress(ConnectionError, RuntimeError, TimeoutError):
            await asyncio.wait_for(ws.close(code=aiohttp.WSCloseCode.GOING_AWAY), CLOSE_SECONDS)

    async def cancel(self, _: web.Application | None = None) -> None:
        """Once the listener is down: end the drain if it still runs, close what is open, cancel the calls."""
        self._closing = True
        if self._closed is not None and not self._closed.done():
            self._closed.cancel()
            await asyncio.gather(self._closed, return_exceptions=True)
        await self._close_all()
        for call in list(self._calls):
            call.cancel()
        await asyncio.gather(*self._calls, return_exceptions=True)


async def _send(ws: web.WebSocketResponse, frame: bytes) -> None:
    if not ws.closed:
        with contextlib.suppress(ConnectionError, RuntimeError):
            await ws.send_bytes(frame)


class StreamChannel:
    """The caller's side of one stream: calls numbered and signed onto it, answers matched by number."""

    def __init__(
        self, ws: aiohttp.ClientWebSocketResponse, address: str, key: bytes, nonces: str, max_body: int, slots: int
    ) -> None:
        self.ws = ws
        self.address = address
        self._key, self._nonces = key, nonces
        #: bodies up to this size go on the stream (the peer's limit, at most STREAM_MAX_BODY)
        self.max_body = min(max_body, STREAM_MAX_BODY)
        #: calls in flight at most (the client's limit_per_host, as for its HTTP connections)
        self._slots = asyncio.Semaphore(slots)
        self._seq = 0
        self._waiting: dict[int, asyncio.Future[tuple[int, int, bytes]]] = {}
        self.reader: asyncio.Task[None] | None = None
        #: the peer began to stop (it answered STOPPING): no more calls on this stream
        self.stopping = False

    @property
    def open(self) -> bool:
        return not (self.stopping or self.ws.closed) and self.reader is not None and not self.reader.done()

    async def call(self, method: str, body: bytes, timeout: float) -> tuple[int, int, bytes]:
        """(status, the peer's clock in epoch ms when it answered, the answer's body)."""
        answer: asyncio.Future[tuple[int, int, bytes]] | None = None
        seq = 0
        try:
            async with asyncio.timeout(timeout):
                async with self._slots:
                    if not self.open:  # closed while this call waited for its turn: nothing was sent
                        raise RpcRefused(f"{method} to {self.address}: the stream closed before the call was sent")
                    self._seq += 1
                    seq = self._seq
                    mac = auth.frame_mac(self._key, self._nonces, seq, method, body)
                    answer = self._waiting[seq] = asyncio.get_running_loop().create_future()
                    await self.ws.send_bytes(b"%d %s %s\n" % (seq, method.encode(), mac) + body)
                    return await answer
        except TimeoutError as exc:
            where = "" if answer is not None else " before the call was sent"
            text = f"{method} to {self.address} timed out after {timeout}s{where}"
            raise RpcTimeout(text, maybe_delivered=answer is not None) from exc
        except (ConnectionError, RuntimeError) as exc:  # the frame may be partly out: it may have arrived
            raise RpcDisconnected(f"{method} to {self.address}: the stream closed while sending: {exc}") from exc
        except RpcDisconnected as exc:
            raise RpcDisconnected(f"{method} to {self.address}: the stream closed before the answer") from exc
        finally:
            if answer is not None:
                self._waiting.pop(seq, None)
                if answer.done() and not answer.cancelled():
                    answer.exception()  # read: an answer failed by the reader after the caller left is no error

    async def read(self) -> None:
        """Match answers to their calls until the stream closes; then fail the calls still waiting."""
        try:
            async for msg in self.ws:
                if msg.type is not aiohttp.WSMsgType.BINARY:
                    break
                head, _, body = msg.data.partition(b"\n")
                parts = head.split(b" ")
                if len(parts) != 3 or not all(_DIGITS.fullmatch(p) for p in parts):
                    log.warning("RPC stream closed: a malformed answer", peer=self.address)
                    break
                answer = self._waiting.get(int(parts[0]))
                if answer is not None and not answer.done():
                    answer.set_result((int(parts[1]), int(parts[2]), body))
        finally:
            self._drop()
            for seq, answer in list(self._waiting.items()):
                if not answer.done():
                    answer.set_exception(RpcDisconnected(f"call {seq}: the stream closed"))

    def _drop(self) -> None:
        """Drop the connection now, unless closed already."""
        if not self.ws.closed and (sock := self.ws.get_extra_info("socket")) is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    async def close(self) -> None:
        with contextlib.suppress(ConnectionError, RuntimeError, TimeoutError):
            await asyncio.wait_for(self.ws.close(), 1)
        if self.reader is not None:
            self.reader.cancel()
            await asyncio.gather(self.reader, return_exceptions=True)


async def open_channel(
    session: aiohttp.ClientSession, url: str, address: str, secret: str, timeout: float, slots: int
) -> StreamChannel:
    """Open a stream to ``address`` (``url`` is its ``/rpc/stream``) and read its hello; raises aiohttp's or the
    timeout's error, or BadRequest for a hello that cannot be read."""
    header = auth.sign(secret, auth.STREAM_METHOD, b"")
    ws = await session.ws_connect(
        url,
        headers={auth.HEADER: header},
        timeout=aiohttp.ClientWSTimeout(ws_receive=None, ws_close=timeout),
        max_msg_size=0,
        compress=0,
        autoping=True,
        autoclose=True,
        heartbeat=max(2 * timeout, HEARTBEAT_MIN),
    )
    try:
        hello = await ws.receive(timeout)
        parts = hello.data.split(b" ") if hello.type is aiohttp.WSMsgType.BINARY else []
        if not (len(parts) == 3 and parts[0] == b"hello" and _HEX.fullmatch(parts[1]) and _DIGITS.fullmatch(parts[2])):
            raise BadRequest(f"stream to {address}: no hello from the server")
        nonces = f"{auth.nonce_of(header)}.{parts[1].decode()}"
        return StreamChannel(ws, address, auth.frame_key(secret), nonces, int(parts[2]), slots)
    except BaseException:
        await ws.close()
        raise
