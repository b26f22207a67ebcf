"""Mutual TLS between nodes: the SSL contexts of the RPC listener and client.

Every node presents a certificate signed by the cluster CA (``rpc.tls_ca``) and checks its peer's:

- the client (master -> worker dispatch, worker -> master reports, API -> nodes) verifies the server's
  certificate against the CA and its name against the address it calls (a fake node registered in etcd
  under someone's address without a certificate of the cluster CA gets no request body: the handshake fails);
- the listener asks every caller for a certificate (``CERT_OPTIONAL``: one that does not verify ends the
  handshake) and ``rpc.server`` refuses any ``/rpc/`` call without a verified one with 401. ``/health`` stays
  reachable over TLS without a client certificate, for probes.

The HMAC signature (``rpc.auth``) stays as a second factor, with a nonce against replay.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from core.errors import ConfigError


@dataclass(frozen=True)
class TlsFiles:
    """PEM files of one node: the cluster CA, its certificate (chain) and private key."""

    ca: str
    cert: str
    key: str

    @classmethod
    def of(cls, section: object, prefix: str = "tls_") -> TlsFiles | None:
        """From a config section with ``tls_ca`` / ``tls_cert`` / ``tls_key``: None when all are empty."""
        ca, cert, key = (str(getattr(section, f"{prefix}{n}")) for n in ("ca", "cert", "key"))
        if not (ca or cert or key):
            return None
        if not (ca and cert and key):
            raise ConfigError(f"{prefix}ca, {prefix}cert and {prefix}key: set all three, or none (plain HTTP)")
        return cls(ca, cert, key)


def _load(ctx: ssl.SSLContext, files: TlsFiles) -> ssl.SSLContext:
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_verify_locations(cafile=files.ca)
        ctx.load_cert_chain(files.cert, files.key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"TLS files {files.cert} / {files.key} (CA {files.ca}): {exc}") from exc
    return ctx


def server_context(files: TlsFiles) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx = _load(ctx, files)
    ctx.verify_mode = ssl.CERT_OPTIONAL  # a bad certificate ends the handshake; none is refused per route
    return ctx


def client_context(files: TlsFiles) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    ctx.check_hostname = True
    return _load(ctx, files)


def peer_verified(transport: object) -> bool:
    """Whether the peer on this connection presented a certificate the CA signed (checked in the handshake)."""
    get = getattr(transport, "get_extra_info", None)
    return bool(get and get("peercert"))
