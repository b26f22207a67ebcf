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

from aiohttp import web

from core import logs
from rpc import auth, codec
from rpc.auth import ReplayGuard
from rpc.errors import BadRequest
from rpc.messages import Raw, Request
from rpc.tls import peer_verified

log = logs.get(__name__)

M = TypeVar("M", bound=Request[Any])

#: a handler: the decoded request -> its REPLY dataclass (or an aiohttp response for a Request[Raw])
Handler = Callable[[Any], Awaitable[object]]


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


class RpcServer:
    def __init__(
        self,
        app: web.Application,
        secret: str,
        max_skew: float = 60,
        max_body_bytes: int = 8 << 20,
        require_client_cert: bool = False,
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
            body = await request.content.read(self.max_body_bytes + 1)
        except (ConnectionError, web.HTTPException):
            return _error(400, "could not read the request body")
        if len(body) > self.max_body_bytes:
            return _error(413, f"body exceeds {self.max_body_bytes} bytes")
        reason = auth.verify(
            self.secret, method, body, request.headers.get(auth.HEADER), self.max_skew, replay=self.replay
        )
        if reason:
            return _error(401, reason)
        entry = self._handlers.get(method)
        if entry is None:
            return _error(404, f"unknown RPC method {method!r}")
        msg_cls, handler = entry
        try:
            data = json.loads(body)
        except ValueError as exc:
            return _error(400, f"body is not valid JSON: {exc}")
        try:
            msg = codec.decode(msg_cls, data)
        except BadRequest as exc:
            return _error(400, str(exc))
        try:
            reply = await handler(msg)
        except BadRequest as exc:
            return _error(exc.status or 400, str(exc))
        except Exception:
            log.exception("RPC handler failed", method=method)
            return _error(500, f"{method} failed on the server; see its log")
        expected = msg_cls.REPLY
        if expected is Raw and isinstance(reply, web.StreamResponse):
            return reply
        if type(reply) is not expected:
            log.error("RPC handler answered with the wrong type", method=method, expected=expected.__name__,
                      got=type(reply).__name__)  # fmt: skip
            return _error(500, f"{method} failed on the server; see its log")
        return web.Response(
            body=codec.dumps_reply(reply),
            content_type="application/json",
            headers={auth.TIME_HEADER: str(int(time.time() * 1000))},  # callers measure their clock against ours
        )
