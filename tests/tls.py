"""Certificates for tests, made on the fly with trustme: one cluster CA per test session and node certificates
it signs (server and client use, SANs for loopback), written with 0600 keys to a private directory.

``PORPOISE_TEST_TLS=1`` makes the fixtures run every node with mutual TLS on its RPC listener and client
(tests/helpers.node_env) and the API over HTTPS (tests/conftest.py)."""

from __future__ import annotations

import atexit
import os
import shutil
import ssl
import tempfile
from collections.abc import Mapping
from functools import cache
from pathlib import Path

import aiohttp
import trustme

from registry import EtcdAccess
from rpc.tls import TlsFiles, client_context, server_context

#: whether the suite runs with TLS everywhere the fixtures control
ENABLED = os.environ.get("PORPOISE_TEST_TLS", "") not in ("", "0")
HOSTS = ("127.0.0.1", "localhost", "::1")


@cache
def _dir() -> Path:
    path = Path(tempfile.mkdtemp(prefix="porpoise-tls-"))
    atexit.register(shutil.rmtree, path, True)
    return path


@cache
def cluster_ca() -> trustme.CA:
    return trustme.CA(organization_name="Porpoise test cluster")


def issue(name: str, ca: trustme.CA | None = None, hosts: tuple[str, ...] = HOSTS) -> TlsFiles:
    """A certificate ``name`` signed by ``ca`` (default: the cluster CA), and that CA, as PEM files."""
    ca = ca or cluster_ca()
    base = _dir() / f"{name}-{id(ca):x}"
    base.mkdir(exist_ok=True)
    cert = ca.issue_cert(*hosts)  # no common name: etcd refuses gateway calls from a certificate with one
    paths = TlsFiles(str(base / "ca.pem"), str(base / "cert.pem"), str(base / "key.pem"))
    ca.cert_pem.write_to_path(paths.ca)
    cert.cert_chain_pems[0].write_to_path(paths.cert)
    cert.private_key_pem.write_to_path(paths.key)
    os.chmod(paths.key, 0o600)
    return paths


@cache
def node_files() -> TlsFiles:
    return issue("node")


def rpc_env() -> dict[str, str]:
    files = node_files()
    return {"PORPOISE_RPC_TLS_CA": files.ca, "PORPOISE_RPC_TLS_CERT": files.cert, "PORPOISE_RPC_TLS_KEY": files.key}


def api_env() -> dict[str, str]:
    files = node_files()
    return {"PORPOISE_API_TLS_CERT": files.cert, "PORPOISE_API_TLS_KEY": files.key}


def browser_env() -> dict[str, str]:
    """For the browser tests (ui/tests/e2e/browser.mjs): the SHA-256 of the node certificate's public key,
    which Chromium then accepts for the API's HTTPS (its key only, no other certificate error)."""
    if not ENABLED:
        return {}
    import base64
    import hashlib

    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    cert = x509.load_pem_x509_certificate(Path(node_files().cert).read_bytes())
    spki = cert.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    return {"E2E_TRUST_SPKI": base64.b64encode(hashlib.sha256(spki).digest()).decode()}


def cli_env() -> dict[str, str]:
    """Environment for the CLI (and SDK) run by a test: the CA the API's certificate comes from."""
    return {"PORPOISE_CA_FILE": node_files().ca} if ENABLED else {}


def connector(client_cert: bool = False) -> aiohttp.TCPConnector | None:
    """For a test's aiohttp session: trusting the cluster CA (and showing a node certificate to a node's RPC
    listener with ``client_cert``) when the suite runs with TLS; None (aiohttp's default) without."""
    if not ENABLED:
        return None
    return aiohttp.TCPConnector(ssl=client_ssl() if client_cert else trusting())


def trusting(ca_file: str | None = None) -> ssl.SSLContext:
    """A client context trusting the cluster CA (for health probes and API calls)."""
    return ssl.create_default_context(cafile=ca_file or node_files().ca)


# -- etcd with TLS and auth (PORPOISE_TEST_TLS) ---------------------------------------------------------------

ETCD_USER = "porpoise"
ETCD_PASSWORD = "porpoise-test-etcd-pw"
#: the tests' roots are random (/t-..., /api-...): in the suite the porpoise role is granted all of "/"
ETCD_PREFIX = "/"
#: of an etcd endpoint the nodes accept (with registry.tls_* set, only https:// ones)
ETCD_SCHEME = "https" if ENABLED else "http"


def etcd_kwargs() -> dict[str, object]:
    """EtcdServer arguments: its TLS files when the suite runs with TLS."""
    return {"tls": node_files()} if ENABLED else {}


def secure_etcd(server: object) -> None:
    """After ``server.start()``: turn on etcd auth when the suite runs with TLS."""
    if ENABLED:
        server.enable_auth("root-test-pw", ETCD_USER, ETCD_PASSWORD, ETCD_PREFIX)  # type: ignore[attr-defined]


def etcd_access() -> EtcdAccess | None:
    files = node_files()
    return EtcdAccess(files.ca, files.cert, files.key, ETCD_USER, ETCD_PASSWORD) if ENABLED else None


def registry_env() -> dict[str, str]:
    if not ENABLED:
        return {}
    files = node_files()
    return {
        "PORPOISE_REGISTRY_TLS_CA": files.ca, "PORPOISE_REGISTRY_TLS_CERT": files.cert,
        "PORPOISE_REGISTRY_TLS_KEY": files.key, "PORPOISE_REGISTRY_USER": ETCD_USER,
        "PORPOISE_REGISTRY_PASSWORD": ETCD_PASSWORD,
    }  # fmt: skip


def etcd_access_of(env: Mapping[str, str]) -> EtcdAccess | None:
    """For a test's own subprocess given ``registry_env()``: its certificates come from the parent's CA (a
    process of its own would make another CA)."""
    if "PORPOISE_REGISTRY_TLS_CA" not in env:
        return None
    keys = ("TLS_CA", "TLS_CERT", "TLS_KEY", "USER", "PASSWORD")
    return EtcdAccess(*(env[f"PORPOISE_REGISTRY_{key}"] for key in keys))


def registry_overrides() -> list[str]:
    return [f"registry.{k[len('PORPOISE_REGISTRY_') :].lower()}={v}" for k, v in registry_env().items()]


def server_ssl() -> ssl.SSLContext | None:
    """The listener context of a test playing a node (None without TLS)."""
    return server_context(node_files()) if ENABLED else None


def client_ssl() -> ssl.SSLContext | None:
    """The RPC client context of a test playing a node (None without TLS)."""
    return client_context(node_files()) if ENABLED else None
