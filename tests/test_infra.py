"""The private infrastructure launcher against the real binaries: start, connect, restart with data
kept, clean stop with nothing left behind, and clear errors."""

from __future__ import annotations

import asyncio
import socket
import uuid
from pathlib import Path

import asyncpg
import psutil
import pytest

from core.errors import BinaryNotFound, DataDirCorrupt, PortInUse
from engine.infra.etcd import EtcdServer
from engine.infra.ports import choose_port, free_port
from engine.infra.postgres import RUNTIME_ROLE, PostgresServer, find_pg_bindir
from engine.storage.schema import Upgrade, head, upgrade


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_postgres_start_schema_restart_keeps_data_and_stops_clean(workdir: Path) -> None:
    base = workdir / f"pg-{uuid.uuid4().hex[:6]}"
    port = free_port()
    server = PostgresServer(base, port, workdir / "logs" / "pg-restart.log", durable=True)
    record = server.start()
    assert server.initialized()

    async def write() -> int:
        assert await upgrade(server.owner_dsn, RUNTIME_ROLE) == Upgrade(None, head(), RUNTIME_ROLE)
        conn = await asyncpg.connect(server.dsn)
        try:
            await conn.execute("INSERT INTO project (code, name) VALUES (42, 'kept')")
            return int(await conn.fetchval("SELECT count(*) FROM project"))
        finally:
            await conn.close()

    assert asyncio.run(write()) == 1
    children = [p.pid for p in psutil.Process(record.pid).children(recursive=True)]
    server.stop()
    assert _gone(record.pid) and all(_gone(pid) for pid in children)

    again = PostgresServer(base, port, workdir / "logs" / "pg-restart.log", password=server.password)
    record2 = again.start()

    async def read() -> list[str]:
        assert (await upgrade(again.owner_dsn, RUNTIME_ROLE)).before == head()  # nothing to do the second time
        conn = await asyncpg.connect(again.dsn)
        try:
            return [r["name"] for r in await conn.fetch("SELECT name FROM project")]
        finally:
            await conn.close()

    assert asyncio.run(read()) == ["kept"]
    again.stop()
    assert _gone(record2.pid)


def test_etcd_start_restart_keeps_data_and_stops_clean(workdir: Path) -> None:
    base = workdir / f"etcd-{uuid.uuid4().hex[:6]}"
    client_port, peer_port = free_port(), free_port()
    server = EtcdServer(base, client_port, peer_port, workdir / "logs" / "etcd-restart.log")
    record = server.start()
    assert server.healthy()

    from registry import EtcdClient

    async def put() -> None:
        client = EtcdClient([server.endpoint])
        await client.put("/kept", "yes")
        await client.close()

    asyncio.run(put())
    server.stop()
    assert _gone(record.pid)
    assert not server.healthy()

    again = EtcdServer(base, client_port, peer_port, workdir / "logs" / "etcd-restart.log")
    again.start()

    async def get() -> bytes | None:
        client = EtcdClient([again.endpoint])
        kv = await client.get("/kept")
        await client.close()
        return kv.value if kv else None

    assert asyncio.run(get()) == b"yes"
    again.stop()


def test_corrupt_data_dirs_are_refused_with_a_clear_error(workdir: Path) -> None:
    base = workdir / f"bad-{uuid.uuid4().hex[:6]}"
    (base / "data").mkdir(parents=True)
    (base / "data" / "junk.txt").write_text("not a cluster")
    with pytest.raises(DataDirCorrupt, match="not a PostgreSQL data directory"):
        PostgresServer(base, free_port(), workdir / "logs" / "x.log").ensure_initialized()

    (base / "data" / "PG_VERSION").write_text("15\n")
    with pytest.raises(DataDirCorrupt, match="incomplete"):
        PostgresServer(base, free_port(), workdir / "logs" / "x.log").ensure_initialized()

    etcd_dir = workdir / f"bad-etcd-{uuid.uuid4().hex[:6]}"
    etcd_dir.mkdir()
    (etcd_dir / "junk").write_text("x")
    with pytest.raises(DataDirCorrupt, match="no member/ directory"):
        EtcdServer(etcd_dir, free_port(), free_port(), workdir / "logs" / "x.log").start()


def test_port_in_use_is_reported() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        taken = sock.getsockname()[1]
        with pytest.raises(PortInUse, match=f"port {taken} on 127.0.0.1 is already in use"):
            choose_port("standalone.postgres_port", taken, None, set())
        # a remembered port that is now taken is replaced silently by a free one
        assert choose_port("x", 0, taken, set()) != taken


def test_missing_binaries_are_reported(tmp_path: Path) -> None:
    with pytest.raises(BinaryNotFound, match="initdb, postgres"):
        find_pg_bindir([tmp_path, tmp_path / "nope"])
    assert find_pg_bindir([tmp_path, *[p for p in Path("/usr/lib/postgresql").glob("*/bin")]]).name == "bin"


def test_private_parent_dirs_move_postgres_data_to_a_reachable_place(workdir: Path) -> None:
    import os
    import pwd

    from engine.infra.postgres import _reachable_by

    service = pwd.getpwnam("postgres")
    private = workdir / f"private-{uuid.uuid4().hex[:6]}"
    (private / "inner").mkdir(parents=True)
    os.chmod(private, 0o700)
    assert not _reachable_by(service, private / "inner" / "pg")
    assert _reachable_by(service, workdir / "pg")
    if os.geteuid() == 0:
        server = PostgresServer(private / "inner" / "pg", free_port(), workdir / "logs" / "x.log")
        assert str(server.base_dir).startswith("/var/tmp/porpoise-pg/")
        # the same requested directory always maps to the same place, so data survives restarts
        again = PostgresServer(private / "inner" / "pg", free_port(), workdir / "logs" / "x.log")
        assert again.base_dir == server.base_dir
