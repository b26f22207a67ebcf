"""Mutual TLS between nodes (rpc/tls.py) and the signature's replay guard (rpc/auth.py), with real processes:
a fake worker registered in etcd without a certificate of the cluster CA receives no dispatch; a worker answers
no RPC from a caller without one; a signed request sent twice is refused the second time."""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

import aiohttp
import pytest
import trustme
from aiohttp import web

from engine import config as config_mod
from engine.infra.etcd import EtcdServer
from engine.infra.ports import free_port
from engine.infra.postgres import PostgresServer
from registry import HeartbeatSource, LoadLimits, NodeId, RegistryNode, TaskCounts
from rpc import auth, codec
from rpc.messages import LogView
from tests import tls
from tests.conftest import launch_api_cluster
from tests.helpers import TEST_SECRET, NodeProc, wait_sync

pytestmark = pytest.mark.slow


class FakeWorker:
    """An RPC listener registered in etcd as a worker of group default, recording every call it gets (a real
    worker would run them); it runs on its own event loop in a thread."""

    def __init__(self, port: int, context: ssl.SSLContext, endpoint: str, root: str) -> None:
        self.address = f"127.0.0.1:{port}"
        self.port, self.context, self.endpoint, self.root = port, context, endpoint, root
        self.seen: list[str] = []
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _main(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()

        async def anything(request: web.Request) -> web.Response:
            self.seen.append(request.match_info["method"])
            return web.json_response({"accepted": True, "free_slots": 8})

        app = web.Application()
        app.router.add_post("/rpc/{method}", anything)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", self.port, ssl_context=self.context).start()
        where = [f"registry.endpoints={self.endpoint}", f"registry.root={self.root}", *tls.registry_overrides()]
        cfg = config_mod.load(overrides=where, environ={})
        source = HeartbeatSource(LoadLimits(), counts=lambda: TaskCounts(running=0, slots=8))
        node = RegistryNode(cfg.registry, NodeId("worker", self.address, "default"), source)
        await node.start()  # etcd is open in this test: the registry's own protection is etcd auth
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            await node.close()
            await runner.cleanup()

    def __enter__(self) -> FakeWorker:
        self._thread.start()
        assert self._ready.wait(30), "fake worker did not start"
        return self

    def __exit__(self, *_: object) -> None:
        assert self._loop is not None and self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)


def test_a_worker_without_a_certificate_of_the_cluster_ca_gets_no_dispatch(
    workdir: Path, pg_server: PostgresServer, etcd_server: EtcdServer
) -> None:
    impostor = tls.issue("fake-worker", trustme.CA(organization_name="not the cluster"))
    fake_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    fake_ctx.load_cert_chain(impostor.cert, impostor.key)
    with (
        launch_api_cluster(workdir, pg_server, etcd_server.endpoint, worker=False, tls=True) as c,
        FakeWorker(free_port(), fake_ctx, etcd_server.endpoint, c.root) as fake,
    ):
        doc = {"name": f"tls_{uuid.uuid4().hex[:6]}", "project": "tls-tests",
               "tasks": [{"name": "t", "type": "SHELL", "params": {"rawScript": "echo secret work"}}]}  # fmt: skip
        code = c.client().request("POST", "/api/v1/workflows", doc, {"release": True})["code"]
        c.client().post(f"/api/v1/workflows/{code}/start", {})
        log = c.master.proc.log_path

        def refused() -> bool:
            return any(
                "dispatch failed" in line and fake.address in line and "CERTIFICATE_VERIFY_FAILED" in line
                for line in log.read_text().splitlines()
            )

        try:
            wait_sync(refused, 60, what="the master refusing the fake worker's certificate")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the master's log ends:\n{log.read_text()[-4000:]}") from None
        assert fake.seen == []  # not one call reached it


def _signed(method: str, body: bytes) -> dict[str, str]:
    return {"Content-Type": "application/json", auth.HEADER: auth.sign(TEST_SECRET, method, body)}


async def _post(url: str, headers: dict[str, str], body: bytes, context: ssl.SSLContext) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
        session.post(url, data=body, headers=headers, ssl=context) as resp,
    ):
        return resp.status, await resp.text()


async def test_a_worker_answers_only_callers_with_a_cluster_certificate_and_never_a_replay(
    node_factory: Callable[..., NodeProc], etcd_server: EtcdServer, etcd_root: str
) -> None:
    worker = await asyncio.to_thread(node_factory, "worker", etcd_server.endpoint, etcd_root, **tls.rpc_env())
    assert worker.scheme == "https"
    url = f"https://{worker.address}/rpc/log.view"
    body = codec.dumps(LogView(path="/nonexistent/task.log"))
    files = tls.node_files()

    # no client certificate: the right signature is not enough
    anonymous = ssl.create_default_context(cafile=files.ca)
    status, text = await _post(url, _signed(LogView.METHOD, body), body, anonymous)
    assert status == 401 and "client certificate" in json.loads(text)["error"]

    # a certificate of another CA: the handshake fails
    impostor = tls.issue("impostor", trustme.CA(organization_name="not the cluster"))
    stranger = ssl.create_default_context(cafile=files.ca)
    stranger.load_cert_chain(impostor.cert, impostor.key)
    with pytest.raises(aiohttp.ClientError):
        await _post(url, _signed(LogView.METHOD, body), body, stranger)

    # a member of the cluster: answered once; the same signed request again is a replay
    member = ssl.create_default_context(cafile=files.ca)
    member.load_cert_chain(files.cert, files.key)
    headers = _signed(LogView.METHOD, body)
    first, text = await _post(url, headers, body, member)
    assert first != 401, text
    again, text = await _post(url, headers, body, member)
    assert again == 401 and "replayed" in json.loads(text)["error"]
    # a fresh signature of the same body is a new request
    third, _ = await _post(url, _signed(LogView.METHOD, body), body, member)
    assert third == first
