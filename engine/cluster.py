"""Local multi-process cluster (``make cluster MASTERS=3 WORKERS=2 APIS=1`` / ``make stop``).

Detached: ``start`` returns once every process is up and leaves them running; ``stop`` stops
exactly the processes recorded in the run directory. Besides etcd, PostgreSQL, the masters and the
workers it starts ``apis`` API servers (the first on the run directory's stable API port) and writes
``<run_dir>/client.json`` (API URL + an admin token) for the ``porpoise`` CLI.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import asyncpg

from core import logs
from engine.client import CLIENT_FILE
from engine.config import Config
from engine.infra.access import ensure_client_file
from engine.infra.process import ProcessRecord
from engine.infra.stack import Stack

log = logs.get(__name__)


@dataclass(frozen=True)
class ProcessRow:
    """One process of a local cluster as ``porpoise cluster status`` shows it."""

    name: str
    role: str
    address: str
    pid: int
    alive: bool

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def start(cfg: Config, run_dir: Path, masters: int, workers: int, apis: int = 1) -> Stack:
    stack = Stack(run_dir, cfg)
    try:
        stack.start_infra()
        api_port = stack.api_port() if apis else 0
        if apis:
            asyncio.run(_prepare_access(stack, f"http://127.0.0.1:{api_port}"))
        for i in range(masters):
            stack.start_node("master", f"master-{i + 1}")
        for i in range(workers):
            stack.start_node("worker", f"worker-{i + 1}")
        for i in range(apis):
            stack.start_node("api", f"api-{i + 1}", port=api_port if i == 0 else None)
    except BaseException:
        stack.stop_started()
        raise
    return stack


async def _prepare_access(stack: Stack, api_url: str) -> None:
    assert stack.postgres is not None
    conn = await asyncpg.connect(stack.postgres.dsn, timeout=30)
    try:
        await ensure_client_file(conn, client_path(stack.run_dir), api_url, "cluster")
    finally:
        await conn.close()


def client_path(run_dir: Path) -> Path:
    return run_dir.resolve() / CLIENT_FILE


def stop(cfg: Config, run_dir: Path) -> list[str]:
    if not (run_dir / "state.json").exists():
        return []
    return Stack(run_dir, cfg).stop_all()


def status(cfg: Config, run_dir: Path) -> list[ProcessRow]:
    """Every process recorded for ``run_dir``: etcd, PostgreSQL, masters, workers, APIs."""
    if not (run_dir / "state.json").exists():
        return []
    return rows_of(Stack(run_dir, cfg))


def rows_of(stack: Stack) -> list[ProcessRow]:
    return [_row(r) for r in stack.records()]


def _row(record: ProcessRecord) -> ProcessRow:
    role = str(record.extra.get("role", record.name))  # etcd and postgres are their own roles
    port = record.extra.get("port") or record.extra.get("client_port")  # etcd: its client port
    return ProcessRow(record.name, role, f"127.0.0.1:{port}" if port else "?", record.pid, record.alive())
