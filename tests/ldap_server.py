"""A private OpenLDAP server (Debian's ``slapd``, installed by ``make install``) on a free loopback port.

It runs from a generated ``slapd.conf`` in a temporary directory (mdb database, the core / cosine /
inetorgperson / nis schemas, StartTLS with a certificate of the project's test CA) and holds the directory
the LDAP tests sign in against: ``dc=example,dc=org`` with people (``ou=people``) and groups (``ou=groups``).
A missing ``slapd`` fails the tests with the reason; it never skips them.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from engine.infra.certs import CertDir
from engine.infra.ports import free_port

SLAPD = "/usr/sbin/slapd"
SUFFIX = "dc=example,dc=org"
ROOT_DN = f"cn=admin,{SUFFIX}"
ROOT_PASSWORD = "ldap-root-Pw-7"
SERVICE_DN = f"cn=porpoise,ou=services,{SUFFIX}"
SERVICE_PASSWORD = "svc-Pw-ldap-42"

#: login -> (password, mail, groups)
PEOPLE: dict[str, tuple[str, str, list[str]]] = {
    "ada": ("ada-Pw-1234", "ada@example.org", ["data-eng", "porpoise-admins"]),
    "bob": ("bob-Pw-1234", "bob@example.org", ["analysts"]),
    "carol": ("carol-Pw-1234", "carol@example.org", []),
    "dave": ("dave-Pw-1234", "dave@example.org", ["analysts"]),
}


def _ldif() -> str:
    parts = [
        f"dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\no: Example\n",
        f"dn: ou=people,{SUFFIX}\nobjectClass: organizationalUnit\nou: people\n",
        f"dn: ou=groups,{SUFFIX}\nobjectClass: organizationalUnit\nou: groups\n",
        f"dn: ou=services,{SUFFIX}\nobjectClass: organizationalUnit\nou: services\n",
        f"dn: {SERVICE_DN}\nobjectClass: simpleSecurityObject\nobjectClass: organizationalRole\ncn: porpoise\n"
        f"userPassword: {SERVICE_PASSWORD}\n",
    ]
    for uid, (password, mail, _) in PEOPLE.items():
        parts.append(
            f"dn: uid={uid},ou=people,{SUFFIX}\nobjectClass: inetOrgPerson\nuid: {uid}\ncn: {uid.title()}\n"
            f"sn: {uid.title()}\nmail: {mail}\nuserPassword: {password}\n"
        )
    groups = sorted({g for _, _, gs in PEOPLE.values() for g in gs})
    for group in groups:
        members = "".join(f"member: uid={u},ou=people,{SUFFIX}\n" for u, (_, _, gs) in PEOPLE.items() if group in gs)
        parts.append(f"dn: cn={group},ou=groups,{SUFFIX}\nobjectClass: groupOfNames\ncn: {group}\n{members}")
    return "\n".join(parts)


@dataclass
class LdapServer:
    directory: Path
    port: int
    ca_file: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"ldap://127.0.0.1:{self.port}"

    def _config(self, cert: Path, key: Path) -> Path:
        data = self.directory / "data"
        data.mkdir(parents=True, exist_ok=True)
        conf = self.directory / "slapd.conf"
        conf.write_text(
            "include /etc/ldap/schema/core.schema\ninclude /etc/ldap/schema/cosine.schema\n"
            "include /etc/ldap/schema/inetorgperson.schema\ninclude /etc/ldap/schema/nis.schema\n"
            f"pidfile {self.directory}/slapd.pid\nmodulepath /usr/lib/ldap\nmoduleload back_mdb\n"
            f"TLSCACertificateFile {self.ca_file}\nTLSCertificateFile {cert}\nTLSCertificateKeyFile {key}\n"
            "access to attrs=userPassword by anonymous auth by self write by * none\n"
            "access to * by * read\n"
            f'database mdb\nmaxsize 67108864\nsuffix "{SUFFIX}"\nrootdn "{ROOT_DN}"\nrootpw {ROOT_PASSWORD}\n'
            f"directory {data}\n"
        )
        return conf

    def start(self) -> None:
        if not Path(SLAPD).exists():
            raise RuntimeError(f"{SLAPD} is missing: `make install` installs Debian's slapd (apt-get install slapd)")
        issued = CertDir(self.directory / "tls").issue("ldap", ["127.0.0.1", "localhost"])
        self.ca_file = issued.ca
        conf = self._config(issued.cert, issued.key)
        # slapadd loads the directory before the server starts (no network, no credentials needed)
        subprocess.run(
            ["/usr/sbin/slapadd", "-f", str(conf)], input=_ldif().encode(), check=True, capture_output=True, timeout=60
        )
        with (self.directory / "slapd.log").open("wb") as log:
            self.proc = subprocess.Popen(
                [SLAPD, "-d", "0", "-f", str(conf), "-h", self.url], stdout=log, stderr=subprocess.STDOUT
            )
        self.wait_ready()

    def wait_ready(self, timeout: float = 30) -> None:
        import socket

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                err = (self.directory / "slapd.log").read_text(errors="replace")
                raise RuntimeError(f"slapd exited with {self.proc.returncode}: {err[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"slapd did not listen on {self.port} within {timeout} s")

    def pause(self) -> None:
        """The directory stops answering (SIGSTOP): connections hang, as with a server that is down hard."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


def start_ldap(directory: Path) -> LdapServer:
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    server = LdapServer(directory, free_port(), directory / "tls" / "ca.pem")
    server.start()
    return server
