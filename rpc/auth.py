"""Shared-secret request signatures.

Header ``X-Porpoise-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<method>.<body>")>``.
A request is accepted when the HMAC matches and ``t`` is within ``max_skew`` seconds of now.
"""

from __future__ import annotations

import hashlib
import hmac
import time

HEADER = "X-Porpoise-Signature"


def sign(secret: str, method: str, body: bytes, now: float | None = None) -> str:
    ts = str(int(now if now is not None else time.time()))
    mac = hmac.new(secret.encode(), f"{ts}.{method}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={ts},v1={mac}"


def verify(secret: str, method: str, body: bytes, header: str | None, max_skew: float, now: float | None = None) -> str:
    """Empty string if valid, else the reason it is not."""
    if not header:
        return f"missing {HEADER} header"
    parts = dict(p.split("=", 1) for p in header.split(",") if "=" in p)
    ts, mac = parts.get("t", ""), parts.get("v1", "")
    if not ts.isdigit() or not mac:
        return f"malformed {HEADER} header"
    now = now if now is not None else time.time()
    if abs(now - int(ts)) > max_skew:
        return "signature expired (clock skew or replay)"
    expected = hmac.new(secret.encode(), f"{ts}.{method}.".encode() + body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, mac):
        return "bad signature"
    return ""
