"""A private PostgreSQL cluster from the machine's server binaries, on a loopback port.

initdb refuses to run as root, so when the launcher is root the server runs as the unprivileged
``postgres`` user in a directory it owns. If that user cannot reach the requested directory (a
parent is private to root), the data lives under ``/var/tmp/porpoise-pg/<hash>`` instead, the same
place every time for the same requested directory, so data survives restarts.
"""

from __future__ import annotations

import asyncio
import glob
import hashlib
import os
import pwd
import secrets
import shutil
import signal
import stat
import subprocess
from collections.abc import Mapping
from pathlib import Path

import asyncpg

from core.errors import BinaryNotFound, DataDirCorrupt, InfraError
from engine.infra.process import ManagedProcess, ProcessRecord, in_netns, is_root, wait_until

SERVICE_USER = "postgres"
DATABASE = "porpoise"
#: the cluster's superuser (initdb's bootstrap role): creates roles and databases, nothing else
ROLE = "porpoise"
#: owns the metadata schema; ``porpoise db upgrade`` runs as it
OWNER_ROLE = "porpoise_owner"
#: what the nodes log in as: rows only, no DDL (granted by each upgrade, engine/storage/roles.py)
RUNTIME_ROLE = "porpoise_app"


def pg_bindir() -> Path:
    """Directory holding ``initdb`` and ``postgres``: $PORPOISE_PG_BINDIR, pg_config --bindir, the newest
    /usr/lib/postgresql/*/bin, then PATH."""
    candidates: list[Path] = []
    env = os.environ.get("PORPOISE_PG_BINDIR")
    if env:
        candidates.append(Path(env))
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True)
            candidates.append(Path(out.stdout.strip()))
        except (subprocess.SubprocessError, OSError):
            pass

    def version(path: str) -> float:
        try:
            return float(Path(path).parent.name)
        except ValueError:
            return 0.0

    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True)]
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).parent)
    return find_pg_bindir(candidates)


def find_pg_bindir(candidates: list[Path]) -> Path:
    """The first candidate holding both ``initdb`` and ``postgres``."""
    for cand in candidates:
        if (cand / "initdb").is_file() and (cand / "postgres").is_file():
            return cand
    looked = ", ".join(str(c) for c in candidates) or "nowhere"
    raise BinaryNotFound(
        f"PostgreSQL server binaries (initdb, postgres) not found (looked in: {looked}); "
        "install the PostgreSQL server package or set PORPOISE_PG_BINDIR"
    )


def _reachable_by(user: pwd.struct_passwd, path: Path) -> bool:
    """Whether ``user`` can traverse every existing parent of ``path``."""
    groups = {user.pw_gid} | set(os.getgrouplist(user.pw_name, user.pw_gid))
    for parent in [*reversed(path.parents)]:
        if not parent.exists():
            break
        st = parent.stat()
        if st.st_uid == user.pw_uid:
            ok = bool(st.st_mode & stat.S_IXUSR)
        elif st.st_gid in groups:
            ok = bool(st.st_mode & stat.S_IXGRP)
        else:
            ok = bool(st.st_mode & stat.S_IXOTH)
        if not ok:
            return False
    return True


class PostgresServer:
    """A private PostgreSQL server with a ``porpoise`` database owned by the ``porpoise_owner`` role, a
    ``porpoise_app`` runtime role for the nodes and the ``porpoise`` superuser (roles and databases only).
    The login roles' passwords derive from the superuser's (:meth:`role_password`).

    ``durable=False`` turns fsync off (tests); the standalone keeps the defaults.
    """

    def __init__(
        self,
        base_dir: Path,
        port: int,
        log_path: Path,
        password: str | None = None,
        durable: bool = True,
        max_connections: int = 300,
        host: str = "127.0.0.1",
        netns: str = "",
        clients: str = "",
        ssl_files: tuple[str, str] | None = None,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        """``host``: the address it listens on and DSNs name; ``netns``: run it in that network
        namespace; ``clients``: a CIDR allowed to connect besides loopback (password auth);
        ``ssl_files``: (certificate, key) PEM files to serve TLS with (copied into the data directory's
        parent, owned by the server's user, key mode 0600); ``settings``: more server settings (``-c``),
        e.g. the benchmarks' ``shared_preload_libraries=pg_stat_statements``."""
        self.settings = dict(settings or {})
        self.ssl_files = ssl_files
        self.requested_dir = base_dir
        self.port = port
        self.log_path = log_path
        self.password = password or secrets.token_urlsafe(18)
        self.durable = durable
        self.max_connections = max_connections
        self.host = host
        self.netns = netns
        self.clients = clients
        self.bindir = pg_bindir()
        self.user: pwd.struct_passwd | None = None
        if is_root():
            try:
                self.user = pwd.getpwnam(SERVICE_USER)
            except KeyError as exc:
                raise InfraError(
                    f"running as root, PostgreSQL must run as the unprivileged user {SERVICE_USER!r}, "
                    "which does not exist (install the postgresql server package, or run as a normal user)"
                ) from exc
        self.base_dir = self._placement(base_dir)
        self.proc: ManagedProcess | None = None

    def _placement(self, base_dir: Path) -> Path:
        base_dir = base_dir.resolve()
        if self.user is None or _reachable_by(self.user, base_dir):
            return base_dir
        digest = hashlib.sha256(str(base_dir).encode()).hexdigest()[:16]
        return Path("/var/tmp/porpoise-pg") / digest

    @property
    def data_dir(self) -> Path:
        return self.base_dir / "data"

    def role_password(self, role: str) -> str:
        """A login role's password: stable for this cluster, and the superuser's cannot be derived from it."""
        if role == ROLE:
            return self.password
        return hashlib.sha256(f"{self.password}:{role}".encode()).hexdigest()[:32]

    def dsn_for(self, role: str, database: str = DATABASE) -> str:
        return f"postgresql://{role}:{self.role_password(role)}@{self.host}:{self.port}/{database}"

    @property
    def dsn(self) -> str:
        """The nodes' DSN: the runtime role on the metadata database."""
        return self.dsn_for(RUNTIME_ROLE)

    @property
    def owner_dsn(self) -> str:
        """The schema owner's DSN (``porpoise db upgrade``)."""
        return self.dsn_for(OWNER_ROLE)

    def admin_dsn(self) -> str:
        """The superuser on the ``postgres`` database (create roles and databases)."""
        return self.dsn_for(ROLE, "postgres")

    # -- set-up ---------------------------------------------------------------------------------

    def _run_as_service(self, argv: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
        kwargs: dict[str, object] = {}
        if self.user is not None:
            kwargs = {"user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []}
        return subprocess.run(  # type: ignore[call-overload, no-any-return]
            argv, capture_output=True, text=True, timeout=timeout, cwd="/", check=False, **kwargs
        )

    def _own(self, path: Path) -> None:
        if self.user is not None:
            os.chown(path, self.user.pw_uid, self.user.pw_gid)

    def initialized(self) -> bool:
        return (self.data_dir / "PG_VERSION").is_file()

    def ensure_initialized(self) -> bool:
        """initdb if there is no cluster yet. Returns True when a new cluster was created."""
        data = self.data_dir
        if self.initialized():
            if not (data / "postgresql.conf").is_file() or not (data / "global").is_dir():
                raise DataDirCorrupt(
                    f"PostgreSQL data directory {data} is incomplete (PG_VERSION without postgresql.conf "
                    "or global/); move it away or remove it to start afresh"
                )
            major = (data / "PG_VERSION").read_text().strip()
            server_major = self.bindir.parent.name
            if server_major.replace(".", "").isdigit() and major != server_major:
                raise DataDirCorrupt(
                    f"PostgreSQL data directory {data} was created by version {major}, "
                    f"but the server binaries are version {server_major}"
                )
            return False
        if data.exists() and any(data.iterdir()):
            raise DataDirCorrupt(
                f"{data} is not empty but is not a PostgreSQL data directory; move it away or remove it"
            )
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self._own(self.base_dir)
        os.chmod(self.base_dir, 0o700)
        pwfile = self.base_dir / ".pwfile"
        pwfile.write_text(self.password + "\n")
        self._own(pwfile)
        os.chmod(pwfile, 0o600)
        try:
            result = self._run_as_service(
                [
                    str(self.bindir / "initdb"),
                    "-D",
                    str(data),
                    "-U",
                    ROLE,
                    f"--pwfile={pwfile}",
                    "--auth-host=scram-sha-256",
                    "--auth-local=scram-sha-256",
                    "-E",
                    "UTF8",
                    "--locale=C",
                    "--no-instructions",
                ]
            )
        finally:
            pwfile.unlink(missing_ok=True)
        if result.returncode != 0:
            shutil.rmtree(data, ignore_errors=True)
            raise InfraError(f"initdb failed (exit {result.returncode}):\n{result.stderr.strip()}")
        return True

    def argv(self) -> list[str]:
        args = [
            str(self.bindir / "postgres"),
            "-D", str(self.data_dir),
            "-p", str(self.port),
            "-c", f"listen_addresses={self.host}",
            "-c", "unix_socket_directories=",
            "-c", f"max_connections={self.max_connections}",
            "-c", "shared_buffers=128MB",
        ]  # fmt: skip
        if not self.durable:
            args += ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
        for name, value in self.settings.items():
            args += ["-c", f"{name}={value}"]
        if self.ssl_files is not None:
            cert, key = self._tls_paths()
            args += ["-c", "ssl=on", "-c", f"ssl_cert_file={cert}", "-c", f"ssl_key_file={key}"]
        if self.netns and self.user is not None:  # nsenter needs root; it becomes the user after entering
            return in_netns(self.netns, args, self.user.pw_uid, self.user.pw_gid)
        return in_netns(self.netns, args)

    def _tls_paths(self) -> tuple[Path, Path]:
        return self.base_dir / "server.crt", self.base_dir / "server.key"

    def _install_tls(self) -> None:
        """PostgreSQL reads its key only when its own user owns it with mode 0600: copy both files there."""
        if self.ssl_files is None:
            return
        for source, target in zip(self.ssl_files, self._tls_paths(), strict=True):
            shutil.copyfile(source, target)
            self._own(target)
            os.chmod(target, 0o600)

    def _allow_clients(self) -> None:
        """Let ``clients`` connect (initdb allows loopback only); once per cluster."""
        hba = self.data_dir / "pg_hba.conf"
        line = f"host all all {self.clients} scram-sha-256\n"
        if self.clients and line not in hba.read_text():
            with hba.open("a") as f:
                f.write(line)

    def start(self, timeout: float = 60) -> ProcessRecord:
        created = self.ensure_initialized()
        self._allow_clients()
        self._install_tls()
        self.proc = ManagedProcess(
            "postgres",
            self.argv(),
            self.log_path,
            user=SERVICE_USER if self.user is not None and not self.netns else None,
            cwd=Path("/"),
            # SIGINT = "fast" shutdown: roll back open transactions, checkpoint, exit.
            stop_signal=signal.SIGINT,
        )
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self.user is not None and not self.log_path.exists():
            self.log_path.touch()
        record = self.proc.start()
        record.extra = {"port": self.port, "base_dir": str(self.base_dir), "new_cluster": created}
        try:
            self.wait_ready(timeout)
            asyncio.run(self._ensure_database())
        except Exception:
            self.proc.stop(10)
            raise
        return record

    def _check_running(self) -> None:
        """Raise with the server's last output if the postmaster has exited."""
        if self.proc is not None and self.proc.exited() is not None:
            raise InfraError(f"postgres exited with code {self.proc.exited()}:\n{self.proc.tail()}")

    def wait_ready(self, timeout: float) -> None:
        isready = self.bindir / "pg_isready"

        def ready() -> bool:
            self._check_running()
            if isready.is_file():
                res = subprocess.run(
                    [str(isready), "-q", "-h", self.host, "-p", str(self.port)], timeout=5, check=False
                )
                return res.returncode == 0
            return False  # pragma: no cover - pg_isready ships with the server

        wait_until(ready, timeout, interval=0.1, what=f"PostgreSQL on {self.host}:{self.port}")

    async def _admin_connection(self, timeout: float = 30) -> asyncpg.Connection:
        """The superuser's connection to a server that just said it is ready. A first connection can still
        fail for a moment (the server finishing its start-up on a loaded machine, a slow first TLS or
        SCRAM handshake): try again until ``timeout``, then say what the last try met."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            try:
                return await asyncpg.connect(self.admin_dsn(), timeout=min(10, max(1.0, deadline - loop.time())))
            except (OSError, TimeoutError, asyncpg.CannotConnectNowError) as exc:
                self._check_running()
                if loop.time() >= deadline:
                    raise InfraError(f"PostgreSQL on {self.host}:{self.port} accepts no connection: {exc!r}") from exc
            await asyncio.sleep(0.2)

    async def _ensure_database(self) -> None:
        conn = await self._admin_connection()
        try:
            for role in (OWNER_ROLE, RUNTIME_ROLE):
                await self.ensure_role(conn, role)
        finally:
            await conn.close()
        await self.create_database(DATABASE)

    async def ensure_role(self, admin: asyncpg.Connection, role: str) -> None:
        """Create login role ``role`` (no superuser, no CREATEDB / CREATEROLE) or reset its password."""
        exists = await admin.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", role)
        verb = "ALTER" if exists else "CREATE"
        password = self.role_password(role).replace("'", "''")
        await admin.execute(f"{verb} ROLE \"{role}\" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD '{password}'")

    async def create_database(self, name: str, owner: str = OWNER_ROLE) -> str:
        """Database ``name`` owned by ``owner`` (created when missing; an existing one made by an older
        launcher, whose superuser owned everything, is handed over); its runtime-role DSN."""
        admin = await asyncpg.connect(self.admin_dsn(), timeout=10)
        try:
            current = await admin.fetchval("SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = $1", name)
            if current is None:
                await admin.execute(f'CREATE DATABASE "{name}" OWNER "{owner}"')
            elif current != owner:
                await admin.execute(f'ALTER DATABASE "{name}" OWNER TO "{owner}"')
        finally:
            await admin.close()
        conn = await asyncpg.connect(self.dsn_for(ROLE, name), timeout=10)
        try:
            await _hand_over(conn, owner)
            await conn.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")  # PostgreSQL < 15 allowed it
        finally:
            await conn.close()
        return self.dsn_for(RUNTIME_ROLE, name)

    def stop(self, timeout: float = 30) -> None:
        if self.proc is not None:
            self.proc.stop(timeout)


async def _hand_over(conn: asyncpg.Connection, owner: str) -> None:
    """Make ``owner`` the owner of every table, sequence and function in schema public (what a launcher
    before database roles left owned by the superuser). Nothing to do on a database made since."""
    rows = await conn.fetch(
        "SELECT 'TABLE ' || quote_ident(c.relname) AS obj FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND pg_get_userbyid(c.relowner) <> $1"
        " UNION ALL SELECT 'SEQUENCE ' || quote_ident(c.relname) FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'S'"
        " AND pg_get_userbyid(c.relowner) <> $1"
        " AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = c.oid AND d.deptype IN ('a', 'i'))"
        " UNION ALL SELECT 'FUNCTION ' || quote_ident(p.proname) || '(' || pg_get_function_identity_arguments(p.oid)"
        " || ')' FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
        " WHERE n.nspname = 'public' AND pg_get_userbyid(p.proowner) <> $1",
        owner,
    )
    for row in rows:
        await conn.execute(f'ALTER {row["obj"]} OWNER TO "{owner}"')
