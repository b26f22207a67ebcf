"""PostgreSQL over TLS (database.sslmode / database.sslrootcert): with verify-full the node's connection is
encrypted and checks the server's certificate against the configured CA; a server whose certificate another CA
signed is refused."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import pytest
import trustme

from engine import config as config_mod
from engine.infra.ports import free_port
from engine.infra.postgres import PostgresServer
from tests import tls

pytestmark = pytest.mark.slow


async def _ssl_in_use(url: str) -> bool:
    conn = await asyncpg.connect(url, timeout=10)
    try:
        return bool(await conn.fetchval("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"))
    finally:
        await conn.close()


def test_verify_full_encrypts_and_checks_the_server_certificate(workdir: Path) -> None:
    files = tls.node_files()
    name = uuid.uuid4().hex[:6]
    server = PostgresServer(
        workdir / f"pg-tls-{name}", free_port(), workdir / "logs" / f"pg-tls-{name}.log", durable=False,
        ssl_files=(files.cert, files.key),
    )  # fmt: skip
    server.start()
    try:
        dsn = urlsplit(server.dsn)

        def url(**env: str) -> str:
            base = {"PORPOISE_DATABASE_HOST": "127.0.0.1", "PORPOISE_DATABASE_PORT": str(dsn.port),
                    "PORPOISE_DATABASE_USER": dsn.username or "", "PORPOISE_DATABASE_PASSWORD": dsn.password or "",
                    "PORPOISE_DATABASE_NAME": dsn.path.lstrip("/")}  # fmt: skip
            return config_mod.load(environ={**base, **env}).database.url()

        verified = url(PORPOISE_DATABASE_SSLMODE="verify-full", PORPOISE_DATABASE_SSLROOTCERT=files.ca)
        assert asyncio.run(_ssl_in_use(verified))
        assert not asyncio.run(_ssl_in_use(url(PORPOISE_DATABASE_SSLMODE="disable")))
        other = tls.issue("pg-other-ca", trustme.CA(organization_name="not the cluster")).ca
        with pytest.raises((OSError, asyncpg.PostgresError)):  # ssl.SSLCertVerificationError is an OSError
            asyncio.run(_ssl_in_use(url(PORPOISE_DATABASE_SSLMODE="verify-full", PORPOISE_DATABASE_SSLROOTCERT=other)))
    finally:
        server.stop()
