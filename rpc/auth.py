"""Shared-secret request signatures with a nonce against replay.

Header ``X-Porpoise-Signature: t=<unix seconds>,n=<nonce>,v1=<hex HMAC-SHA256(secret, "<t>.<n>.<method>.<body>")>``.
A request is accepted when the HMAC matches, ``t`` is within ``max_skew`` seconds of now, and its nonce was not
seen before within that window (:class:`ReplayGuard`). Over mutual TLS (``rpc.tls``) this is the second factor.
"""

from __future__ import annotations

import collections
import hashlib
import hmac
import secrets
import time

HEADER = "X-Porpoise-Signature"
#: on an RPC answer: this node also serves the call stream (rpc.stream); the caller may open one to it
STREAM_HEADER = "X-Porpoise-Stream"
#: the method a stream's opening request is signed for (with an empty body)
STREAM_METHOD = "stream"
#: on every RPC answer: the answering node's wall clock (epoch ms) when it answered (RpcClient.clock)
TIME_HEADER = "X-Porpoise-Time"


def _mac(secret: str, ts: str, nonce: str, method: str, body: bytes) -> str:
    return hmac.new(secret.encode(), f"{ts}.{nonce}.{method}.".encode() + body, hashlib.sha256).hexdigest()


def sign(secret: str, method: str, body: bytes, now: float | None = None, nonce: str | None = None) -> str:
    ts = str(int(now if now is not None else time.time()))
    nonce = nonce or secrets.token_hex(12)
    return f"t={ts},n={nonce},v1={_mac(secret, ts, nonce, method, body)}"


class ReplayGuard:
    """Nonces of accepted requests, each remembered until its timestamp can no longer pass the skew check.

    Entries leave in arrival order once ``2 * max_skew`` seconds old (a timestamp accepted at arrival is at most
    ``max_skew`` ahead of it, so it is out of the window by then); memory is the call rate times that window."""

    def __init__(self, max_skew: float) -> None:
        self.window = 2 * max_skew
        self._seen: set[str] = set()
        self._order: collections.deque[tuple[float, str]] = collections.deque()

    def __len__(self) -> int:
        return len(self._seen)

    def first_use(self, nonce: str, now: float) -> bool:
        """Record ``nonce``; False when it was already used within the window (a replay)."""
        while self._order and self._order[0][0] <= now:
            self._seen.discard(self._order.popleft()[1])
        if nonce in self._seen:
            return False
        self._seen.add(nonce)
        self._order.append((now + self.window, nonce))
        return True


def _fields(header: str) -> dict[str, str]:
    return dict(p.split("=", 1) for p in header.split(",") if "=" in p)


def nonce_of(header: str) -> str:
    """The nonce of a signature header (verified first)."""
    return _fields(header).get("n", "")


def frame_key(secret: str) -> bytes:
    """The key stream frames are signed with: derived from the secret, for this use only."""
    return hmac.digest(secret.encode(), b"porpoise-rpc-stream-v1", "sha256")


def frame_mac(key: bytes, nonces: str, seq: int, method: str, body: bytes) -> bytes:
    """The signature of one call on a stream: HMAC-SHA256 over the stream's nonces (the caller's, from its signed
    opening, and the server's, from its hello: a frame is valid on that one stream), the call's sequence number
    (strictly rising on it: a frame cannot be replayed there), the method and the body."""
    return hmac.digest(key, f"{nonces}.{seq}.{method}.".encode() + body, "sha256").hex().encode()


def verify(
    secret: str,
    method: str,
    body: bytes,
    header: str | None,
    max_skew: float,
    now: float | None = None,
    replay: ReplayGuard | None = None,
) -> str:
    """Empty string if valid (and, with ``replay``, its nonce now remembered), else the reason it is not."""
    if not header:
        return f"missing {HEADER} header"
    parts = _fields(header)
    ts, nonce, mac = parts.get("t", ""), parts.get("n", ""), parts.get("v1", "")
    if not ts.isdigit() or not mac or not (8 <= len(nonce) <= 64):
        return f"malformed {HEADER} header"
    now = now if now is not None else time.time()
    if abs(now - int(ts)) > max_skew:
        return "signature expired (clock skew or replay)"
    if not hmac.compare_digest(_mac(secret, ts, nonce, method, body), mac):
        return "bad signature"
    if replay is not None and not replay.first_use(nonce, time.monotonic()):
        return "replayed request (nonce already used)"
    return ""
