"""RPC errors. aiohttp failures are translated here, at the client boundary.

::

    PorpoiseError (engine.errors)
    └── RpcError              the call failed (status / reason attached)
        ├── RpcTimeout        no answer within the timeout
        ├── RpcRefused        the peer could not be reached (connection refused, reset, DNS)
        ├── BadRequest        the peer answered 4xx: malformed body, unknown method, too large
        │   └── Unauthenticated   401: missing or bad signature
        └── (5xx)             the peer failed to handle a well-formed call
"""

from __future__ import annotations

from engine.errors import PorpoiseError


class RpcError(PorpoiseError):
    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class RpcTimeout(RpcError):
    pass


class RpcRefused(RpcError):
    pass


class BadRequest(RpcError):
    pass


class Unauthenticated(BadRequest):
    pass
