"""An RPC peer for the call stream's tests (tests/test_rpc_stream.py): an RpcServer on loopback answering
``Echo``, counting the calls it got over HTTP and the ones it handled. ``python -m tests.rpc_peer PORT`` runs one
as its own process (to be killed or stopped by a test); it prints ``ready`` once it listens."""

from __future__ import annotations

import asyncio
import ssl
import sys
from dataclasses import dataclass
from typing import ClassVar

from aiohttp import web

from engine.infra.ports import free_port
from rpc import BadRequest, RpcServer
from rpc.messages import Request
from tests import tls
from tests.helpers import TEST_SECRET


@dataclass(frozen=True)
class EchoReply:
    text: str


@dataclass(frozen=True)
class Echo(Request[EchoReply]):
    METHOD: ClassVar[str] = "test.echo"
    text: str
    #: seconds the handler waits before it answers
    wait: float = 0
    #: the handler fails: "bad" (BadRequest), "boom" (an unexpected error)
    fail: str = ""


class Peer:
    """An RpcServer on loopback answering Echo; counts the calls it got over HTTP and the ones it handled."""

    def __init__(
        self,
        stream: bool = True,
        context: ssl.SSLContext | None = None,
        port: int = 0,
        max_body_bytes: int = 8 << 20,
    ) -> None:
        self.context = context or tls.server_ssl()
        self.app = web.Application()
        self.http_calls = 0
        self.handled: list[str] = []
        self.running: set[str] = set()
        self.cancelled: list[str] = []

        @web.middleware
        async def count(request: web.Request, handler):  # type: ignore[no-untyped-def]
            if request.method == "POST":
                self.http_calls += 1
            return await handler(request)

        self.app.middlewares.append(count)
        self.server = RpcServer(
            self.app,
            TEST_SECRET,
            max_body_bytes=max_body_bytes,
            require_client_cert=self.context is not None,
            stream=stream,
        )
        self.server.register(Echo, self.echo)
        self.runner = web.AppRunner(self.app, access_log=None)
        self.port = port or free_port()
        self.address = f"127.0.0.1:{self.port}"

    async def echo(self, msg: Echo) -> EchoReply:
        self.running.add(msg.text)
        try:
            if msg.wait:
                await asyncio.sleep(msg.wait)
        except asyncio.CancelledError:
            self.cancelled.append(msg.text)
            raise
        finally:
            self.running.discard(msg.text)
        if msg.fail == "bad":
            raise BadRequest("Echo.text: not today", 409)
        if msg.fail == "boom":
            raise RuntimeError("boom")
        self.handled.append(msg.text)
        return EchoReply(msg.text.upper())

    async def start(self) -> Peer:
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", self.port, ssl_context=self.context).start()
        return self

    async def stop(self) -> None:
        await self.server.close_streams()  # as a node stops (engine/node.py)
        await self.runner.cleanup()


async def _main(port: int) -> None:
    peer = Peer(port=port)
    await peer.start()
    print("ready", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(_main(int(sys.argv[1])))
