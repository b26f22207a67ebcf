"""RPC server side: POST /rpc/<method> on a node's aiohttp application.

Every request is size-limited (413), checked for a verified client certificate when the listener serves mutual
TLS (``rpc.tls``; 401), signature-checked and checked against replay (401), decoded into its message type (400
naming the bad field), then handled. A handler returns its message's ``REPLY`` dataclass, which becomes the
JSON body, or, for a ``Request[Raw]`` (a log download), an aiohttp response returned as is; anything else
is a bug of the handler, answered 500. Unexpected handler errors are logged with their traceback and
answered 500 without one. Nothing is changed by a refused request: refusals happen before the
handler runs.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from aiohttp import StreamReader, web

from core import jsonbody, logs
from rpc import auth, codec
from rpc.auth import ReplayGuard
from rpc.errors import BadRequest
from rpc.messages import Raw, Request
from rpc.stream import STREAM_PATH, StreamServer
from rpc.tls import peer_verified

log = logs.get(__name__)

M = TypeVar("M", bound=Request[Any])

#: a handler: the decoded request -> its REPLY dataclass (or an aiohttp response for a Request[Raw])
Handler = Callable[[Any], Awaitable[object]]


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


async def _read_body(content: StreamReader, limit: int) -> bytes:
    """The body up to ``limit`` bytes (a read returns what has arrived so far: a large body takes several)."""
    chunks: list[bytes] = []
    size = 0
    while size < limit and (chunk := await content.read(limit - size)):
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _failure(status: int, message: str) -> tuple[int, bytes]:
    return status, jsonbody.dumps({"error": message})


class RpcServer:
    def __init__(
        self,
        app: web.Application,
        secret: str,
        max_skew: float = 60,
        max_body_bytes: int = 8 << 20,
        require_client_cert: bool = False,
        stream: bool = True,
    ):
        if not secret:
            raise ValueError("an RPC secret is required (rpc.secret)")
        self.secret = secret
        self.max_skew = max_skew
        self.max_body_bytes = max_body_bytes
        #: the listener serves mutual TLS: a call without a verified client certificate is refused
        self.require_client_cert = require_client_cert
        #: nonces of accepted calls within the signature window (a replayed call is refused)
        self.replay = ReplayGuard(max_skew)
        self._handlers: dict[str, tuple[type[Request[Any]], Handler]] = {}
        app.router.add_post("/rpc/{method}", self._serve)
        #: the call streams this node serves (GET /rpc/stream; rpc.stream), or None when it serves none
        self.streams: StreamServer | None = StreamServer(self) if stream else None
        if self.streams is not None:
            app.router.add_get(STREAM_PATH, self.streams.serve)
            app.on_shutdown.append(self.streams.close)
            app.on_cleanup.append(self.streams.cancel)

    async def close_streams(self) -> None:
        """At the stop, before the listener's cleanup (aiohttp drops what arrives on any connection once that
        began): the streams take no new call, the running ones answer (``rpc.stream.DRAIN_SECONDS``), they
        close; callers go on over HTTP while the listener still takes requests."""
        if self.streams is not None:
            await self.streams.close()

    def register(self, msg_cls: type[M], handler: Callable[[M], Awaitable[object]]) -> None:
        """Serve ``msg_cls`` with ``handler``, which answers with ``msg_cls.REPLY``."""
        method = getattr(msg_cls, "METHOD", None)
        reply = getattr(msg_cls, "REPLY", None)
        if not isinstance(method, str) or not (reply is Raw or dataclasses.is_dataclass(reply)):
            raise TypeError(f"{msg_cls.__name__} is not a request message (a Request[ReplyDataclass] with a METHOD)")
        if method in self._handlers:
            raise ValueError(f"RPC method {method} registered twice")
        self._handlers[method] = (msg_cls, handler)

    def registrations(self) -> dict[type[Request[Any]], Handler]:
        """Each registered request type and its handler."""
        return dict(self._handlers.values())

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        method = request.match_info["method"]
        if self.require_client_cert and not peer_verified(request.transport):
            return _error(401, "a client certificate signed by the cluster CA is required")
        if request.content_length is not None and request.content_length > self.max_body_bytes:
            return _error(413, f"body of {request.content_length} bytes exceeds {self.max_body_bytes}")
        try:
            body = await _read_body(request.content, self.max_body_bytes + 1)
        except (ConnectionError, web.HTTPException):
            return _error(400, "could not read the request body")
        if len(body) > self.max_body_bytes:
            return _error(413, f"body exceeds {self.max_body_bytes} bytes")
        reason = auth.verify(
            self.secret, method, body, request.headers.get(auth.HEADER), self.max_skew, replay=self.replay
        )
        if reason:
            return _error(401, reason)
        status, answer = await self.handle(method, body, raw_ok=True)
        if isinstance(answer, web.StreamResponse):
            return answer
        return web.Response(
            body=answer,
            status=status,
            content_type="application/json",
            headers=self._headers if status == 200 else None,
        )

    @property
    def _headers(self) -> dict[str, str]:
        headers = {auth.TIME_HEADER: str(int(time.time() * 1000))}  # callers measure their clock against ours
        if self.streams is not None:
            headers[auth.STREAM_HEADER] = "1"
        return headers

    async def handle(self, method: str, body: bytes, raw_ok: bool = False) -> tuple[int, bytes | web.StreamResponse]:
        """Run an authenticated call: (HTTP status, the JSON answer) or, for a ``Request[Raw]`` with ``raw_ok``,
        (200, the handler's response)."""
        entry = self._handlers.get(method)
        if entry is None:
            return _failure(404, f"unknown RPC method {method!r}")
        msg_cls, handler = entry
        expected = msg_cls.REPLY
        if expected is Raw and not raw_ok:
            return _failure(400, f"{method} is answered with raw bytes: call it over HTTP")
        try:
            data = json.loads(body)
        except ValueError as exc:
            return _failure(400, f"body is not valid JSON: {exc}")
        try:
            msg = codec.decode(msg_cls, data)
        except BadRequest as exc:
            return _failure(400, str(exc))
        try:
            reply = await handler(msg)
        except BadRequest as exc:
            return _failure(exc.status or 400, str(exc))
        except Exception:
            log.exception("RPC handler failed", method=method)
            return _failure(500, f"{method} failed on the server; see its log")
        if expected is Raw and isinstance(reply, web.StreamResponse):
            return 200, reply
        if type(reply) is not expected:
            log.error("RPC handler answered with the wrong type", method=method, expected=expected.__name__,
                      got=type(reply).__name__)  # fmt: skip
            return _failure(500, f"{method} failed on the server; see its log")
        return 200, codec.dumps_reply(reply)
