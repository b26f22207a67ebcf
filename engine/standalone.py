"""All-in-one launcher (``make run``): private etcd + PostgreSQL + master + worker + API in one run dir.

Foreground; Ctrl-C (or SIGTERM) stops the nodes, then PostgreSQL, then etcd. Data stays in the run
directory, so the next start continues with the same history. A node process that dies is restarted.

On start it makes sure the CLI can talk to the API: an admin API token (kept while it stays valid) is
written with the API URL to ``<run_dir>/client.json``, where ``porpoise`` looks by default. It also
creates a ``warehouse`` database in the private PostgreSQL and a ``warehouse`` data source for SQL
tasks (the example pipeline loads into it). With ``--example`` it then applies and runs the example
pipeline through the real CLI and API, and keeps serving.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import signal
import subprocess
import sys
import threading
from pathlib import Path

import asyncpg

from core import logs
from core.errors import PorpoiseError
from engine.client import CLIENT_FILE
from engine.config import Config
from engine.datafiles import ui_dist
from engine.infra.access import FIRST_PASSWORD_FILE, ensure_client_file, ensure_first_password
from engine.infra.process import ManagedProcess
from engine.infra.stack import Stack
from engine.secretbox import DATASOURCE_SECRETS, Keyring, seal_params
from engine.standalone_spark import SparkServices, start_spark

log = logs.get(__name__)

NODES = (("master", "master"), ("worker", "worker"), ("api", "api"))
WAREHOUSE = "warehouse"
EXAMPLE_DIR = Path(__file__).resolve().parents[1] / "examples" / "taxi"


async def _prepare_access(stack: Stack, client_path: Path, api_url: str) -> str | None:
    """Runs before any node starts (asyncio.run in the launcher thread): blocking file I/O is fine here. The
    first password of ``admin`` while it is unchanged (engine/infra/access.py), else None."""
    assert stack.postgres is not None
    pg = stack.postgres
    keyring = Keyring.from_file(stack.key_file)
    conn = await asyncpg.connect(pg.dsn, timeout=30)
    try:
        await ensure_client_file(conn, client_path, api_url, "standalone")
        first_password = await ensure_first_password(conn, stack.run_dir / FIRST_PASSWORD_FILE)
        # the example's tables live in a database of their own, owned by a role of its own: the SQL tasks'
        # credentials reach neither the metadata schema nor its rows
        admin = await asyncpg.connect(pg.admin_dsn(), timeout=30)
        try:
            await pg.ensure_role(admin, WAREHOUSE)
        finally:
            await admin.close()
        await pg.create_database(WAREHOUSE, owner=WAREHOUSE)
        warehouse_dsn = pg.dsn_for(WAREHOUSE, WAREHOUSE)
        await conn.execute(
            "INSERT INTO datasource (name, type, connection_params, note) VALUES ($1, 'POSTGRESQL', $2::jsonb, $3)"
            " ON CONFLICT (name) DO UPDATE SET connection_params = EXCLUDED.connection_params, update_time = now()",
            WAREHOUSE,
            json.dumps(seal_params(keyring, {"dsn": warehouse_dsn}, DATASOURCE_SECRETS, "datasource")),
            "the standalone node's own PostgreSQL, database warehouse",
        )
    finally:
        await conn.close()
    return first_password


def run(
    cfg: Config,
    run_dir: Path,
    ready: threading.Event | None = None,
    example: bool = False,
    spark: frozenset[str] = frozenset({"local"}),
) -> int:
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        log.info("stopping", signal=signal.Signals(signum).name)
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    stack = Stack(run_dir, cfg)
    code = 0
    example_proc: subprocess.Popen[bytes] | None = None
    services = SparkServices()
    try:
        stack.start_infra()
        services = start_spark(stack, spark)
        api_port = stack.api_port()
        api_url = f"http://127.0.0.1:{api_port}"
        client_path = stack.run_dir / CLIENT_FILE
        first_password = asyncio.run(_prepare_access(stack, client_path, api_url))
        procs: dict[str, ManagedProcess] = {}
        for role, name in NODES:
            if stop.is_set():
                break
            procs[name] = _start_node(stack, role, name, api_port, services)
        if not stop.is_set():
            _banner(stack, api_url, client_path, services, first_password)
            if ready is not None:
                ready.set()
            if example:
                example_proc = _start_example(stack, client_path, services.example_master)
        while not stop.wait(0.5):
            if example_proc is not None and example_proc.poll() is not None:
                result = "succeeded" if example_proc.returncode == 0 else f"failed (exit {example_proc.returncode})"
                print(f"\nThe example pipeline {result}. Porpoise keeps running; try:\n{_try_text(client_path)}",
                      flush=True)  # fmt: skip
                example_proc = None
            for role, name in NODES:
                proc = procs[name]
                if proc.exited() is not None:
                    log.error("node exited; restarting", name=name, code=proc.exited(), log=str(proc.log_path))
                    procs[name] = _start_node(stack, role, name, api_port, services)
    except PorpoiseError as exc:
        log.error("standalone failed", error=str(exc))
        code = 1
    finally:
        if example_proc is not None and example_proc.poll() is None:
            example_proc.terminate()
            example_proc.wait(10)
        services.stop()
        stopped = stack.stop_started()
        log.info("stopped", processes=stopped)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return code


def _start_node(stack: Stack, role: str, name: str, api_port: int, services: SparkServices) -> ManagedProcess:
    overrides = services.worker_overrides if role == "worker" else []
    return stack.start_node(role, name, overrides, port=api_port if role == "api" else None)


def _start_example(stack: Stack, client_path: Path, spark_master: str) -> subprocess.Popen[bytes]:
    """apply + start --watch of the example, through the real CLI; output goes to this terminal."""
    data_root = stack.tenant_dir("example-data")  # written by the example's tasks, as the default tenant
    cli = [sys.executable, "-m", "engine"]
    script = (
        f"{shlex.join(cli)} apply {EXAMPLE_DIR / 'taxi.yaml'} && "
        f"{shlex.join(cli)} start taxi_daily --watch --param data_root={data_root} --param example_dir={EXAMPLE_DIR}"
        f" --param {shlex.quote('spark_master=' + spark_master)}"
    )
    print(f"\nRunning the example pipeline ({EXAMPLE_DIR / 'README.md'}):\n", flush=True)
    env = {**stack.node_env(), "PORPOISE_CLIENT_CONFIG": str(client_path)}  # no secret but the admin token
    return subprocess.Popen(["bash", "-c", script], env=env, start_new_session=True)


def _try_text(client_path: Path) -> str:
    return (
        f"  export PORPOISE_CLIENT_CONFIG={client_path}   # API URL + token (the CLI finds it from the repo root)\n"
        "  .venv/bin/porpoise list                      # recent runs\n"
        "  .venv/bin/porpoise status <instance id>      # one run and its tasks\n"
        "  .venv/bin/porpoise logs <task id>            # a task's log\n"
        "  .venv/bin/porpoise start taxi_daily --watch --param data_root=/tmp/taxi --param example_dir="
        f"{EXAMPLE_DIR}\n"
        "  .venv/bin/porpoise cluster                   # live masters and workers\n"
        "Press Ctrl-C to stop everything.\n"
    )


def sign_in_text(first_password: str | None) -> str:
    """How to sign in to the web UI, for the banner."""
    if first_password is not None:
        return f"user admin, password {first_password}   (change it: your name at the top right of the UI)"
    return "user admin with the password you set   (forgot it: porpoise user passwd admin)"


def _banner(stack: Stack, api_url: str, client_path: Path, services: SparkServices, first_password: str | None) -> None:
    assert stack.etcd is not None and stack.postgres is not None
    built = (ui_dist(stack.cfg.api.ui_dir) / "index.html").is_file()
    ui = f"{api_url}/" if built else f"{api_url}/ (not built here: run make install)"
    print(
        "\nPorpoise standalone is up\n"
        f"  Web UI      {ui}\n"
        f"  Sign in     {sign_in_text(first_password)}\n"
        f"  API         {api_url}   (docs {api_url}/docs, OpenAPI {api_url}/openapi.json)\n"
        f"  API token   in {client_path}   (the CLI's; the UI also signs in with a token)\n"
        f"  etcd        {stack.etcd.endpoint}\n"
        f"  PostgreSQL  127.0.0.1:{stack.postgres.port} (data {stack.postgres.data_dir})\n"
        + services.banner()
        + "".join(f"  {p.name:<11} pid {p.record.pid if p.record else '?'}, log {p.log_path}\n" for p in stack.nodes)
        + f"  state       {stack.state_path}\n"
        + _try_text(client_path),
        flush=True,
    )
