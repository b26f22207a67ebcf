"""aiohttp JSON RPC between nodes: typed, versioned messages, HMAC-signed calls, size limits,
timeouts, and clear 4xx errors for malformed or unauthenticated bodies."""

from rpc.client import RpcClient
from rpc.errors import BadRequest, RpcDisconnected, RpcError, RpcRefused, RpcTimeout, Unauthenticated
from rpc.server import RpcServer

__all__ = [
    "BadRequest",
    "RpcClient",
    "RpcDisconnected",
    "RpcError",
    "RpcRefused",
    "RpcServer",
    "RpcTimeout",
    "Unauthenticated",
]
