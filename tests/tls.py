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
from functools import cache
from pathlib import Path

import trustme

from rpc.tls import TlsFiles

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


def trusting(ca_file: str | None = None) -> ssl.SSLContext:
    """A client context trusting the cluster CA (for health probes and API calls)."""
    return ssl.create_default_context(cafile=ca_file or node_files().ca)
