"""MariaDB and ClickHouse servers for the SQL and PROCEDURE task tests, started privately on loopback on free
ports with their data under the test's directory (like etcd and PostgreSQL in tests/conftest.py).

The binaries come from Debian's ``mariadb-server`` and ``clickhouse-server`` (``make install``); a missing one
fails the test that needs it with a message saying what to install, never a skip."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from engine.infra.ports import free_port

START_TIMEOUT = 300.0
#: what the tests connect as on both servers
USER = "porpoise"
PASSWORD = "s3cret-Pw"


def need(binary: str, package: str) -> str:
    path = shutil.which(binary) or next(
        (p for p in (f"/usr/sbin/{binary}", f"/usr/bin/{binary}") if os.access(p, os.X_OK)), None
    )
    if path is None:
        raise RuntimeError(f"{binary} is not installed: run `make install` or apt-get install {package} (as root)")
    return path


def _wait(proc: subprocess.Popen, ready: callable, log: Path, what: str, group: bool = False) -> None:
    """Until ``ready()``; the server is killed (its process group with ``group``) when it does not get there,
    whatever ends the wait (its exit, the deadline, the test's own time limit)."""
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{what} exited with {proc.returncode}: {log.read_text(errors='replace')[-2000:]}")
            if ready():
                return
            time.sleep(0.1)
        raise RuntimeError(f"{what} not ready after {START_TIMEOUT}s: {log.read_text(errors='replace')[-2000:]}")
    except BaseException:
        if proc.poll() is None:
            if group:
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
            proc.wait()
        raise


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass
class MariaDb:
    host: str
    port: int
    socket: Path
    proc: subprocess.Popen
    database: str = "porpoise_test"

    def source(self, **extra: object) -> dict[str, object]:
        """A data source's connection params for this server (type MYSQL)."""
        return {
            "type": "MYSQL",
            "host": self.host,
            "port": self.port,
            "database": self.database,
            "user": USER,
            "password": PASSWORD,
            **extra,
        }

    def admin(self, sql: str) -> str:
        """Run ``sql`` as root over the socket with the mysql client; its tab-separated output."""
        out = subprocess.run(
            [
                need("mysql", "mariadb-client"),
                "--no-defaults",
                f"--socket={self.socket}",
                "-uroot",
                "-N",
                "-B",
                "-e",
                sql,
            ],
            check=False,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if out.returncode != 0:
            raise RuntimeError(f"mysql: {out.stderr.strip()}")
        return out.stdout


def start_mariadb(base: Path) -> MariaDb:
    mysqld = need("mysqld", "mariadb-server")
    install = need("mysql_install_db", "mariadb-server")
    datadir, log = base / "data", base / "mysqld.log"
    base.mkdir(parents=True, exist_ok=True)
    # as root: the server runs as root too (the test's private directories are not the mysql user's)
    user = ["--user=root"] if os.geteuid() == 0 else []
    subprocess.run(
        [install, "--no-defaults", f"--datadir={datadir}", *user, "--auth-root-authentication-method=socket",
         "--skip-test-db"],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    port, socket = free_port(), base / "mysqld.sock"
    proc = subprocess.Popen(
        [mysqld, "--no-defaults", f"--datadir={datadir}", f"--socket={socket}", f"--port={port}",
         "--bind-address=127.0.0.1", f"--pid-file={base / 'mysqld.pid'}", f"--log-error={log}", *user,
         "--skip-name-resolve", "--innodb-buffer-pool-size=16M", "--performance-schema=OFF"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    server = MariaDb("127.0.0.1", port, socket, proc)

    def ready() -> bool:
        try:
            server.admin("SELECT 1")
            return True
        except RuntimeError:
            return False

    _wait(proc, ready, log, "mysqld")
    server.admin(
        f"CREATE DATABASE {server.database}; CREATE USER '{USER}'@'%' IDENTIFIED BY '{PASSWORD}';"
        f" GRANT ALL ON {server.database}.* TO '{USER}'@'%'; GRANT PROCESS ON *.* TO '{USER}'@'%';"
    )
    return server


def stop_mariadb(server: MariaDb) -> None:
    _stop(server.proc)


@dataclass
class ClickHouse:
    host: str
    port: int
    http_port: int
    proc: subprocess.Popen
    database: str = "default"

    def source(self, **extra: object) -> dict[str, object]:
        """A data source's connection params for this server (type CLICKHOUSE, native protocol)."""
        return {
            "type": "CLICKHOUSE",
            "host": self.host,
            "port": self.port,
            "database": self.database,
            "user": USER,
            "password": PASSWORD,
            **extra,
        }


_CLICKHOUSE_CONFIG = """<?xml version="1.0"?>
<yandex>
    <logger><level>information</level><log>{base}/server.log</log><errorlog>{base}/error.log</errorlog></logger>
    <listen_host>127.0.0.1</listen_host>
    <tcp_port>{tcp}</tcp_port>
    <http_port>{http}</http_port>
    <interserver_http_port>{inter}</interserver_http_port>
    <path>{base}/data/</path>
    <tmp_path>{base}/tmp/</tmp_path>
    <user_files_path>{base}/user_files/</user_files_path>
    <format_schema_path>{base}/format_schemas/</format_schema_path>
    <users_config>{base}/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <mark_cache_size>5368709</mark_cache_size>
    <uncompressed_cache_size>8589934</uncompressed_cache_size>
    <max_concurrent_queries>20</max_concurrent_queries>
</yandex>
"""

_CLICKHOUSE_USERS = """<?xml version="1.0"?>
<yandex>
    <profiles><default><max_memory_usage>1000000000</max_memory_usage></default></profiles>
    <users>
        <default><password></password><networks><ip>127.0.0.1</ip></networks>
            <profile>default</profile><quota>default</quota></default>
        <{user}><password>{password}</password><networks><ip>127.0.0.1</ip></networks>
            <profile>default</profile><quota>default</quota></{user}>
    </users>
    <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors>
        <result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default>
    </quotas>
</yandex>
"""


def start_clickhouse(base: Path) -> ClickHouse:
    binary = need("clickhouse-server", "clickhouse-server")
    base.mkdir(parents=True, exist_ok=True)
    tcp, http, inter = free_port(), free_port(), free_port()
    (base / "config.xml").write_text(_CLICKHOUSE_CONFIG.format(base=base, tcp=tcp, http=http, inter=inter))
    (base / "users.xml").write_text(_CLICKHOUSE_USERS.format(user=USER, password=PASSWORD))
    log = base / "stderr.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([binary, f"--config-file={base / 'config.xml'}"], stdout=out, stderr=out, cwd=base)
    server = ClickHouse("127.0.0.1", tcp, http, proc)

    def ready() -> bool:
        import urllib.request

        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{http}/ping", timeout=2) as reply:
                return reply.status == 200
        except OSError:
            return False

    _wait(proc, ready, base / "error.log" if (base / "error.log").exists() else log, "clickhouse-server")
    return server


def stop_clickhouse(server: ClickHouse) -> None:
    _stop(server.proc)


@dataclass
class HiveServer:
    """Spark's Thrift server (HiveServer2 protocol) from the pyspark wheel, local[2], Derby metastore."""

    host: str
    port: int
    proc: subprocess.Popen
    log: Path
    #: the Spark UI's port: its REST API lists the jobs each statement runs
    ui_port: int
    database: str = "default"

    def source(self, **extra: object) -> dict[str, object]:
        return {"type": "HIVE", "host": self.host, "port": self.port, "database": self.database,
                "user": USER, "password": PASSWORD, **extra}  # fmt: skip

    def jobs(self, status: str) -> list[dict[str, object]]:
        """The Spark jobs in ``status`` (running, succeeded, failed), each with the statement that runs it as
        its ``description`` (Spark's Thrift server names a statement's jobs after it)."""
        import json
        import urllib.request

        base = f"http://{self.host}:{self.ui_port}/api/v1/applications"
        # the first call starts the UI's REST service: seconds on a loaded machine
        with urllib.request.urlopen(base, timeout=60) as reply:
            (app,) = json.load(reply)
        with urllib.request.urlopen(f"{base}/{app['id']}/jobs?status={status}", timeout=60) as reply:
            return json.load(reply)


_METASTORE = "spark.hadoop.javax.jdo.option.ConnectionURL"


def start_hive(base: Path) -> HiveServer:
    try:
        import pyspark
    except ImportError:
        raise RuntimeError("the Hive tests need pyspark (pip install -e '.[spark]')") from None
    java = shutil.which("java")
    if java is None:
        raise RuntimeError("the Hive tests need Java 17: apt-get install openjdk-17-jre-headless (as root)")
    home = Path(pyspark.__file__).parent
    base.mkdir(parents=True, exist_ok=True)
    port, log = free_port(), base / "thriftserver.log"
    argv = [str(home / "bin" / "spark-submit"), "--class", "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2",
            "--master", "local[2]", "--conf", f"spark.ui.port={free_port()}", "--conf", "spark.driver.host=127.0.0.1",
            "--conf", f"spark.sql.warehouse.dir={base / 'warehouse'}",
            "--conf", f"{_METASTORE}=jdbc:derby:;databaseName={base / 'metastore'};create=true",
            "--hiveconf", f"hive.server2.thrift.port={port}", "--hiveconf", "hive.server2.thrift.bind.host=127.0.0.1",
            "spark-internal"]  # fmt: skip
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOG_DIR": str(base), "SPARK_LOCAL_IP": "127.0.0.1"}
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=out, cwd=base, env=env, start_new_session=True)

    def ready() -> bool:
        import socket

        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            return False

    _wait(proc, ready, log, "Spark Thrift server", group=True)
    ui = re.search(r"service 'SparkUI' on port (\d+)", log.read_text(errors="replace"))
    if ui is None:
        stop_hive(HiveServer("127.0.0.1", port, proc, log, 0))
        raise RuntimeError(f"the Spark Thrift server started no UI (its log: {log})")
    return HiveServer("127.0.0.1", port, proc, log, int(ui.group(1)))


def stop_hive(server: HiveServer) -> None:
    if server.proc.poll() is None:
        os.killpg(server.proc.pid, signal.SIGTERM)
        try:
            server.proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(server.proc.pid, signal.SIGKILL)
            server.proc.wait()
