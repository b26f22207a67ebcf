"""Async etcd client: etcd3-py's AioClient behind a small, typed surface with timeouts and error mapping.

Every call has a timeout; aiohttp / etcd3-py failures become :class:`RegistryUnavailable`. Several
endpoints may be given; a call that cannot reach the current one moves on to the next.
Stream calls (keep-alive, watch) use etcd3-py's stream responses, which need :mod:`registry.compat`.

With :class:`EtcdAccess` the client talks TLS (the CA verifies the server and its name; the client presents its
certificate, for an etcd started with ``--client-cert-auth``) and signs in with etcd's user / password auth: a
token from ``Authenticate``, sent with every call, fetched again when etcd says it is no longer valid (etcd
forgets its simple tokens on a restart and after their TTL).
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlparse

import aiohttp
import semantic_version
from etcd3 import AioClient

from registry import compat
from registry.errors import RegistryUnavailable

compat.install()

T = TypeVar("T")

# etcd3-py raises assorted exceptions while decoding unexpected answers (KeyError on an unknown
# error code during an etcd restart, for one): at this boundary every Exception means "etcd did not
# serve the call" and becomes RegistryUnavailable. Cancellation (BaseException) passes through.
_TRANSPORT_ERRORS = (Exception,)


@dataclass(frozen=True)
class KeyValue:
    key: str
    value: bytes
    create_revision: int
    mod_revision: int
    lease: int


@dataclass(frozen=True)
class WatchEvent:
    kind: str  # "PUT" | "DELETE"
    kv: KeyValue


@dataclass(frozen=True)
class WatchBatch:
    revision: int
    events: list[WatchEvent]
    compact_revision: int = 0
    canceled: bool = False


@dataclass(frozen=True)
class EtcdAccess:
    """How to reach a protected etcd: TLS files (all three, or none) and a user / password (or none)."""

    ca: str = ""
    cert: str = ""
    key: str = ""
    user: str = ""
    password: str = ""

    @classmethod
    def of(cls, cfg: Any) -> EtcdAccess | None:
        """From a ``RegistryConfig``; None when it asks for neither TLS nor auth."""
        access = cls(cfg.tls_ca, cfg.tls_cert, cfg.tls_key, cfg.user, cfg.password)
        return access if (access.cert or access.user) else None

    def __repr__(self) -> str:  # never show the password
        return f"EtcdAccess(ca={self.ca!r}, cert={self.cert!r}, user={self.user!r})"


#: etcd's answers meaning "sign in again" (a restart or the token's TTL made it forget the token)
_STALE_TOKEN = ("invalid auth token", "user name is empty", "auth token")


def _stale_token(exc: BaseException) -> bool:
    text = str(exc)
    return any(marker in text for marker in _STALE_TOKEN)


class _Client(AioClient):  # type: ignore[misc]
    """AioClient without its blocking HTTP version probe in the constructor (it would block the loop)."""

    def _retrieve_version(self) -> None:
        self.server_version_sem = semantic_version.Version(self.server_version)
        self.cluster_version_sem = semantic_version.Version(self.cluster_version)


def _kv(raw: Any) -> KeyValue:
    key = raw.key.decode() if isinstance(raw.key, bytes) else str(raw.key or "")
    value = raw.value if isinstance(raw.value, bytes) else (raw.value or "").encode()
    return KeyValue(
        key=key,
        value=value,
        create_revision=int(raw.create_revision or 0),
        mod_revision=int(raw.mod_revision or 0),
        lease=int(raw.lease or 0),
    )


def prefix_end(prefix: str) -> bytes:
    raw = bytearray(prefix.encode())
    raw[-1] += 1
    return bytes(raw)


class EtcdClient:
    """The registry's only door to etcd."""

    def __init__(
        self, endpoints: Sequence[str], request_timeout: float = 3.0, access: EtcdAccess | None = None
    ) -> None:
        if not endpoints:
            raise ValueError("at least one etcd endpoint is required")
        self.endpoints = list(endpoints)
        self.request_timeout = request_timeout
        self.access = access
        self._index = 0
        self._clients: dict[int, _Client] = {}

    def _client(self) -> _Client:
        client = self._clients.get(self._index)
        if client is None:
            url = urlparse(self.endpoints[self._index])
            access = self.access or EtcdAccess()
            client = _Client(
                host=url.hostname or "127.0.0.1",
                port=url.port or 2379,
                protocol=url.scheme or "http",
                cert=(access.cert, access.key) if access.cert else (),
                verify=access.ca or None,
                username=access.user or None,
                password=access.password or None,
                server_version="3.5.0",
                cluster_version="3.5.0",
            )
            if client.ssl_context is not None:  # etcd3-py checks the CA but not the name: check both
                client.ssl_context.check_hostname = True
                client.ssl_context.minimum_version = ssl.TLSVersion.TLSv1_2
            self._clients[self._index] = client
        return client

    def _rotate(self) -> None:
        if len(self.endpoints) > 1:
            self._index = (self._index + 1) % len(self.endpoints)

    @property
    def endpoint(self) -> str:
        return self.endpoints[self._index]

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            connector = getattr(getattr(client, "session", None), "connector", None)
            if connector is not None and client.ssl_context is not None:
                # TLS connections are dropped, not shut down: a shutdown still running when the caller's loop
                # ends (a session's keep-alive thread) leaves its socket unclosed
                await connector.close(abort_ssl=True)
            await client.close()
        if clients:
            await asyncio.sleep(0)  # let the closed transports run their close callbacks

    async def _signed_in(self, timeout: float | None = None) -> _Client:
        """The current endpoint's client, with an auth token when etcd auth is configured."""
        client = self._client()
        if self.access is not None and self.access.user and not client.token:
            await asyncio.wait_for(client.auth(), timeout or self.request_timeout)
        return client

    async def _call(self, what: str, make: Any, timeout: float | None = None, total: float | None = None) -> Any:
        """Run one unary call with a timeout, trying each endpoint once (and signing in again once when etcd
        no longer knows the token); ``total`` bounds all the tries together, each endpoint getting at most
        its share of the time left (a member that hangs, cut off or paused, leaves the others time to answer:
        a session's keep-alive is not lost to the first member it asks)."""
        last: BaseException | None = None
        tries = len(self.endpoints) + (1 if self.access is not None and self.access.user else 0)
        deadline = None if total is None else time.monotonic() + total
        untried = len(self.endpoints)  # endpoints not yet given up on: each gets its share of what is left
        for _ in range(tries):
            each = timeout or self.request_timeout
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    last = last or TimeoutError(f"no time left of {total:g}s")
                    break
                each = min(each, left / max(1, untried))
            ends = time.monotonic() + each  # signing in and the call together
            try:
                client = await self._signed_in(each)
                return await asyncio.wait_for(make(client), max(0.001, ends - time.monotonic()))
            except _TRANSPORT_ERRORS as exc:
                last = exc
                if self.access is not None and self.access.user and _stale_token(exc):
                    self._client().token = None
                    continue
                untried -= 1
                self._rotate()
        raise RegistryUnavailable(f"etcd {what} failed: {type(last).__name__}: {last}") from last

    # -- KV ---------------------------------------------------------------------------------------

    async def put(self, key: str, value: bytes | str, lease: int = 0) -> int:
        resp = await self._call("put", lambda c: c.put(key, value, lease=lease))
        return int(resp.header.revision)

    async def get(self, key: str) -> KeyValue | None:
        resp = await self._call("get", lambda c: c.range(key))
        return _kv(resp.kvs[0]) if resp.kvs else None

    async def get_prefix(self, prefix: str) -> tuple[int, list[KeyValue]]:
        """All keys under ``prefix`` and the store revision the read saw."""
        resp = await self._call("range", lambda c: c.range(prefix, prefix=True))
        return int(resp.header.revision), [_kv(kv) for kv in (resp.kvs or [])]

    async def delete(self, key: str) -> int:
        resp = await self._call("delete", lambda c: c.delete_range(key))
        return int(resp.deleted or 0)

    async def put_if_absent(self, key: str, value: bytes | str, lease: int) -> tuple[bool, KeyValue | None, int]:
        """Create ``key`` only if it does not exist. Returns (created, current holder kv, revision)."""

        def txn(c: _Client) -> Awaitable[Any]:
            return c.txn(
                compare=[{"key": key.encode(), "target": "CREATE", "result": "EQUAL", "create_revision": 0}],
                success=[c.put(key, value, lease=lease, txn_obj=True)],
                failure=[c.range(key, txn_obj=True)],
            )

        resp = await self._call("txn", txn)
        revision = int(resp.header.revision)
        if resp.succeeded:
            return True, None, revision
        kvs = resp.responses[0].response_range.kvs or []
        return False, (_kv(kvs[0]) if kvs else None), revision

    async def delete_if_created_at(self, key: str, create_revision: int) -> bool:
        """Delete ``key`` only if it is still the version created at ``create_revision``."""

        def txn(c: _Client) -> Awaitable[Any]:
            return c.txn(
                compare=[
                    {
                        "key": key.encode(),
                        "target": "CREATE",
                        "result": "EQUAL",
                        "create_revision": create_revision,
                    }
                ],
                success=[c.delete_range(key, txn_obj=True)],
                failure=[],
            )

        resp = await self._call("txn", txn)
        return bool(resp.succeeded)

    async def put_if_created_at(self, key: str, value: bytes | str, lease: int, create_revision: int) -> bool:
        """Write ``key`` only if it is still the version created at ``create_revision``."""

        def txn(c: _Client) -> Awaitable[Any]:
            return c.txn(
                compare=[
                    {"key": key.encode(), "target": "CREATE", "result": "EQUAL", "create_revision": create_revision}
                ],
                success=[c.put(key, value, lease=lease, txn_obj=True)],
                failure=[],
            )

        resp = await self._call("txn", txn)
        return bool(resp.succeeded)

    async def wait_deleted(self, key: str, start_revision: int) -> None:
        """Return once ``key`` is deleted at or after ``start_revision`` (or the watch was cancelled or
        compacted: the caller re-reads). Raises RegistryUnavailable; no timeout of its own."""
        watch = self.watch_prefix(key, start_revision, idle_timeout=5.0, key_only=True)
        try:
            async for batch in watch:
                if batch.canceled or batch.compact_revision:
                    return
                if any(ev.kind == "DELETE" for ev in batch.events):
                    return
        finally:
            await watch.aclose()

    async def compact(self, revision: int) -> None:
        await self._call("compact", lambda c: c.compact(revision, physical=True))

    # -- leases -----------------------------------------------------------------------------------

    async def grant(self, ttl: float) -> tuple[int, int]:
        resp = await self._call("lease grant", lambda c: c.lease_grant(TTL=max(1, round(ttl))))
        return int(resp.ID), int(resp.TTL)

    async def revoke(self, lease_id: int) -> None:
        await self._call("lease revoke", lambda c: c.lease_revoke(ID=lease_id))

    async def time_to_live(self, lease_id: int) -> int:
        resp = await self._call("lease ttl", lambda c: c.lease_time_to_live(ID=lease_id))
        return int(resp.TTL or -1)

    async def keepalive_once(self, lease_id: int, timeout: float | None = None) -> int:
        """One keep-alive round trip on the keep-alive stream; returns the new TTL (<= 0: lease gone).
        ``timeout`` bounds the whole call, every endpoint tried included (a session's lease has only so
        much time left); each endpoint gets at most the request timeout of it."""

        async def once(c: _Client) -> int:
            stream = c.call_rpc(
                "/lease/keepalive",
                data=b'{"ID":%d}\n' % lease_id,
                stream=True,
                timeout=aiohttp.ClientTimeout(total=min(timeout or self.request_timeout, self.request_timeout)),
            )
            try:
                async for resp in stream:
                    return int(resp.TTL or 0)
                return 0
            finally:
                _close_stream(stream)

        return int(await self._call("lease keep-alive", once, total=timeout))

    # -- watch ------------------------------------------------------------------------------------

    async def watch_prefix(
        self, prefix: str, start_revision: int, idle_timeout: float = 30.0, key_only: bool = False
    ) -> AsyncIterator[WatchBatch]:
        """Watch ``prefix`` (or one key with ``key_only``) from ``start_revision``.

        Ends (StopAsyncIteration) when the stream ends or stays idle for ``idle_timeout`` seconds;
        the caller re-watches from the last revision it saw. Raises RegistryUnavailable on errors.

        The stream is read with our own incremental JSON splitter rather than etcd3-py's: its
        ``ModelizedStreamResponse`` builds a fresh parser for every response and drops whatever
        else arrived in the same read, so two watch responses landing together lose the second
        (tests/test_registry_client.py shows the loss). Requests still go through etcd3-py.
        """
        try:
            client = await self._signed_in()
        except _TRANSPORT_ERRORS as exc:
            self._rotate()
            raise RegistryUnavailable(f"etcd sign-in failed: {type(exc).__name__}: {exc}") from exc
        request: dict[str, Any] = {"key": _b64(prefix), "start_revision": start_revision}
        if not key_only:
            request["range_end"] = base64.b64encode(prefix_end(prefix)).decode()
        timeout = aiohttp.ClientTimeout(total=None, connect=self.request_timeout, sock_read=idle_timeout)
        try:
            async with client.call_rpc(
                "/watch", data={"create_request": request}, encode=False, raw=True, timeout=timeout
            ) as resp:
                try:
                    if resp.status >= 400:
                        raise RegistryUnavailable(f"etcd watch refused: HTTP {resp.status}")
                    async for obj in _json_objects(resp.content):
                        if "error" in obj:
                            if _stale_token(Exception(str(obj["error"]))):
                                client.token = None  # the next call signs in again
                            raise RegistryUnavailable(f"etcd watch error: {obj['error']}")
                        yield _watch_batch(obj.get("result", obj))
                finally:
                    _drop_tls(resp)  # a watch stream is never reused
        except aiohttp.SocketTimeoutError:
            return
        except RegistryUnavailable:
            self._rotate()
            raise
        except _TRANSPORT_ERRORS as exc:
            self._rotate()
            raise RegistryUnavailable(f"etcd watch failed: {type(exc).__name__}: {exc}") from exc


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


async def _json_objects(content: aiohttp.StreamReader) -> AsyncIterator[dict[str, Any]]:
    """Consecutive JSON objects from a byte stream, however they are split across reads."""
    decoder = json.JSONDecoder()
    buf = ""
    while True:
        chunk = await content.readany()
        if not chunk:
            return
        buf += chunk.decode()
        while True:
            buf = buf.lstrip()
            if not buf:
                break
            try:
                obj, end = decoder.raw_decode(buf)
            except json.JSONDecodeError:
                break  # incomplete: wait for more bytes
            buf = buf[end:]
            yield obj


def _watch_batch(result: dict[str, Any]) -> WatchBatch:
    events = []
    for ev in result.get("events") or []:
        kv = ev.get("kv") or {}
        events.append(
            WatchEvent(
                "DELETE" if ev.get("type") == "DELETE" else "PUT",
                KeyValue(
                    key=base64.b64decode(kv.get("key", "")).decode(),
                    value=base64.b64decode(kv.get("value", "")),
                    create_revision=int(kv.get("create_revision", 0)),
                    mod_revision=int(kv.get("mod_revision", 0)),
                    lease=int(kv.get("lease", 0)),
                ),
            )
        )
    return WatchBatch(
        revision=int((result.get("header") or {}).get("revision", 0)),
        events=events,
        compact_revision=int(result.get("compact_revision", 0)),
        canceled=bool(result.get("canceled", False)),
    )


def _drop_tls(resp: aiohttp.ClientResponse) -> None:
    """Abort the TLS connection of a stream given up (a one-shot keep-alive, a watch left, a call timed out)
    instead of shutting it down: a TLS shutdown runs on after close() returns, and a loop that ends
    meanwhile (a session's keep-alive thread, a test's loop) leaves the socket unclosed."""
    transport = resp.connection.transport if resp.connection is not None else None
    if transport is not None and transport.get_extra_info("sslcontext") is not None:
        transport.abort()


def _close_stream(stream: Any) -> None:
    resp = getattr(stream, "resp", None)
    if isinstance(resp, aiohttp.ClientResponse):
        _drop_tls(resp)
        resp.close()
        return
    coro = getattr(resp, "_coro", None)  # never awaited: close it so no "never awaited" warning leaks
    if coro is not None:
        coro.close()
