"""RPC errors. aiohttp failures are translated here, at the client boundary.

::

    PorpoiseError (core.errors)
    └── RpcError              the call failed (status / reason attached)
        ├── RpcTimeout        no answer within the timeout
        ├── RpcRefused        the peer could not be reached: nothing was sent (refused, DNS, no route)
        ├── RpcDisconnected   the connection broke after the request was written (reset, closed)
        ├── BadRequest        the peer answered 4xx: malformed body, unknown method, too large
        │   └── Unauthenticated   401: missing or bad signature
        └── (5xx)             the peer failed to handle a well-formed call

Every error says whether the peer may have acted on the request (``maybe_delivered``). It is False
only when that is certain: the connection was never made, so not one byte of the request was written
(``RpcRefused``, a timeout while connecting or waiting for a pooled connection), or the peer answered
4xx, which it does before any handler runs (a refused call changes nothing). A timeout after the
request was written, a reset or close while waiting for the reply, a 5xx, or a reply that cannot be
read leave it open: the peer may have handled the call. A caller whose request must not be acted on
twice (a dispatch) may not send it elsewhere on such an error before it knows.
"""

from __future__ import annotations

from core.errors import PorpoiseError


class RpcError(PorpoiseError):
    #: whether the peer may have received and acted on the request (False only when certainly not)
    maybe_delivered: bool = True

    def __init__(self, message: str, status: int = 0, maybe_delivered: bool | None = None) -> None:
        super().__init__(message)
        self.status = status
        if maybe_delivered is not None:
            self.maybe_delivered = maybe_delivered


class RpcTimeout(RpcError):
    pass


class RpcRefused(RpcError):
    maybe_delivered = False


class RpcDisconnected(RpcError):
    pass


class BadRequest(RpcError):
    maybe_delivered = False


class Unauthenticated(BadRequest):
    pass
