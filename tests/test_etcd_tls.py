"""etcd with client TLS and auth (engine/infra/etcd.py, registry/client.py EtcdAccess): a client without the
user / password or without a certificate of the cluster CA can neither read nor register a node; the porpoise
user reaches only its prefix; real nodes register with it; the launcher's option starts it so."""

from __future__ import annotations

import asyncio
import json
import secrets
import ssl
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest
import trustme

from engine.infra.etcd import EtcdServer
from engine.infra.ports import free_port
from registry import EtcdAccess, EtcdClient, RegistryUnavailable
from tests import tls
from tests.helpers import ROOT, NodeProc, http_json, node_env, wait_sync

pytestmark = pytest.mark.slow
PREFIX = "/porpoise"
USER = "porpoise"


@pytest.fixture
def secure_etcd(workdir: Path) -> Iterator[tuple[EtcdServer, str]]:
    name = uuid.uuid4().hex[:8]
    server = EtcdServer(
        workdir / f"etcd-tls-{name}", free_port(), free_port(), workdir / "logs" / f"etcd-tls-{name}.log",
        tls=tls.node_files(),
    )  # fmt: skip
    server.start()
    password = secrets.token_urlsafe(16)
    try:
        server.enable_auth(secrets.token_urlsafe(16), USER, password, PREFIX)
        server.enable_auth("again", USER, "ignored", PREFIX)  # idempotent: auth is already on
        yield server, password
    finally:
        server.stop()


def _access(password: str = "", user: str = USER) -> EtcdAccess:
    files = tls.node_files()
    return EtcdAccess(files.ca, files.cert, files.key, user if password else "", password)


async def _refused(client: EtcdClient, key: str) -> str:
    try:
        await client.get(key)
    except RegistryUnavailable as exc:
        try:
            ok, _, _ = await client.put_if_absent(key, b'{"fake": "worker"}', 0)
        except RegistryUnavailable:
            return str(exc)
        raise AssertionError(f"registered {key} (ok={ok}) without credentials") from exc
    finally:
        await client.close()
    raise AssertionError(f"read {key} without credentials")


async def test_without_credentials_or_the_cluster_ca_nothing_is_read_or_registered(
    secure_etcd: tuple[EtcdServer, str],
) -> None:
    server, password = secure_etcd
    key = f"{PREFIX}/nodes/worker/default/127.0.0.1:1"
    member = EtcdClient([server.endpoint], 3, _access(password))
    try:
        assert (await member.put_if_absent(f"{PREFIX}/probe", b"1", 0))[0]
        assert (await member.get(f"{PREFIX}/probe")) is not None
        with pytest.raises(RegistryUnavailable, match="permission denied"):
            await member.get("/elsewhere")  # the role reaches only the prefix
    finally:
        await member.close()

    # a certificate, but no user: etcd auth refuses
    assert "user name is empty" in await _refused(EtcdClient([server.endpoint], 3, _access()), key)
    # the right user with a wrong password
    assert "authentication failed" in await _refused(EtcdClient([server.endpoint], 3, _access("wrong")), key)
    # the right user and password, but a certificate of another CA: the handshake fails
    impostor = tls.issue("etcd-impostor", trustme.CA(organization_name="not the cluster"))
    stranger = EtcdAccess(tls.node_files().ca, impostor.cert, impostor.key, USER, password)
    await _refused(EtcdClient([server.endpoint], 3, stranger), key)

    # no client certificate at all (etcd's JSON gateway, as any HTTP client would call it)
    anonymous = ssl.create_default_context(cafile=tls.node_files().ca)
    with pytest.raises(aiohttp.ClientError):
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session,
            session.post(f"{server.endpoint}/v3/kv/range", json={"key": "Lw=="}, ssl=anonymous) as resp,
        ):
            await resp.read()


def test_a_worker_registers_with_the_porpoise_user(
    secure_etcd: tuple[EtcdServer, str], workdir: Path, pg_server: object
) -> None:
    server, password = secure_etcd
    files = tls.node_files()
    root = f"{PREFIX}/t-{uuid.uuid4().hex[:6]}"
    env = node_env(
        server.endpoint, root, 2,
        PORPOISE_REGISTRY_TLS_CA=files.ca, PORPOISE_REGISTRY_TLS_CERT=files.cert, PORPOISE_REGISTRY_TLS_KEY=files.key,
        PORPOISE_REGISTRY_USER=USER, PORPOISE_REGISTRY_PASSWORD=password,
    )  # fmt: skip
    worker = NodeProc("worker", env, workdir / "logs", f"etcd-tls-worker-{uuid.uuid4().hex[:6]}", [])
    worker.start()
    try:

        async def registered() -> list[str]:
            client = EtcdClient([server.endpoint], 3, _access(password))
            try:
                return [kv.key for kv in (await client.get_prefix(f"{root}/nodes/"))[1]]
            finally:
                await client.close()

        assert asyncio.run(registered()) == [f"{root}/nodes/worker/default/{worker.address}"]
        assert password not in worker.proc.log_path.read_text()
    finally:
        worker.stop()


def test_the_cluster_launcher_starts_a_secure_etcd(workdir: Path) -> None:
    run_dir = workdir / f"secure-{uuid.uuid4().hex[:6]}"
    cli = [sys.executable, "-m", "engine", "cluster"]
    started = subprocess.run(
        [*cli, "start", "--run-dir", str(run_dir), "--masters", "1", "--workers", "1",
         "--set", "standalone.secure_etcd=true"],
        cwd=ROOT, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        state = json.loads((run_dir / "state.json").read_text())
        assert (run_dir / "state.json").stat().st_mode & 0o777 == 0o600
        assert (run_dir / "tls" / "node-key.pem").stat().st_mode & 0o777 == 0o600
        ca = str(run_dir / "tls" / "ca.pem")
        master = next(p for p in state["processes"] if p["name"].startswith("master"))
        health = wait_sync(
            lambda: http_json(f"https://127.0.0.1:{master['extra']['port']}/health", ca_file=ca)[1], 30, "health"
        )
        assert len(health["workers"]) == 1  # the master sees the worker through the secure etcd

        async def anonymous_read() -> str:
            return await _refused(
                EtcdClient([f"https://127.0.0.1:{state['ports']['etcd_client']}"], 3, EtcdAccess(
                    ca, str(run_dir / "tls" / "node.pem"), str(run_dir / "tls" / "node-key.pem"))),
                "/porpoise/nodes/worker/default/127.0.0.1:1",
            )  # fmt: skip

        assert "user name is empty" in asyncio.run(anonymous_read())
    finally:
        subprocess.run(
            [*cli, "stop", "--run-dir", str(run_dir)], cwd=ROOT, capture_output=True, timeout=120, check=False
        )
