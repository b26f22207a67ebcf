"""A local stack in one run directory: private etcd + PostgreSQL + node processes.

``run_dir/state.json`` remembers ports, the database password and every process started (pid + start
time), so a later ``stop`` stops exactly those processes, and a restart reuses the same data.

Tasks never run as the nodes' user (docs/SECURITY.md, "Tenants"): started as root, the stack creates the
unprivileged OS user ``porpoise-tenant`` and its workers run the ``default`` tenant's tasks as that user. The
nodes' secrets (database DSN, RPC secret, etcd password, key file and TLS key paths) reach them in
``run_dir/node.yaml`` (0600), never in their environment; etcd runs with client TLS and auth.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pwd
import secrets
import shutil
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import asyncpg
import yaml

from core import logs
from core.errors import InfraError
from engine.config import Config
from engine.infra.certs import CertDir
from engine.infra.etcd import EtcdServer
from engine.infra.ports import choose_port, free_port
from engine.infra.postgres import RUNTIME_ROLE, PostgresServer
from engine.infra.process import ManagedProcess, ProcessRecord, wait_until
from engine.infra.tenantpython import reachable_python
from engine.secretbox import Keyring, ensure_key_file
from engine.storage.jsoncodec import register_json
from engine.storage.schema import upgrade
from engine.storage.secret_rows import reseal_all
from rpc.tls import TlsFiles

log = logs.get(__name__)


#: registry keys the launcher hands its nodes from its own configuration (which saw the user's file,
#: environment and flags): the nodes then fence and fail over with the lease the launcher was given
REGISTRY_TIMING = ("lease_ttl", "keepalive_interval", "heartbeat_interval", "request_timeout", "loop_stall_limit")


#: the stack's nodes are on loopback: the names their certificates carry
LOOPBACK = ("127.0.0.1", "localhost", "::1")
#: the etcd user of the nodes (a secure etcd); its role may read and write only below registry.root
ETCD_USER = "porpoise"
#: the unprivileged OS user a root-started stack runs the ``default`` tenant's tasks as
TENANT_USER = "porpoise-tenant"
#: the configuration file the nodes read their secrets from (mode 0600, in the run directory)
NODE_CONFIG = "node.yaml"
#: run directory entries no task may list or read (the tenant only needs to reach its exec dirs)
PRIVATE_DIRS = ("logs", "task-logs", "spool", "tls")


def ensure_tenant_user(name: str = TENANT_USER) -> pwd.struct_passwd | None:
    """The OS user a root-started stack's ``default`` tenant runs as, created (``useradd``: a system user with
    no login shell and a home of its own) when missing; None when not running as root (no user can be switched
    to: tasks run as the launcher's own user, see the warning at start)."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    home = f"/var/lib/{name}"
    argv = [useradd, "--system", "--user-group", "--create-home", "--home-dir", home, "--shell", "/usr/sbin/nologin"]
    done = subprocess.run([*argv, name], capture_output=True, text=True, timeout=60, check=False)
    if done.returncode not in (0, 9):  # 9: made meanwhile by another launcher
        raise InfraError(f"cannot create the tenant OS user {name!r} (useradd exit {done.returncode}): "
                         f"{done.stderr.strip()}")  # fmt: skip
    return pwd.getpwnam(name)


def registry_timing_env(cfg: Config) -> dict[str, str]:
    return {f"PORPOISE_REGISTRY_{key.upper()}": str(getattr(cfg.registry, key)) for key in REGISTRY_TIMING}


async def _reseal(dsn: str, keyring: Keyring) -> int:
    """The upgrade step for secrets stored in plain text by an older version (idempotent)."""
    conn = await asyncpg.connect(dsn, timeout=30)
    try:
        await register_json(conn)
        return sum(done.changed for done in (await reseal_all(conn, keyring)).values())
    finally:
        await conn.close()


class Stack:
    def __init__(
        self, run_dir: Path, cfg: Config, durable: bool = True, pg_settings: Mapping[str, str] | None = None
    ) -> None:
        self.run_dir = run_dir.resolve()
        self.cfg = cfg
        self.durable = durable
        #: more PostgreSQL server settings (the benchmarks load pg_stat_statements)
        self.pg_settings = dict(pg_settings or {})
        self.state_path = self.run_dir / "state.json"
        self.state: dict[str, Any] = self._load()
        self.etcd: EtcdServer | None = None
        self.postgres: PostgresServer | None = None
        self.nodes: list[ManagedProcess] = []
        #: processes this Stack object started (a failed start rolls back only these)
        self.started: list[ProcessRecord] = []
        #: the RPC's mutual TLS: the configured files, else a CA and a node certificate made in the run dir
        self.rpc_tls = TlsFiles.of(cfg.rpc)
        #: the keyring sealing stored credentials: the configured one, else one made in the run dir
        self.key_file = Path(cfg.secrets.key_file) if cfg.secrets.key_file else self.run_dir / "secrets.key"
        #: the OS user the default tenant's tasks run as (None: not started as root, see start_infra)
        self.tenant: pwd.struct_passwd | None = None
        #: the interpreter of the worker and of PYTHON tasks: this one, unless the tenant cannot run it
        self.python = sys.executable

    # -- state ------------------------------------------------------------------------------------

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.state_path.read_text())
        except FileNotFoundError:
            return {"ports": {}, "processes": []}
        except ValueError as exc:
            raise InfraError(f"{self.state_path} is not valid JSON ({exc}); remove it to start afresh") from exc
        data.setdefault("ports", {})
        data.setdefault("processes", [])
        return data  # type: ignore[no-any-return]

    def _save(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state, indent=2))
        os.chmod(tmp, 0o600)
        tmp.replace(self.state_path)

    def records(self) -> list[ProcessRecord]:
        return [ProcessRecord.from_json(p) for p in self.state["processes"]]

    def _remember(self, record: ProcessRecord) -> None:
        self.started.append(record)
        self.state["processes"].append(record.to_json())
        self._save()

    def remember(self, record: ProcessRecord) -> None:
        """Record a process started beside the stack (a Spark service): stopped with the rest."""
        self._remember(record)

    def alive(self) -> list[ProcessRecord]:
        return [r for r in self.records() if r.alive()]

    # -- infrastructure ---------------------------------------------------------------------------

    def start_infra(self) -> None:
        running = self.alive()
        if running:
            names = ", ".join(f"{r.name} (pid {r.pid})" for r in running)
            raise InfraError(
                f"{self.run_dir} is already in use by running processes: {names}; "
                f"stop them first (`porpoise cluster stop --run-dir {self.run_dir}`)"
            )
        self.state["processes"] = []
        sc = self.cfg.standalone
        self.tenant = ensure_tenant_user()
        if self.tenant is None:
            log.warning(
                "not started as root: tasks run as this user and can read this stack's secrets (its database, "
                "its API token); start it as root to run them as the unprivileged user " + TENANT_USER
            )
        self._make_private_dirs()
        if self.tenant is not None:
            self.python = reachable_python(self.run_dir, self.tenant)
        ports = self.state["ports"]
        taken: set[int] = set()
        for name, explicit in (
            ("etcd_client", sc.etcd_client_port),
            ("etcd_peer", sc.etcd_peer_port),
            ("postgres", sc.postgres_port),
        ):
            ports[name] = choose_port(f"standalone.{name}_port", explicit, ports.get(name), taken)
            taken.add(ports[name])
        self._save()
        logs_dir = self.run_dir / "logs"
        certs = CertDir(self.run_dir / "tls")
        if self.rpc_tls is None:  # every node of this stack is on loopback and shares one certificate
            issued = certs.issue("node", LOOPBACK)
            self.rpc_tls = TlsFiles(str(issued.ca), str(issued.cert), str(issued.key))
        etcd_tls = None
        if sc.secure_etcd:  # client TLS with client certificates, and etcd auth
            issued = certs.issue("etcd", LOOPBACK)
            etcd_tls = TlsFiles(str(issued.ca), str(issued.cert), str(issued.key))
            self.state.setdefault("etcd_root_password", secrets.token_urlsafe(24))
            self.state.setdefault("etcd_password", secrets.token_urlsafe(24))
        self.etcd = EtcdServer(
            self.run_dir / "etcd", ports["etcd_client"], ports["etcd_peer"], logs_dir / "etcd.log", tls=etcd_tls
        )
        self._remember(self.etcd.start(sc.start_timeout))
        if etcd_tls is not None:
            self.etcd.enable_auth(
                self.state["etcd_root_password"], ETCD_USER, self.state["etcd_password"], self.cfg.registry.root
            )
        self._save()
        log.info("etcd ready", endpoint=self.etcd.endpoint, secure=etcd_tls is not None)
        self.postgres = PostgresServer(
            self.run_dir / "postgres",
            ports["postgres"],
            logs_dir / "postgres.log",
            password=self.state.get("postgres_password"),
            durable=self.durable,
            settings=self.pg_settings,
        )
        self.state["postgres_password"] = self.postgres.password
        self.state.setdefault("rpc_secret", secrets.token_urlsafe(32))
        self._save()
        self._remember(self.postgres.start(sc.start_timeout))
        log.info("postgres ready", port=ports["postgres"], data=str(self.postgres.data_dir))
        # the schema, as its owner, once, before any node starts (nodes only check the version)
        result = asyncio.run(upgrade(self.postgres.owner_dsn, RUNTIME_ROLE))
        log.info("schema ready", change=result.describe())
        ensure_key_file(self.key_file)
        resealed = asyncio.run(_reseal(self.postgres.dsn, Keyring.from_file(self.key_file)))
        log.info("secrets sealed", key_file=str(self.key_file), resealed=resealed)
        self._write_node_config()

    def _make_private_dirs(self) -> None:
        """The run directory stays traversable (a tenant's task reaches its exec dir below it); what the nodes
        keep for themselves is not: its files are 0600 and these directories 0700."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.run_dir, os.stat(self.run_dir).st_mode & 0o7777 | 0o011)  # traversable, whatever the umask
        for name in PRIVATE_DIRS:
            path = self.run_dir / name
            path.mkdir(exist_ok=True)
            os.chmod(path, 0o700)

    @property
    def node_config_path(self) -> Path:
        return self.run_dir / NODE_CONFIG

    def _write_node_config(self) -> None:
        """``run_dir/node.yaml`` (0600, the launcher's user): the user's configuration file (``--config`` /
        ``PORPOISE_CONFIG``) with the stack's addresses and secrets over it. The nodes read it with --config;
        nothing secret is in their environment or command line (a task could read those)."""
        if self.etcd is None or self.postgres is None:
            raise InfraError("infrastructure is not started")
        user_file = os.environ.get("PORPOISE_CONFIG")
        merged: dict[str, Any] = {}
        if user_file:
            loaded = yaml.safe_load(Path(user_file).read_text()) or {}  # load() already checked it
            merged = {section: dict(values or {}) for section, values in loaded.items()}
        registry: dict[str, Any] = {"endpoints": [self.etcd.endpoint]}
        if self.etcd.tls is not None and self.rpc_tls is not None:
            # a secure etcd: the node certificate (the same CA signed etcd's), the user limited to the root
            registry |= {"tls_ca": self.rpc_tls.ca, "tls_cert": self.rpc_tls.cert, "tls_key": self.rpc_tls.key,
                         "user": ETCD_USER, "password": self.state["etcd_password"]}  # fmt: skip
        own: dict[str, dict[str, Any]] = {
            "registry": registry,
            "database": {"dsn": self.postgres.dsn},
            "rpc": {"secret": self.state["rpc_secret"]},
            "secrets": {"key_file": str(self.key_file)},
        }
        if self.rpc_tls is not None:
            own["rpc"] |= {"tls_ca": self.rpc_tls.ca, "tls_cert": self.rpc_tls.cert, "tls_key": self.rpc_tls.key}
        for section, values in own.items():
            merged[section] = {**merged.get(section, {}), **values}
        tmp = self.node_config_path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            os.fchmod(f.fileno(), 0o600)
            yaml.safe_dump(merged, f, sort_keys=True)
        tmp.replace(self.node_config_path)

    def node_env(self) -> dict[str, str]:
        """The nodes' environment: no secret (those are in node.yaml), no PORPOISE_* variable of the launcher's
        but PORPOISE_CONFIG_DIR and PORPOISE_WORKER_* (which win over the settings below)."""
        if self.etcd is None or self.postgres is None:
            raise InfraError("infrastructure is not started")
        env = {k: v for k, v in os.environ.items() if not k.startswith("PORPOISE_")}
        # development launchers: PYTHON tasks run with this virtualenv's interpreter (the example imports
        # pyarrow), SQL loadFiles read from the run dir and /tmp; the default tenant's tasks run as the
        # unprivileged porpoise-tenant, or, not started as root, as the launcher's own user (docs/SECURITY.md)
        env.update(
            {
                "PORPOISE_WORKER_PYTHON_INTERPRETER": self.python,
                "PORPOISE_WORKER_SQL_LOAD_DIRS": json.dumps([str(self.run_dir.resolve()), "/tmp"]),
            }
        )
        if self.tenant is not None:
            env["PORPOISE_WORKER_DEFAULT_TENANT_USER"] = self.tenant.pw_name
        else:
            env["PORPOISE_WORKER_ALLOW_ROOT_TENANT"] = "true"
        for key, value in os.environ.items():
            if key == "PORPOISE_CONFIG_DIR" or key.startswith("PORPOISE_WORKER_"):
                env[key] = value
        env.update(
            {
                "PORPOISE_LOGGING_FORMAT": "json",
                "PORPOISE_LOGGING_LEVEL": self.cfg.logging.level,
                "PYTHONUNBUFFERED": "1",
                **registry_timing_env(self.cfg),
            }
        )
        return env

    def tenant_dir(self, name: str) -> Path:
        """A directory below the run dir the default tenant's tasks may write (the example's data)."""
        path = self.run_dir / name
        path.mkdir(exist_ok=True)
        if self.tenant is not None:
            os.chown(path, self.tenant.pw_uid, self.tenant.pw_gid)
        return path

    def api_port(self) -> int:
        """The standalone API port: configured, else the one used last time when still free, else a free one."""
        ports = self.state["ports"]
        taken = {v for k, v in ports.items() if k != "api"}
        ports["api"] = choose_port("standalone.api_port", self.cfg.standalone.api_port, ports.get("api"), taken)
        self._save()
        return int(ports["api"])

    def start_node(
        self, role: str, name: str, overrides: list[str] | None = None, port: int | None = None
    ) -> ManagedProcess:
        """Start ``python -m engine.<role>`` on ``port`` (default: a free one); returns once its /ready
        answers 200."""
        port = port or free_port()
        # the worker's interpreter is also the one Spark starts its Python workers with, as the tenant
        python = self.python if role == "worker" else sys.executable
        argv = [python, "-m", f"engine.{role}", "--config", str(self.node_config_path)]
        argv += ["--set", f"{role}.listen_port={port}"]
        if role in ("master", "worker"):
            argv += ["--set", f"{role}.advertise_host=127.0.0.1"]  # everything here is on loopback
        if role == "worker":
            argv += ["--set", f"worker.log_dir={self.run_dir / 'task-logs'}"]
            argv += ["--set", f"worker.exec_dir={self.run_dir / 'exec'}"]
            argv += ["--set", f"worker.spool_dir={self.run_dir / 'spool'}"]
            argv += ["--set", f"storage.cache_dir={self.run_dir / 'resource-cache'}"]
        for item in overrides or []:
            argv += ["--set", item]
        proc = ManagedProcess(name, argv, self.run_dir / "logs" / f"{name}.log", env=self.node_env())
        record = proc.start()
        record.extra = {"role": role, "port": port}
        self._remember(record)
        self.nodes.append(proc)
        self._wait_healthy(proc, port, tls=role != "api")  # the API's own listener is configured apart
        log.info("node ready", name=name, role=role, address=f"127.0.0.1:{port}", pid=record.pid)
        return proc

    def probe(self, port: int, path: str, timeout: float = 2, tls: bool = True) -> bytes:
        """GET ``path`` (/health, /metrics) from a node of this stack: over TLS, checked against the stack's CA,
        when its nodes serve mutual TLS (a probe needs no client certificate)."""
        tls = tls and self.rpc_tls is not None
        url = f"{'https' if tls else 'http'}://127.0.0.1:{port}{path}"
        context = ssl.create_default_context(cafile=self.rpc_tls.ca) if tls and self.rpc_tls else None
        with urllib.request.urlopen(url, timeout=timeout, context=context) as resp:
            return bytes(resp.read())

    def _wait_healthy(self, proc: ManagedProcess, port: int, tls: bool = True) -> None:
        def healthy() -> bool:
            if proc.exited() is not None:
                raise InfraError(f"{proc.name} exited with code {proc.exited()}:\n{proc.tail()}")
            try:
                self.probe(port, "/ready", timeout=1, tls=tls)
                return True
            except (OSError, urllib.error.URLError):  # HTTPError (503: not ready yet) is a URLError
                return False

        wait_until(healthy, self.cfg.standalone.start_timeout, interval=0.1, what=f"{proc.name} on port {port}")

    # -- stopping ---------------------------------------------------------------------------------

    def stop_all(self) -> list[str]:
        """Stop every recorded process, nodes first, then PostgreSQL, then etcd."""
        return self._stop(self.records())

    def stop_started(self) -> list[str]:
        """Roll back a failed start: stop only what this Stack object started."""
        return self._stop(list(self.started))

    def _stop(self, records: list[ProcessRecord]) -> list[str]:
        timeout = self.cfg.standalone.stop_timeout
        stopped = []
        order = {"postgres": 1, "etcd": 2}
        for record in sorted(records, key=lambda r: order.get(r.name, 0)):
            if record.stop(timeout):
                stopped.append(record.name)
        held = [*self.nodes, *(s.proc for s in (self.etcd, self.postgres) if s is not None)]
        for proc in held:
            if proc is not None and proc.popen is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.popen.wait(timeout=5)  # reap our own children
        gone = {(r.pid, r.create_time) for r in records}
        self.state["processes"] = [p for p in self.state["processes"] if (p["pid"], p["create_time"]) not in gone]
        self.started = [r for r in self.started if (r.pid, r.create_time) not in gone]
        if self.state_path.exists():
            self._save()
        return stopped
