"""A TCP proxy on loopback that can hold back a node's replies: the network fault "the request got
there, the answer did not (in time)".

Bytes from the client go to the upstream at once (or are dropped while ``dropping``: the request is
lost on the way, the client still sees it written); bytes from the upstream back to the client are
held while ``holding`` is set and delivered, in order, once it is cleared (unless the client gave up
and closed first). The proxy records the RPC methods of the requests it got, as HTTP requests or as
frames of a call stream (rpc/stream.py): holding and dropping work on both alike.

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
_STREAM = re.compile(rb"GET /rpc/stream HTTP/1\.1\r\n.*?\r\n\r\n", re.DOTALL)


class _Calls:
    """The RPC methods in what a client sends on one connection: HTTP request lines, and, once the connection
    became a call stream (rpc/stream.py), the method of each WebSocket frame (masked, as a client sends them)."""

    def __init__(self) -> None:
        self.buf = b""
        self.frames = False

    def feed(self, chunk: bytes) -> list[str]:
        self.buf += chunk
        if self.frames:
            return self._frames()
        found, end = [], 0
        for m in _METHOD.finditer(self.buf):
            found.append(m.group(1).decode())
            end = m.end()
        if upgrade := _STREAM.search(self.buf, end):
            self.buf, self.frames = self.buf[upgrade.end() :], True
            return found + self._frames()
        self.buf = self.buf[end:][-8192:]  # the unmatched end (a request line or headers split across reads)
        return found

    def _frames(self) -> list[str]:
        found = []
        while len(self.buf) >= 2:
            opcode, size, at = self.buf[0] & 0x0F, self.buf[1] & 0x7F, 2
            if size >= 126:
                wide = 2 if size == 126 else 8
                if len(self.buf) < at + wide:
                    break
                size, at = int.from_bytes(self.buf[at : at + wide], "big"), at + wide
            mask = self.buf[at : at + 4] if self.buf[1] & 0x80 else b"\0\0\0\0"
            at += 4 if self.buf[1] & 0x80 else 0
            if len(self.buf) < at + size:
                break
            if opcode == 2:  # a binary frame: a call, b"<seq> <method> <mac>\n<body>"
                head = bytes(b ^ mask[i % 4] for i, b in enumerate(self.buf[at : at + min(size, 200)]))
                parts = head.split(b"\n", 1)[0].split(b" ")
                if len(parts) == 3:
                    found.append(parts[1].decode(errors="replace"))
            self.buf = self.buf[at + size :]
        return found


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
        calls = _Calls()
        with contextlib.suppress(ConnectionError):
            while chunk := await reader.read(65536):
                if record:
                    self.methods.extend(calls.feed(chunk))
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
