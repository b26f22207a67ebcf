"""RPC client side: one pooled aiohttp session per process, signed calls, timeouts, error mapping.

Each call follows whether its request started to be written (aiohttp's request-headers-sent trace
signal, which fires before the first byte goes out): a failure before that point cannot have reached
the peer (``RpcRefused``, or ``RpcTimeout`` with ``maybe_delivered=False``); one after it may have
(see ``rpc.errors``)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import ssl as ssl_mod
import time
from collections.abc import AsyncIterator, Callable
from types import SimpleNamespace
from typing import Any, TypeVar, cast

import aiohttp

from core import logs
from rpc import auth, codec
from rpc.errors import BadRequest, RpcDisconnected, RpcError, RpcRefused, RpcTimeout, Unauthenticated
from rpc.messages import Raw, Request
from rpc.stream import REOPEN_AFTER, STOPPING, STREAM_PATH, StreamChannel, open_channel

log = logs.get(__name__)

T = TypeVar("T")


class _Progress:
    """How far one call got: whether its request started to be written to a connection."""

    __slots__ = ("written",)

    def __init__(self) -> None:
        self.written = False


async def _headers_sent(_: aiohttp.ClientSession, ctx: SimpleNamespace, __: Any) -> None:
    progress = ctx.trace_request_ctx
    if isinstance(progress, _Progress):
        progress.written = True


def _tracing() -> aiohttp.TraceConfig:
    trace = aiohttp.TraceConfig()
    trace.on_request_headers_sent.append(_headers_sent)
    return trace


class RpcClient:
    """Calls ``POST http(s)://<address>/rpc/<method>`` with keep-alive connections reused across calls; with
    ``ssl`` (``rpc.tls.client_context``) over mutual TLS, presenting this node's certificate."""

    def __init__(
        self,
        secret: str,
        timeout: float = 5.0,
        limit_per_host: int = 32,
        observe: Callable[[str, float, str], None] | None = None,
        ssl: ssl_mod.SSLContext | None = None,
        clock: Callable[[str, float, float], None] | None = None,
        use_streams: bool = True,
    ) -> None:
        #: called after each call with (method, seconds, outcome: "ok" or the error's class name)
        self.observe = observe
        #: called after each answered call with (address, the peer's clock less ours in seconds, the
        #: uncertainty of that figure: half the round trip), from the answer's X-Porpoise-Time
        self.clock = clock
        self.secret = secret
        self.timeout = timeout
        self.limit_per_host = limit_per_host
        self.ssl = ssl
        self.scheme = "https" if ssl is not None else "http"
        self._session: aiohttp.ClientSession | None = None
        #: open call streams by address (rpc.stream), and the ones being opened or not to be tried before a time
        self.streams: dict[str, StreamChannel] = {}
        self._opening: dict[str, asyncio.Task[None]] = {}
        self._retry_at: dict[str, float] = {}
        self._closing = False
        #: send JSON calls on a stream where the peer offers one
        self.use_streams = use_streams

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                limit=0, limit_per_host=self.limit_per_host, keepalive_timeout=30, ssl=self.ssl or True
            )
            self._session = aiohttp.ClientSession(connector=connector, trace_configs=[_tracing()])
        return self._session

    async def close(self) -> None:
        self._closing = True  # no stream opens while closing (an answer arriving now offers one)
        try:
            for task in list(self._opening.values()):
                task.cancel()
            await asyncio.gather(*self._opening.values(), return_exceptions=True)
            channels, self.streams = list(self.streams.values()), {}
            await asyncio.gather(*(channel.close() for channel in channels))
            if self._session is not None:
                await self._session.close()
                self._session = None
                await asyncio.sleep(0)  # let the closed transports run their close callbacks
        finally:
            self._closing = False

    async def call(self, address: str, msg: Request[T], *, timeout: float | None = None) -> T:
        """Send ``msg`` (a request dataclass) to ``address``; its reply, decoded into the request's ``REPLY``
        dataclass (fields the peer added are ignored, fields it lacks take their defaults)."""
        reply_cls = cast(type[T], msg.REPLY)
        if reply_cls is Raw:
            raise TypeError(f"{msg.METHOD} is answered with raw bytes: use fetch or stream")
        raw = await self.call_raw(address, msg.METHOD, _body(msg), timeout, streamable=True)
        try:
            data = json.loads(raw) if raw else {}
            if not isinstance(data, dict):
                raise ValueError(f"expected a JSON object, got {type(data).__name__}")
            return _decode_reply(reply_cls, data)
        except (ValueError, BadRequest, AttributeError, TypeError) as exc:
            # the peer handled the call (it answered 2xx) but its answer cannot be read
            raise RpcError(f"{msg.METHOD} to {address}: unreadable reply: {exc}", maybe_delivered=True) from exc

    async def fetch(self, address: str, msg: Request[Raw], timeout: float | None = None) -> bytes:
        """Send ``msg``; the raw reply body (for replies that are files rather than JSON)."""
        return await self.call_raw(address, msg.METHOD, _body(msg), timeout)

    async def call_raw(
        self, address: str, method: str, body: bytes, timeout: float | None = None, streamable: bool = False
    ) -> bytes:
        """The answer's body; with ``streamable`` (a JSON call) on the peer's call stream when one is open."""
        call = self._call_raw
        channel = self.streams.get(address) if streamable else None
        if channel is not None and channel.open and len(body) <= channel.max_body:
            call = functools.partial(self._call_stream, channel)
        if self.observe is None:
            return await call(address, method, body, timeout)
        start = time.perf_counter()
        outcome = "ok"
        try:
            return await call(address, method, body, timeout)
        except BaseException as exc:  # an RpcError's kind, or CancelledError
            outcome = type(exc).__name__
            raise
        finally:
            self.observe(method, time.perf_counter() - start, outcome)

    async def _call_raw(self, address: str, method: str, body: bytes, timeout: float | None = None) -> bytes:
        sent, started = time.time(), time.monotonic()
        async with self._request(address, method, body, aiohttp.ClientTimeout(total=timeout or self.timeout)) as resp:
            theirs = resp.headers.get(auth.TIME_HEADER, "")
            if theirs.isdigit():
                self._read_clock(address, int(theirs), sent, started)
            if self.use_streams and auth.STREAM_HEADER in resp.headers:
                self._offer(address)
            return await resp.read()

    async def _call_stream(
        self, channel: StreamChannel, address: str, method: str, body: bytes, timeout: float | None
    ) -> bytes:
        sent, started = time.time(), time.monotonic()
        status, theirs, answer = await channel.call(method, body, timeout or self.timeout)
        if status == STOPPING:  # the peer began to stop before the call arrived: nothing ran; HTTP while it can
            channel.stopping = True
            return await self._call_raw(address, method, body, timeout)
        if status >= 400:
            raise _status_error(method, address, status, answer)
        self._read_clock(address, theirs, sent, started)
        return answer

    def _read_clock(self, address: str, theirs_ms: int, sent: float, started: float) -> None:
        """Hand ``clock`` the peer's clock less ours, from an answer's time (``sent``: our wall clock when the
        call left, ``started``: our monotonic clock then); the uncertainty is half the round trip."""
        if self.clock is not None:
            trip = time.monotonic() - started
            self.clock(address, theirs_ms / 1000 - (sent + trip / 2), trip / 2)

    def _offer(self, address: str) -> None:
        """The peer serves a call stream: open one in the background (unless one is open or opening, or one
        failed to open lately)."""
        if self._closing or ((channel := self.streams.get(address)) is not None and channel.open):
            return
        if address in self._opening or time.monotonic() < self._retry_at.get(address, 0):
            return
        task = asyncio.ensure_future(self._open(address))
        self._opening[address] = task
        task.add_done_callback(lambda _: self._opening.pop(address, None))

    async def _open(self, address: str) -> None:
        try:
            await self.open_stream(address)
        except (RpcError, aiohttp.ClientError, OSError, TimeoutError) as exc:
            self._retry_at[address] = time.monotonic() + REOPEN_AFTER
            log.info("RPC stream not opened; calls stay on HTTP", peer=address, error=str(exc))

    async def open_stream(self, address: str) -> StreamChannel:
        """Open a call stream to ``address`` (replacing one open before): later JSON calls to it use it."""
        url = f"{self.scheme}://{address}{STREAM_PATH}"
        try:
            async with asyncio.timeout(self.timeout):
                channel = await open_channel(self._http(), url, address, self.secret, self.timeout, self.limit_per_host)
        except aiohttp.WSServerHandshakeError as exc:
            raise _status_error(auth.STREAM_METHOD, address, exc.status, exc.message.encode()) from exc
        if self._closing:
            await channel.close()
            raise RpcRefused(f"stream to {address}: the client is closing")
        channel.reader = asyncio.ensure_future(channel.read())
        old, self.streams[address] = self.streams.get(address), channel
        if old is not None:
            await old.close()
        return channel

    @contextlib.asynccontextmanager
    async def stream(
        self, address: str, msg: Request[Raw], idle_timeout: float | None = None
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        """Send ``msg``; the reply as a response whose body the caller reads in chunks (a file of any size
        passes through in bounded memory). No total time limit: connecting is bounded by the client's
        timeout, and every read by ``idle_timeout``. Errors while reading are mapped as for a call."""
        wait = idle_timeout or self.timeout
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.timeout, sock_read=wait)
        async with self._request(address, msg.METHOD, _body(msg), timeout) as resp:
            yield resp

    @contextlib.asynccontextmanager
    async def _request(
        self, address: str, method: str, body: bytes, timeout: aiohttp.ClientTimeout
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        headers = {"Content-Type": "application/json", auth.HEADER: auth.sign(self.secret, method, body)}
        url = f"{self.scheme}://{address}/rpc/{method}"
        progress = _Progress()
        limit = timeout.total or timeout.sock_read
        try:
            async with self._http().post(
                url, data=body, headers=headers, timeout=timeout, trace_request_ctx=progress
            ) as resp:
                if resp.status >= 400:
                    raise _status_error(method, address, resp.status, await resp.read())
                yield resp
        except TimeoutError as exc:
            where = "" if progress.written else " before the request was sent"
            raise RpcTimeout(
                f"{method} to {address} timed out after {limit}s{where}", maybe_delivered=progress.written
            ) from exc
        except aiohttp.ClientConnectionError as exc:
            text = f"{method} to {address}: {type(exc).__name__}: {exc}"
            if progress.written:  # reset / closed while the request was out: it may have been handled
                raise RpcDisconnected(text) from exc
            raise RpcRefused(text) from exc
        except aiohttp.ClientError as exc:
            raise RpcError(
                f"{method} to {address}: {type(exc).__name__}: {exc}", maybe_delivered=progress.written
            ) from exc


def _body(msg: Request[Any]) -> bytes:
    return codec.dumps(msg)


def _status_error(method: str, address: str, status: int, payload: bytes) -> RpcError:
    try:
        detail = json.loads(payload).get("error", "")
    except (ValueError, AttributeError):
        detail = payload[:200].decode(errors="replace")
    message = f"{method} to {address}: HTTP {status}: {detail}"
    if status == 401:
        return Unauthenticated(message, status)
    if 400 <= status < 500:  # refused before any handler ran: nothing was done
        return BadRequest(message, status)
    return RpcError(message, status, maybe_delivered=True)  # the handler ran (and failed) or a proxy answered


def _decode_reply(cls: type[T], data: dict[str, Any]) -> T:
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return codec.decode(cls, {k: v for k, v in data.items() if k in names})
