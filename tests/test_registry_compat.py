"""The one etcd3-py shim: fails if it stops working, and fails if it stops being needed."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from engine.infra.etcd import EtcdServer
from registry import EtcdClient, compat

PROBE = textwrap.dedent(
    """
    import asyncio, sys
    import etcd3.aio_client
    from etcd3 import AioClient

    async def main(port):
        client = AioClient(host="127.0.0.1", port=port)
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
