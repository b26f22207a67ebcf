"""Shared fixtures: one real etcd and one real PostgreSQL per test session, on free loopback ports,
started by the same launcher code `make run` uses. Tests that break their server (SIGSTOP, restart)
get a private one from the factories instead."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
import tempfile
import urllib.request
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from core import logs
from engine import config as config_mod
from engine.accounts.tokens import create_token, ensure_user
from engine.client import ApiClient, Target
from engine.config import Config
from engine.infra.etcd import EtcdServer
from engine.infra.ports import free_port
from engine.infra.postgres import PostgresServer
from engine.secretbox import ensure_key_file
from engine.storage.jsoncodec import register_json
from registry import EtcdClient
from rpc import RpcClient
from tests import databases, sql_servers
from tests import tls as tls_mod
from tests.helpers import NodeProc, node_env, rpc_client, wait_sync
from tests.worker_harness import ReportSink

if tls_mod.ENABLED:
    # with TLS on, a test's plain urllib calls (API, health probes) trust the cluster CA the nodes' certificates
    # come from, as an operator's client given that CA would
    urllib.request.install_opener(urllib.request.build_opener(urllib.request.HTTPSHandler(context=tls_mod.trusting())))

logs.configure("console", "warning")


@pytest.fixture(scope="session")
def workdir() -> Iterator[Path]:
    # Under /tmp and world-traversable: PostgreSQL runs as the `postgres` user when tests run as root.
    path = Path(tempfile.mkdtemp(prefix="porpoise-test-"))
    os.chmod(path, 0o755)
    yield path
    if not os.environ.get("PORPOISE_TEST_KEEP"):  # set it to inspect logs after a failure
        shutil.rmtree(path, ignore_errors=True)


def _start_etcd(base: Path) -> EtcdServer:
    name = uuid.uuid4().hex[:8]
    server = EtcdServer(
        base / f"etcd-{name}", free_port(), free_port(), base / "logs" / f"etcd-{name}.log", **tls_mod.etcd_kwargs()
    )
    server.start()
    tls_mod.secure_etcd(server)
    return server


@pytest.fixture(scope="session")
def etcd_server(workdir: Path) -> Iterator[EtcdServer]:
    server = _start_etcd(workdir)
    yield server
    server.stop()


@pytest.fixture
def etcd_factory(workdir: Path) -> Iterator[Callable[[], EtcdServer]]:
    """Private etcd servers for tests that stop, pause or restart them."""
    started: list[EtcdServer] = []

    def make() -> EtcdServer:
        server = _start_etcd(workdir)
        started.append(server)
        return server

    yield make
    for server in started:
        if server.proc and server.proc.record:
            server.proc.record.signal(18)  # SIGCONT, in case a test left it stopped
        server.stop()


@pytest.fixture(scope="session")
def pg_server(workdir: Path) -> Iterator[PostgresServer]:
    server = PostgresServer(workdir / "pg", free_port(), workdir / "logs" / "postgres.log", durable=False)
    server.start()
    databases.prepare_server(server)
    yield server
    server.stop()


@pytest.fixture
def fresh_db(pg_server: PostgresServer) -> Iterator[str]:
    """A new database at this code's schema for one test; the runtime role's DSN (rows only, no DDL)."""
    name, dsn = asyncio.run(databases.create_migrated(pg_server))
    yield dsn
    asyncio.run(databases.drop(pg_server, name))


@pytest.fixture
async def pool(fresh_db: str) -> AsyncIterator[asyncpg.Pool]:
    """A small asyncpg pool on ``fresh_db`` (JSON columns decoded), closed after the test."""
    pool = await asyncpg.create_pool(fresh_db, min_size=1, max_size=4, init=register_json)
    yield pool
    await pool.close()


@pytest.fixture
def empty_db(pg_server: PostgresServer) -> Iterator[databases.EmptyDb]:
    """A new database without a schema, owned by the schema owner role: its owner and runtime DSNs."""
    db = asyncio.run(databases.create_empty(pg_server))
    yield db
    asyncio.run(databases.drop(pg_server, db.name))


@pytest.fixture
def sink_db(fresh_db: str, pg_server: PostgresServer) -> str:
    """The schema owner's DSN of ``fresh_db``, for ReportSink (it creates a table of its own: DDL)."""
    return databases.owner_dsn(pg_server, fresh_db)


@pytest.fixture
async def sink(sink_db: str) -> AsyncIterator[ReportSink]:
    """A real report endpoint standing in for the master in worker tests (tests/worker_harness.py)."""
    s = await ReportSink(sink_db).start()
    yield s
    await s.close()


@pytest.fixture
async def client() -> AsyncIterator[RpcClient]:
    """An RPC client for a test playing a master (tests.helpers.rpc_client: mutual TLS with the suite's TLS)."""
    c = rpc_client(10)
    yield c
    await c.close()


@pytest.fixture
def etcd_root() -> str:
    """A key-space root of this test's own."""
    return f"/t-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def registry_config(etcd_server: EtcdServer, etcd_root: str) -> Config:
    return config_mod.load(
        overrides=[
            f"registry.endpoints={etcd_server.endpoint}",
            f"registry.root={etcd_root}",
            "registry.lease_ttl=2",
            "registry.keepalive_interval=0.5",
            "registry.heartbeat_interval=0.5",
            "registry.request_timeout=1",
            *tls_mod.registry_overrides(),
        ],
        environ={},
    )


@pytest.fixture
async def etcd(etcd_server: EtcdServer) -> EtcdClient:
    client = EtcdClient([etcd_server.endpoint], request_timeout=2, access=tls_mod.etcd_access())
    yield client
    await client.close()


@pytest.fixture
def node_factory(workdir: Path, pg_server: PostgresServer) -> Iterator[Callable[..., NodeProc]]:
    """Start real master/worker processes; all are stopped at teardown. Masters use the session
    database unless the test passes PORPOISE_DATABASE_DSN."""
    nodes: list[NodeProc] = []

    def make(
        role: str,
        endpoint: str,
        root: str,
        ttl: float = 2,
        overrides: list[str] | None = None,
        port: int = 0,
        **env: str,
    ):
        env.setdefault("PORPOISE_DATABASE_DSN", pg_server.dsn)
        name = f"{role}-{uuid.uuid4().hex[:6]}"
        node = NodeProc(role, node_env(endpoint, root, ttl, **env), workdir / "logs", name, overrides or [], port)
        nodes.append(node)
        return node.start()

    yield make
    for node in nodes:
        node.stop()


@dataclass
class ApiCluster:
    """A running master + worker + API (real processes) on a database of its own, and an API token."""

    dsn: str
    url: str
    token: str
    root: str
    api: NodeProc
    master: NodeProc
    worker: NodeProc
    work: Path
    #: the keyring file the nodes seal and open stored credentials with
    key_file: Path
    #: the CA of an https:// API ("" for plain HTTP)
    ca_file: str = ""

    def client(self, token: str | None = None) -> ApiClient:
        return ApiClient(Target(self.url, self.token if token is None else token, "test", self.ca_file))

    def query(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        async def run() -> list[asyncpg.Record]:
            conn = await asyncpg.connect(self.dsn)
            try:
                return await conn.fetch(sql, *args)
            finally:
                await conn.close()

        return asyncio.run(run())


#: node environment without the load guard (master claims, worker admission)
UNGUARDED = {"PORPOISE_MASTER_MAX_CPU_LOAD_AVG": "100000", "PORPOISE_WORKER_MAX_CPU_LOAD_AVG": "100000"}


@contextlib.contextmanager
def launch_api_cluster(
    workdir: Path,
    pg_server: PostgresServer,
    etcd_endpoint: str,
    worker: bool = True,
    tls: bool = tls_mod.ENABLED,
    api_overrides: tuple[str, ...] = (),
    **env: str,
) -> Iterator[ApiCluster]:
    """A master, a worker (unless ``worker`` is false: ``ApiCluster.worker`` is then None) and an API on a new
    database, with a keyring file in its own directory; with ``tls``, mutual TLS between the nodes and HTTPS
    for the API (certificates of the test cluster CA, tests/tls.py). ``env``: more environment for every node;
    ``api_overrides``: the API's settings over the defaults below (e.g. a token cache: it has none here)."""
    name = f"api_{uuid.uuid4().hex[:8]}"

    async def prepare() -> tuple[str, str]:
        _, dsn = await databases.create_migrated(pg_server, "api")
        conn = await asyncpg.connect(dsn)
        try:
            _, token = await create_token(conn, await ensure_user(conn), "tests")
        finally:
            await conn.close()
        return dsn, token

    dsn, token = asyncio.run(prepare())
    name = databases.database_name(dsn)
    root = f"/api-{uuid.uuid4().hex[:8]}"
    work = workdir / name
    nodes: list[NodeProc] = []
    key_file = ensure_key_file(work / "secrets.key")  # as standalone does in its run dir
    tls_env = {**tls_mod.rpc_env(), **tls_mod.api_env()} if tls else {}
    # the API tests are about the API, not load: a machine shared with other suites must not make the master
    # refuse commands (the overload guard has tests of its own), as in tests/hosts.py
    env = {**UNGUARDED, **env}
    ca_file = tls_mod.node_files().ca if tls else ""

    def start(role: str, overrides: list[str]) -> NodeProc:
        node_vars = node_env(
            etcd_endpoint, root, 3, PORPOISE_DATABASE_DSN=dsn, PORPOISE_SECRETS_KEY_FILE=str(key_file), **tls_env, **env
        )
        node = NodeProc(role, node_vars, workdir / "logs", f"{name}-{role}", overrides)
        nodes.append(node)
        return node.start()

    try:
        master = start("master", [])
        worker_overrides = [
            f"worker.log_dir={work / 'logs'}",
            f"worker.exec_dir={work / 'exec'}",
            f"storage.cache_dir={work / 'resource-cache'}",
            # the example's quality check imports pyarrow; its SQL task loads from the test's tmp_path
            f"worker.python_interpreter={sys.executable}",
            f"worker.sql_load_dirs=[{tempfile.gettempdir()}]",
        ]
        runner = start("worker", worker_overrides) if worker else None
        api = start(
            "api",
            # no anonymous rate limit: walking every route without a token (test_api.py) spends more than the
            # default burst from one address, and the next test's refused token would get 429 (the limits have
            # their own API in test_api_limits.py)
            ["api.token_cache_seconds=0", "api.alert_retry_seconds=0.2", "api.alert_poll_interval=0.1",
             "api.alert_timeout=2", "api.alert_webhook_allow=[127.0.0.0/8]", "api.anonymous_rate_limit_per_second=0",
             *api_overrides],
        )  # fmt: skip
        cluster = ApiCluster(dsn, api.url, token, root, api, master, runner, work, key_file, ca_file)  # type: ignore[arg-type]
        wait_sync(lambda: _cluster_seen(cluster, worker), 30, what="api sees the cluster")
        yield cluster
    finally:
        for node in reversed(nodes):
            node.stop()


@pytest.fixture(scope="session")
def api_cluster(workdir: Path, pg_server: PostgresServer, etcd_server: EtcdServer) -> Iterator[ApiCluster]:
    """Shared by the API, CLI and example tests (each uses workflow names of its own)."""
    with launch_api_cluster(workdir, pg_server, etcd_server.endpoint) as cluster:
        yield cluster


def _cluster_seen(cluster: ApiCluster, worker: bool = True) -> bool:
    from engine.client import ApiClientError

    try:
        data = cluster.client().get("/api/v1/cluster")
    except ApiClientError:
        return False
    return bool(data["masters"]) and (bool(data["workers"]) or not worker)


@pytest.fixture(scope="session")
def mariadb(workdir: Path) -> Iterator[sql_servers.MariaDb]:
    """A private MariaDB server (Debian's mariadb-server) for the MYSQL data-source tests."""
    server = sql_servers.start_mariadb(workdir / "mariadb")
    yield server
    sql_servers.stop_mariadb(server)


@pytest.fixture(scope="session")
def clickhouse(workdir: Path) -> Iterator[sql_servers.ClickHouse]:
    """A private ClickHouse server (Debian's clickhouse-server) for the CLICKHOUSE data-source tests."""
    server = sql_servers.start_clickhouse(workdir / "clickhouse")
    yield server
    sql_servers.stop_clickhouse(server)


@pytest.fixture(scope="session")
def hive(workdir: Path) -> Iterator[sql_servers.HiveServer]:
    """Spark's Thrift server (HiveServer2) for the HIVE data-source tests: a JVM, started once."""
    server = sql_servers.start_hive(workdir / "hive")
    yield server
    sql_servers.stop_hive(server)


#: (test, names of the threads it started that outlived it): printed after the run. A thread left running in
#: the test process competes with every later test (for the GIL and, under tracemalloc, in memory bounds)
_LEAKED_THREADS: list[tuple[str, list[str]]] = []


@pytest.fixture(autouse=True)
def _thread_census(request: pytest.FixtureRequest) -> Iterator[None]:
    import threading
    import time

    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 1.0
    while True:
        extra = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        if not extra or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    if extra:
        _LEAKED_THREADS.append((request.node.nodeid, sorted(t.name for t in extra)))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _LEAKED_THREADS:
        terminalreporter.section("threads that outlived their test")
        for nodeid, names in _LEAKED_THREADS:
            terminalreporter.line(f"{nodeid}: {', '.join(names)}")
