"""A TCP proxy on loopback that can hold back a node's replies: the network fault "the request got
there, the answer did not (in time)".

Bytes from the client go to the upstream at once (or are dropped while ``dropping``: the request is
lost on the way, the client still sees it written); bytes from the upstream back to the client are
held while ``holding`` is set and delivered, in order, once it is cleared (unless the client gave up
and closed first). The proxy records the RPC methods of the requests it got.

With the suite's TLS (PORPOISE_TEST_TLS) the proxy ends TLS on both sides, with the node certificate: it
reads requests and holds or drops them as HTTP, not as encrypted bytes (holding encrypted bytes would hold
the handshake too, and dropping some would break the TLS stream instead of losing a request).
"""

from __future__ import annotations

import asyncio
import contextlib
import re

from tests import tls

_METHOD = re.compile(rb"POST /rpc/([A-Za-z0-9_.]+) HTTP/1\.1")


class DelayProxy:
    def __init__(self, upstream_port: int, host: str = "127.0.0.1") -> None:
        self.host = host
        #: TLS towards the client (the master) and towards the upstream (the worker); None: plain TCP
        self._server_ssl, self._client_ssl = tls.server_ssl(), tls.client_ssl()
        self.upstream_port = upstream_port
        self.port = 0
        #: RPC methods of the requests forwarded, in order
        self.methods: list[str] = []
        self._released = asyncio.Event()
        self._released.set()
        #: requests are read and thrown away instead of forwarded
        self.dropping = False
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def holding(self) -> bool:
        return not self._released.is_set()

    def hold(self) -> None:
        """Hold back every reply from now on."""
        self._released.clear()

    def release(self) -> None:
        """Deliver what was held back, and every reply from now on."""
        self._released.set()

    async def start(self) -> DelayProxy:
        self._server = await asyncio.start_server(self._accept, self.host, 0, ssl=self._server_ssl)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for w in list(self._writers):
            w.transport.abort()
        for t in list(self._pipes):
            t.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.upstream_port, ssl=self._client_ssl), 5
            )
        except (OSError, TimeoutError):
            client_w.transport.abort()
            return
        self._writers |= {client_w, up_w}
        pipes = [self._spawn(self._forward(client_r, up_w, record=True)), self._spawn(self._back(up_r, client_w))]
        await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        for w in (client_w, up_w):  # one side ended: end the other (as a connection through a router would)
            w.close()
            self._writers.discard(w)

    def _spawn(self, coro) -> asyncio.Task[None]:  # type: ignore[no-untyped-def]
        task = asyncio.ensure_future(coro)
        self._pipes.add(task)
        task.add_done_callback(self._pipes.discard)
        return task

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, record: bool) -> None:
        tail = b""  # the unmatched end of what came before (a request line split across reads)
        with contextlib.suppress(ConnectionError):
            while chunk := await reader.read(65536):
                if record:
                    buf, end = tail + chunk, 0
                    for m in _METHOD.finditer(buf):
                        self.methods.append(m.group(1).decode())
                        end = m.end()
                    tail = buf[end:][-64:]
                if self.dropping:
                    continue
                writer.write(chunk)
                await writer.drain()

    async def _back(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while chunk := await reader.read(65536):
                await self._released.wait()
                if writer.is_closing():
                    return
                writer.write(chunk)
                await writer.drain()
