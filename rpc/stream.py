"""The call stream: RPC calls as frames on one WebSocket per pair of nodes, beside ``POST /rpc/<method>``.

An HTTP call costs each side about a quarter of a millisecond of CPU (a request and a response parsed and
built, headers signed, a pooled connection checked out); a frame on an open stream about a tenth of that. A
node that serves streams says so on its HTTP answers (``X-Porpoise-Stream``); a caller that sees it opens one
in the background (``GET /rpc/stream``, signed like a call for the method ``stream`` with an empty body, so it
passes the same signature, replay and client-certificate checks) and sends later JSON calls on it. Files (a
``Request[Raw]``) and bodies over ``STREAM_MAX_BODY`` stay on HTTP, as do calls to a node that serves no stream
or whose stream is not open.

Frames (binary)::

    call:   b"<seq> <method> <mac>\\n" + JSON body      mac: auth.frame_mac over the stream's nonce, seq, method, body
    answer: b"<seq> <status> <epoch ms>\\n" + JSON body  status as HTTP's: 200, or 4xx/5xx with {"error": ...}

Sequence numbers rise strictly on a stream: a frame with a bad signature or an old number closes the stream
before anything runs. Each call runs as its own task (a slow handler holds up no other call), owned by the
server and cancelled when it stops; a handler whose caller went away still finishes, as over HTTP.

The caller's errors keep ``rpc.errors``' meaning: a frame handed to the connection may have been acted on
(a timeout or a stream closing before its answer: ``maybe_delivered``), a 4xx answer was not. A call that
times out closes its stream if nothing at all came back on it since the call was sent (the peer is gone
or stuck, as a timed-out HTTP connection is dropped); later calls use HTTP until the stream is reopened.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import Awaitable
from typing import Any, Protocol

import aiohttp
from aiohttp import web

from core import logs
from rpc import auth
from rpc.errors import RpcDisconnected, RpcTimeout
from rpc.tls import peer_verified

log = logs.get(__name__)

STREAM_PATH = "/rpc/stream"
#: bodies larger than this go over HTTP (a large frame would hold up every call behind it on the stream)
STREAM_MAX_BODY = 256 << 10
#: seconds a caller waits before it tries again to open a stream that could not be opened
REOPEN_AFTER = 5.0


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

    def __len__(self) -> int:
        """How many streams are open."""
        return len(self._sockets)

    async def serve(self, request: web.Request) -> web.StreamResponse:
        server = self.server
        if self._closing:
            return web.json_response({"error": "shutting down"}, status=503)
        if server.require_client_cert and not peer_verified(request.transport):
            return web.json_response({"error": "a client certificate signed by the cluster CA is required"}, status=401)
        header = request.headers.get(auth.HEADER)
        reason = auth.verify(server.secret, auth.STREAM_METHOD, b"", header, server.max_skew, replay=server.replay)
        if reason or header is None:
            return web.json_response({"error": reason}, status=401)
        nonce = auth.nonce_of(header)
        ws = web.WebSocketResponse(max_msg_size=server.max_body_bytes + 1024, compress=False, autoping=True)
        await ws.prepare(request)
        self._sockets.add(ws)
        last = 0
        try:
            async for msg in ws:
                if msg.type is not aiohttp.WSMsgType.BINARY:
                    break
                head, _, body = msg.data.partition(b"\n")
                parts = head.split(b" ")
                if len(parts) != 3 or not parts[0].isdigit():
                    log.warning("RPC stream closed: a malformed frame", peer=request.remote)
                    break
                seq, method = int(parts[0]), parts[1].decode(errors="replace")
                if seq <= last or parts[2] != auth.frame_mac(self._key, nonce, seq, method, body):
                    log.warning("RPC stream closed: a frame with a bad signature or an old number", peer=request.remote)
                    break
                last = seq
                call = asyncio.ensure_future(self._call(ws, seq, method, body))
                self._calls.add(call)
                call.add_done_callback(self._calls.discard)
        finally:
            self._sockets.discard(ws)
            await ws.close()
        return ws

    async def _call(self, ws: web.WebSocketResponse, seq: int, method: str, body: bytes) -> None:
        status, answer = await self.server.handle(method, body)
        if not ws.closed:
            with contextlib.suppress(ConnectionError):
                await ws.send_bytes(_answer(seq, status, answer))

    async def close(self, _: web.Application | None = None) -> None:
        """Stop taking streams and close the open ones (callers send their next calls over HTTP)."""
        self._closing = True
        await asyncio.gather(*(self._close(ws) for ws in list(self._sockets)))

    @staticmethod
    async def _close(ws: web.WebSocketResponse) -> None:
        with contextlib.suppress(ConnectionError, RuntimeError, TimeoutError):
            await asyncio.wait_for(ws.close(code=aiohttp.WSCloseCode.GOING_AWAY), 1)

    async def cancel(self, _: web.Application | None = None) -> None:
        """Cancel the calls still running (at the node's stop, once its listener is down)."""
        await self.close()
        for call in list(self._calls):
            call.cancel()
        await asyncio.gather(*self._calls, return_exceptions=True)


class StreamChannel:
    """The caller's side of one stream: calls numbered and signed onto it, answers matched by number."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, address: str, key: bytes, nonce: str) -> None:
        self.ws = ws
        self.address = address
        self._key, self._nonce = key, nonce
        self._seq = 0
        self._waiting: dict[int, asyncio.Future[tuple[int, int, bytes]]] = {}
        #: time.monotonic() when the peer last sent anything on the stream
        self.heard = time.monotonic()
        self.reader: asyncio.Task[None] | None = None
        self._aborted = False

    @property
    def open(self) -> bool:
        return not (self._aborted or self.ws.closed) and self.reader is not None and not self.reader.done()

    async def call(self, method: str, body: bytes, timeout: float) -> tuple[int, int, bytes]:
        """(status, the peer's clock in epoch ms when it answered, the answer's body)."""
        self._seq += 1
        seq = self._seq
        frame = b"%d %s %s\n" % (seq, method.encode(), auth.frame_mac(self._key, self._nonce, seq, method, body))
        answer = asyncio.get_running_loop().create_future()
        self._waiting[seq] = answer
        sent = time.monotonic()
        try:
            try:
                await self.ws.send_bytes(frame + body)
            except (ConnectionError, RuntimeError) as exc:  # the frame may be partly out: it may have arrived
                raise RpcDisconnected(f"{method} to {self.address}: stream closed while sending: {exc}") from exc
            try:
                async with asyncio.timeout(timeout):
                    return await answer
            except TimeoutError as exc:
                if self.heard < sent:  # nothing at all came back since: the peer is gone or stuck
                    self.abort()
                text = f"{method} to {self.address} timed out after {timeout}s"
                raise RpcTimeout(text, maybe_delivered=True) from exc
            except RpcDisconnected as exc:
                raise RpcDisconnected(f"{method} to {self.address}: the stream closed before the answer") from exc
        finally:
            self._waiting.pop(seq, None)

    async def read(self) -> None:
        """Match answers to their calls until the stream closes; then fail the calls still waiting."""
        try:
            async for msg in self.ws:
                self.heard = time.monotonic()
                if msg.type is not aiohttp.WSMsgType.BINARY:
                    break
                head, _, body = msg.data.partition(b"\n")
                parts = head.split(b" ")
                if len(parts) != 3 or not all(p.isdigit() for p in parts):
                    log.warning("RPC stream closed: a malformed answer", peer=self.address)
                    break
                answer = self._waiting.get(int(parts[0]))
                if answer is not None and not answer.done():
                    answer.set_result((int(parts[1]), int(parts[2]), body))
        finally:
            self.abort()
            for seq, answer in list(self._waiting.items()):
                if not answer.done():
                    answer.set_exception(RpcDisconnected(f"call {seq}: the stream closed"))

    def abort(self) -> None:
        """Take no more calls and drop the connection now (its reader then fails the calls still waiting)."""
        self._aborted = True
        sock = self.ws.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    async def close(self) -> None:
        with contextlib.suppress(ConnectionError, RuntimeError, TimeoutError):
            await asyncio.wait_for(self.ws.close(), 1)
        if self.reader is not None:
            self.reader.cancel()
            await asyncio.gather(self.reader, return_exceptions=True)


async def open_channel(
    session: aiohttp.ClientSession, url: str, address: str, secret: str, timeout: float
) -> StreamChannel:
    """Open a stream to ``address`` (``url`` is its ``/rpc/stream``); raises aiohttp's or the timeout's error."""
    header = auth.sign(secret, auth.STREAM_METHOD, b"")
    ws = await session.ws_connect(
        url,
        headers={auth.HEADER: header},
        timeout=aiohttp.ClientWSTimeout(ws_receive=None, ws_close=timeout),
        max_msg_size=0,
        compress=0,
        autoping=True,
        autoclose=True,
    )
    return StreamChannel(ws, address, auth.frame_key(secret), auth.nonce_of(header))


def error_of(body: bytes) -> str:
    """The ``error`` of an answer's body, or its start."""
    try:
        return str(json.loads(body).get("error", ""))
    except (ValueError, AttributeError):
        return body[:200].decode(errors="replace")
