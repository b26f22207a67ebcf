"""The one etcd3-py shim: fails if it stops working, and fails if it stops being needed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from engine.infra.etcd import EtcdServer
from registry import EtcdClient, compat
from tests import tls

PROBE = textwrap.dedent(
    """
    import asyncio, os, sys
    import etcd3.aio_client
    from etcd3 import AioClient

    async def main(port):
        env, access = os.environ, {}
        if "PORPOISE_REGISTRY_TLS_CA" in env:  # the suite's etcd with TLS and auth (not through registry: it shims)
            access = dict(
                protocol="https", verify=env["PORPOISE_REGISTRY_TLS_CA"],
                cert=(env["PORPOISE_REGISTRY_TLS_CERT"], env["PORPOISE_REGISTRY_TLS_KEY"]),
                username=env["PORPOISE_REGISTRY_USER"], password=env["PORPOISE_REGISTRY_PASSWORD"],
            )
        client = AioClient(host="127.0.0.1", port=port, **access)
        if access:
            await client.auth()
        lease = await client.lease_grant(TTL=5)
        try:
            async for resp in client.lease_keep_alive(b'{"ID":%d}\\n' % lease.ID):
                print("STREAM-OK", resp.TTL)
                break
        except TypeError as exc:
            print("STREAM-BROKEN", exc)
        finally:
            await client.close()

    if sys.argv[2] == "shim":
        from registry import compat
        compat.install()
    asyncio.run(main(int(sys.argv[1])))
    """
)


def _probe(etcd: EtcdServer, mode: str) -> str:
    out = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", PROBE, str(etcd.client_port), mode],
        capture_output=True,
        text=True,
        env={**os.environ, **tls.registry_env()},
        timeout=60,
        check=False,
    )
    return out.stdout + out.stderr


def test_stream_calls_are_broken_without_the_shim(etcd_server: EtcdServer) -> None:
    # If this fails, etcd3-py or aiohttp fixed the isinstance check: delete registry/compat.py.
    assert "STREAM-BROKEN" in _probe(etcd_server, "none")


def test_stream_calls_work_with_the_shim(etcd_server: EtcdServer) -> None:
    assert "STREAM-OK 5" in _probe(etcd_server, "shim")


async def test_registry_installs_the_shim_and_streams_work(etcd: EtcdClient) -> None:
    assert compat.installed()
    lease, ttl = await etcd.grant(5)
    assert await etcd.keepalive_once(lease) == ttl
    await etcd.revoke(lease)
    assert await etcd.keepalive_once(lease) <= 0
