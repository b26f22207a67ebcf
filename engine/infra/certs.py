"""A private certificate authority for one run directory (standalone, ``porpoise cluster``).

``CertDir(run_dir / "tls")`` makes, once, a CA (ECDSA P-256, 10 years) and, per name, a certificate it signs
for both TLS roles (server and client authentication) with the given host names and addresses as SANs.
Private keys are written with mode 0600. Existing files are kept, so nodes restarted later present the same
identity; a certificate is issued again when it lacks a SAN now asked for, or expires within 30 days.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_RENEW_BEFORE = dt.timedelta(days=30)


@dataclass(frozen=True)
class Issued:
    ca: Path
    cert: Path
    key: Path


def _write(path: Path, data: bytes, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(tmp, mode)
    tmp.replace(path)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _san(names: Iterable[str]) -> list[x509.GeneralName]:
    out: list[x509.GeneralName] = []
    for name in dict.fromkeys(names):
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            out.append(x509.DNSName(name))
    return out


class CertDir:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.ca_cert = path / "ca.pem"
        self.ca_key = path / "ca-key.pem"

    def _ca(self) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        if self.ca_cert.exists() and self.ca_key.exists():
            cert = x509.load_pem_x509_certificate(self.ca_cert.read_bytes())
            key = serialization.load_pem_private_key(self.ca_key.read_bytes(), None)
            assert isinstance(key, ec.EllipticCurvePrivateKey)
            return cert, key
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"Porpoise CA {os.urandom(4).hex()}")])
        now = dt.datetime.now(dt.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
            )  # key_cert_sign, crl_sign
            .sign(key, hashes.SHA256())
        )
        _write(self.ca_key, _key_pem(key), 0o600)
        _write(self.ca_cert, cert.public_bytes(serialization.Encoding.PEM), 0o644)
        return cert, key

    def issue(self, name: str, hosts: Iterable[str]) -> Issued:
        """The certificate ``name`` with ``hosts`` (names or addresses) as SANs, made unless a fitting one exists."""
        hosts = list(dict.fromkeys(hosts))
        cert_path, key_path = self.path / f"{name}.pem", self.path / f"{name}-key.pem"
        ca_cert, ca_key = self._ca()
        if cert_path.exists() and key_path.exists():
            existing = x509.load_pem_x509_certificate(cert_path.read_bytes())
            try:
                sans = existing.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
            except x509.ExtensionNotFound:
                sans = x509.SubjectAlternativeName([])
            fresh = existing.not_valid_after_utc - _RENEW_BEFORE > dt.datetime.now(dt.UTC)
            if fresh and existing.issuer == ca_cert.subject and set(_san(hosts)) <= set(sans):
                return Issued(self.ca_cert, cert_path, key_path)
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        cert = (
            x509.CertificateBuilder()
            # no common name: an etcd run with --client-cert-auth refuses its JSON gateway to certificates with one
            # (it would take the name for an etcd user); the SANs name the node
            .subject_name(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, f"Porpoise {name}")]))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=825))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName(_san(hosts)), critical=False)
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
            .sign(ca_key, hashes.SHA256())
        )
        _write(key_path, _key_pem(key), 0o600)
        _write(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
        return Issued(self.ca_cert, cert_path, key_path)
