"""A private Airflow: its own PostgreSQL (engine/infra/postgres.py's server, a database ``airflow``), an API
server, a scheduler with the LocalExecutor (parallelism 16) and a DAG processor, each in its own session so
stopping it stops every process it forked (executor workers, task supervisors, API workers)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import aiohttp
import asyncpg
import psutil

from bench.peers.airflow.dags import Dag
from engine.infra.ports import free_port
from engine.infra.postgres import OWNER_ROLE, PostgresServer
from engine.infra.process import ManagedProcess

#: the executor's slots (``[core] parallelism``): tasks running at once
PARALLELISM = 16
DATABASE = "airflow"
USER = "bench"


class AirflowCluster:
    """Started by :meth:`start`, stopped (every process it started, and its PostgreSQL) by :meth:`stop`."""

    def __init__(self, airflow: Path, base: Path, dags: Sequence[Dag]) -> None:
        self.airflow = airflow
        self.base = base
        self.dags = list(dags)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.password = secrets.token_urlsafe(16)
        self.pg = PostgresServer(base / "pg", free_port(), base / "logs" / "postgres.log")
        self.procs: list[ManagedProcess] = []
        self.dsn = ""

    def env(self, sqlalchemy_dsn: str) -> dict[str, str]:
        home = self.base / "home"
        # nothing of the launcher's own virtualenv or Porpoise's configuration reaches Airflow
        keep = {
            k: v for k, v in os.environ.items() if not k.startswith(("PORPOISE", "AIRFLOW", "VIRTUAL_ENV", "PYTHON"))
        }
        keep["PATH"] = f"{self.airflow.parent}:{keep.get('PATH', '/usr/bin:/bin')}"
        settings = {
            "CORE__DAGS_FOLDER": str(self.base / "dags"),
            "CORE__EXECUTOR": "LocalExecutor",
            "CORE__PARALLELISM": str(PARALLELISM),
            "CORE__LOAD_EXAMPLES": "False",
            "CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "CORE__EXECUTION_API_SERVER_URL": f"{self.url}/execution/",
            "CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:admin",
            "CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
            "DATABASE__SQL_ALCHEMY_CONN": sqlalchemy_dsn,
            "API__HOST": "127.0.0.1",
            "API__PORT": str(self.port),
            "API__BASE_URL": self.url,
            "API__SECRET_KEY": secrets.token_hex(16),
            "API_AUTH__JWT_SECRET": secrets.token_hex(32),
            "LOGGING__LOGGING_LEVEL": "WARNING",
            # a task's calls to the execution API (default 5 s): on a loaded shared machine the first ones
            # can take longer, and a timed-out call fails the task (it does not slow a task that gets its answer)
            "WORKERS__EXECUTION_API_TIMEOUT": "60",
        }
        return keep | {"AIRFLOW_HOME": str(home)} | {f"AIRFLOW__{k}": v for k, v in settings.items()}

    def start(self, timeout: float = 900) -> None:
        """PostgreSQL, the schema (``airflow db migrate``), the DAG files and the three processes; returns
        when the API server answers and every DAG is parsed and unpaused."""
        (self.base / "dags").mkdir(parents=True)
        (self.base / "home").mkdir(parents=True)
        (self.base / "home" / "passwords.json").write_text(json.dumps({USER: self.password}))
        for dag in self.dags:
            (self.base / "dags" / f"{dag.dag_id}.py").write_text(dag.source())
        self.pg.start()
        asyncio.run(self.pg.create_database(DATABASE))
        owner = self.pg.dsn_for(OWNER_ROLE, DATABASE)
        self.dsn = owner
        env = self.env(owner.replace("postgresql://", "postgresql+psycopg2://", 1))
        logs = self.base / "logs"
        migrate = subprocess.run(
            [str(self.airflow), "db", "migrate"], env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
        if migrate.returncode != 0:
            raise RuntimeError(f"airflow db migrate failed:\n{migrate.stdout[-3000:]}\n{migrate.stderr[-3000:]}")
        for command in (["api-server", "--port", str(self.port)], ["scheduler"], ["dag-processor"]):
            proc = ManagedProcess(command[0], [str(self.airflow), *command], logs / f"{command[0]}.log", env=env)
            proc.start()
            self.procs.append(proc)
        asyncio.run(self._wait_ready(timeout))

    def check_running(self) -> None:
        for proc in self.procs:
            if proc.exited() is not None:
                raise RuntimeError(f"airflow {proc.name} exited with {proc.exited()}:\n{proc.tail(40)}")

    async def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        wanted = sorted(d.dag_id for d in self.dags)
        conn = await asyncpg.connect(self.dsn, timeout=30)
        try:
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
                while True:
                    self.check_running()
                    parsed = await conn.fetch(
                        "SELECT d.dag_id FROM dag d JOIN serialized_dag s ON s.dag_id = d.dag_id"
                        " WHERE NOT d.is_paused AND d.dag_id = ANY($1)",
                        wanted,
                    )
                    if sorted({r["dag_id"] for r in parsed}) == wanted and await _answers(session, self.url):
                        return
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"Airflow not ready after {timeout:.0f} s (DAGs parsed: {len(parsed)})")
                    await asyncio.sleep(1)
        finally:
            await conn.close()

    async def token(self, session: aiohttp.ClientSession) -> str:
        """A JWT for the public API (the simple auth manager's user ``bench``, an admin)."""
        async with session.post(f"{self.url}/auth/token", json={"username": USER, "password": self.password}) as resp:
            body = await resp.json(content_type=None)
            if resp.status >= 300:
                raise RuntimeError(f"Airflow's /auth/token answered {resp.status}: {body}")
            return str(body["access_token"])

    def stop(self) -> None:
        for proc in reversed(self.procs):
            _stop_session(proc)
        self.pg.stop()


async def _answers(session: aiohttp.ClientSession, url: str) -> bool:
    with contextlib.suppress(aiohttp.ClientError, TimeoutError):
        async with session.get(f"{url}/api/v2/monitor/health") as resp:
            return resp.status == 200
    return False


def _stop_session(proc: ManagedProcess, timeout: float = 30) -> None:
    """SIGTERM the process group ``proc`` leads (its own session), then SIGKILL what is left of it and of
    its descendants (a task supervisor puts its task in a process group of its own)."""
    if proc.popen is None:
        return
    pgid = proc.popen.pid
    members = {p for p in psutil.process_iter() if _pgid(p) == pgid}
    with contextlib.suppress(psutil.Error):
        members |= set(psutil.Process(pgid).children(recursive=True))
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    _, alive = psutil.wait_procs(members, timeout=timeout)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(alive, timeout=10)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.popen.wait(timeout=5)


def _pgid(p: psutil.Process) -> int | None:
    try:
        return os.getpgid(p.pid)
    except (ProcessLookupError, PermissionError):
        return None
