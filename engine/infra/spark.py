"""Spark from the pyspark wheel as services: a standalone cluster (a Spark master and workers, started
with ``spark-class org.apache.spark.deploy.master.Master`` / ``...deploy.worker.Worker``) and a Spark
Connect server (``spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer``, what
``sbin/start-connect-server.sh`` runs, in the foreground so the launcher owns it).

Small by default (this is for a laptop, CI and the tests): daemons with 256 MB heaps, each worker one
core and 512 MB for executors. Every process is a child in its own session; ``stop`` ends it and
whatever it started (executors are children of their Spark worker, which may have been killed).

Each daemon has a ``Place``: the address it binds and advertises (``--host`` and SPARK_LOCAL_IP, which its
executors inherit), inside a network namespace when one is named (``nsenter``, as the multi-host harness
tests/hosts.py runs every process of a host). By default all of them share the master's place (loopback).
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import socket
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from core.errors import BinaryNotFound, InfraError
from engine.infra.ports import free_port
from engine.infra.process import ManagedProcess, ProcessRecord, in_netns, wait_until

CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def spark_home() -> Path:
    """The Spark distribution inside the pyspark wheel (bin/spark-class, jars/)."""
    try:
        import pyspark
    except ImportError as exc:  # pragma: no cover - a broken install
        raise BinaryNotFound("pyspark is not installed; run `make install`") from exc
    home = Path(pyspark.__file__).parent
    if not (home / "bin" / "spark-class").is_file():
        raise BinaryNotFound(f"spark-class not found in {home / 'bin'}; reinstall pyspark")
    return home


def spark_env(
    host: str, log_dir: Path, daemon_memory: str = "", user: pwd.struct_passwd | None = None, python: str = ""
) -> dict[str, str]:
    """Environment of a Spark process bound to ``host``; Python workers use ``python`` (default: this
    interpreter). ``daemon_memory``: the heap of a master or worker daemon (SPARK_DAEMON_MEMORY); ``user``: the
    OS user it runs as (its HOME)."""
    python = python or sys.executable
    env = {
        **os.environ,
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": host,
        "SPARK_LOG_DIR": str(log_dir),
        "PYSPARK_PYTHON": python,
        "PYSPARK_DRIVER_PYTHON": python,
    }
    if daemon_memory:
        env["SPARK_DAEMON_MEMORY"] = daemon_memory
    if user is not None:
        env |= {"HOME": user.pw_dir, "USER": user.pw_name, "LOGNAME": user.pw_name}
    return env


def hand_over(run_dir: Path, user: pwd.struct_passwd | None) -> None:
    """Make ``run_dir`` and its ``logs`` directory, owned by ``user`` when given (the daemons write there)."""
    for path in (run_dir, run_dir / "logs"):
        path.mkdir(parents=True, exist_ok=True)
        if user is not None:
            os.chown(path, user.pw_uid, user.pw_gid)


def fetch_json(url: str, timeout: float = 2.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read())


@dataclass(frozen=True)
class Place:
    """Where a Spark daemon runs: the address it binds and advertises, in network namespace ``netns``
    (``ip netns`` name; empty = this process's own)."""

    host: str = "127.0.0.1"
    netns: str = ""


@dataclass
class SparkDaemon:
    """One started Spark process."""

    proc: ManagedProcess
    record: ProcessRecord


class SparkCluster:
    """A Spark standalone cluster: one master (RPC ``master_port``, web UI and JSON status ``ui_port``) bound
    to ``host`` (in network namespace ``netns`` when given) and ``workers`` workers at the same place, or
    one worker at each of ``worker_places`` (e.g. each on a host of its own)."""

    def __init__(
        self,
        run_dir: Path,
        host: str = "127.0.0.1",
        workers: int = 2,
        worker_cores: int = 1,
        worker_memory: str = "512m",
        daemon_memory: str = "256m",
        master_port: int = 0,
        ui_port: int = 0,
        netns: str = "",
        worker_places: Sequence[Place] = (),
        user: pwd.struct_passwd | None = None,
        python: str = "",
    ) -> None:
        self.run_dir = run_dir
        #: the OS user the daemons (and so the executors, running applications' code) run as; None: this one
        self.user = user
        #: the executors' Python ("": this interpreter)
        self.python = python
        self.place = Place(host, netns)
        self.worker_places = list(worker_places) or [self.place] * workers
        self.workers = len(self.worker_places)
        self.worker_cores = worker_cores
        self.worker_memory = worker_memory
        self.daemon_memory = daemon_memory
        # a new namespace has every port free; loopback's are checked
        self.master_port = master_port or free_port(host if not netns else "127.0.0.1")
        self.ui_port = ui_port or free_port(host if not netns else "127.0.0.1")
        self.daemons: list[SparkDaemon] = []

    @property
    def host(self) -> str:
        return self.place.host

    @property
    def master_url(self) -> str:
        return f"spark://{self.host}:{self.master_port}"

    @property
    def ui_url(self) -> str:
        return f"http://{self.host}:{self.ui_port}"

    def status(self) -> dict[str, Any]:
        """The master's JSON status (``/json/``): workers, active and completed applications."""
        data = fetch_json(f"{self.ui_url}/json/")
        assert isinstance(data, dict)
        return data

    def worker_status(self, timeout: float = 2.0) -> dict[str, dict[str, Any]]:
        """Each registered Spark worker's own JSON status (its web UI's ``/json/``: its ``executors`` and
        ``finishedexecutors``, each with its ``appid``), by the worker's host; ALIVE workers only."""
        alive = [w for w in self.status()["workers"] if w["state"] == "ALIVE"]
        return {w["host"]: fetch_json(f"{w['webuiaddress']}/json/", timeout) for w in alive}

    def _start(self, name: str, argv: list[str], place: Place) -> SparkDaemon:
        env = spark_env(place.host, self.run_dir / "logs", self.daemon_memory, self.user, self.python)
        log = self.run_dir / "logs" / f"{name}.log"  # cwd: what Spark writes there stays in the run dir
        hand_over(self.run_dir, self.user)
        user = self.user.pw_name if self.user is not None else None
        proc = ManagedProcess(name, in_netns(place.netns, argv), log, env=env, cwd=self.run_dir, user=user)
        daemon = SparkDaemon(proc, proc.start())
        self.daemons.append(daemon)
        return daemon

    def start(self, timeout: float = 180) -> list[ProcessRecord]:
        """Start the master, then the workers; return once every worker is ALIVE at the master."""
        spark_class = str(spark_home() / "bin" / "spark-class")
        try:
            self._start("spark-master", [
                spark_class, "org.apache.spark.deploy.master.Master",
                "--host", self.host, "--port", str(self.master_port), "--webui-port", str(self.ui_port),
            ], self.place)  # fmt: skip
            self._wait(timeout, lambda s: s.get("status") == "ALIVE", "the Spark master")
            for i, place in enumerate(self.worker_places, 1):
                self._start(f"spark-worker-{i}", [
                    spark_class, "org.apache.spark.deploy.worker.Worker",
                    "--host", place.host, "--cores", str(self.worker_cores), "--memory", self.worker_memory,
                    "--webui-port", "0", "--work-dir", str(self.run_dir / f"worker-{i}"), self.master_url,
                ], place)  # fmt: skip
            self._wait(timeout, lambda s: s.get("aliveworkers") == self.workers, f"{self.workers} Spark workers")
        except BaseException:
            self.stop()
            raise
        return [d.record for d in self.daemons]

    def _wait(self, timeout: float, ready: Any, what: str) -> None:
        def check() -> bool:
            for d in self.daemons:
                if d.proc.exited() is not None:
                    raise InfraError(f"{d.proc.name} exited with code {d.proc.exited()}:\n{d.proc.tail()}")
            try:
                return bool(ready(self.status()))
            except (OSError, urllib.error.URLError, ValueError):
                return False

        wait_until(check, timeout, interval=0.25, what=f"{what} at {self.ui_url}")

    def stop(self, timeout: float = 20) -> None:
        """Workers first (each with the executors it started), then the master."""
        for d in reversed(self.daemons):
            stop_tree(d, timeout)
        self.daemons = []


class SparkConnectServer:
    """A long-lived Spark Connect server on ``host:port`` whose applications run on ``master``
    (``local[N]``, or a standalone cluster's ``spark://`` URL); its Spark UI on ``ui_port``."""

    def __init__(
        self,
        run_dir: Path,
        host: str = "127.0.0.1",
        port: int = 0,
        master: str = "local[2]",
        driver_memory: str = "512m",
        ui_port: int = 0,
        conf: dict[str, str] | None = None,
        netns: str = "",
        user: pwd.struct_passwd | None = None,
        python: str = "",
    ) -> None:
        self.run_dir = run_dir
        #: the OS user the server (and so the sessions' code) runs as; None: this one
        self.user = user
        #: its Python workers' interpreter ("": this one)
        self.python = python
        self.host = host
        self.port = port or free_port(host if not netns else "127.0.0.1")
        self.ui_port = ui_port or free_port(host if not netns else "127.0.0.1")
        self.master = master
        self.driver_memory = driver_memory
        self.conf = conf or {}
        self.netns = netns
        self.daemon: SparkDaemon | None = None

    @property
    def url(self) -> str:
        return f"sc://{self.host}:{self.port}"

    @property
    def ui_url(self) -> str:
        return f"http://{self.host}:{self.ui_port}"

    def argv(self) -> list[str]:
        conf = {
            "spark.connect.grpc.binding.address": self.host,
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.ui.port": str(self.ui_port),
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.shuffle.partitions": "4",
            "spark.executor.memory": "512m",
            **self.conf,
        }
        argv = [
            str(spark_home() / "bin" / "spark-submit"), "--class", CONNECT_SERVER_CLASS,
            "--name", "porpoise Spark Connect server", "--master", self.master,
            "--driver-memory", self.driver_memory,
        ]  # fmt: skip
        for key, value in conf.items():
            argv += ["--conf", f"{key}={value}"]
        return in_netns(self.netns, argv)

    def start(self, timeout: float = 180) -> ProcessRecord:
        """Start the server; return once its gRPC port accepts connections."""
        env = spark_env(self.host, self.run_dir / "logs", user=self.user, python=self.python)
        hand_over(self.run_dir, self.user)
        log = self.run_dir / "logs" / "spark-connect.log"
        if self.user is None:
            proc = ManagedProcess("spark-connect", self.argv(), log, env=env)
        else:  # in its run dir: what Spark writes in its working directory (a warehouse, a metastore) is its own
            proc = ManagedProcess("spark-connect", self.argv(), log, env=env, cwd=self.run_dir, user=self.user.pw_name)
        self.daemon = SparkDaemon(proc, proc.start())

        def listening() -> bool:
            if proc.exited() is not None:
                raise InfraError(f"the Spark Connect server exited with code {proc.exited()}:\n{proc.tail()}")
            with contextlib.suppress(OSError), socket.create_connection((self.host, self.port), timeout=1):
                return True
            return False

        try:
            wait_until(listening, timeout, interval=0.25, what=f"the Spark Connect server at {self.url}")
        except BaseException:
            self.stop()
            raise
        return self.daemon.record

    def running_jobs(self, timeout: float = 15) -> list[dict[str, Any]]:
        """The server application's running Spark jobs (its Spark UI's REST API)."""
        apps = fetch_json(f"{self.ui_url}/api/v1/applications", timeout)
        return list(fetch_json(f"{self.ui_url}/api/v1/applications/{apps[0]['id']}/jobs?status=running", timeout))

    def stop(self, timeout: float = 20) -> None:
        if self.daemon is not None:
            stop_tree(self.daemon, timeout)
            self.daemon = None


def stop_tree(daemon: SparkDaemon, timeout: float) -> None:
    """Stop a Spark process, then kill what it started and left behind (a worker's executors)."""
    proc = daemon.record.process()
    children = []
    if proc is not None:
        with contextlib.suppress(psutil.Error):
            children = proc.children(recursive=True)
    with contextlib.suppress(psutil.Error):  # not gone even after SIGKILL's wait: its children all the same
        daemon.proc.stop(timeout)
    for child in children:
        with contextlib.suppress(psutil.Error):
            child.kill()
