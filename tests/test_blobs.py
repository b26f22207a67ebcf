"""The blob store contract (engine/storage/blobs.py), run against both implementations: the metadata
PostgreSQL (real server) and S3 (moto's S3 server on loopback, a real HTTP endpoint boto3 talks to)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
from collections.abc import AsyncIterator, Iterator
from typing import Any

import asyncpg
import pytest

from core.errors import ConfigError
from engine import config as config_mod
from engine.infra.ports import free_port
from engine.secretbox import Keyring, new_key_line
from engine.storage.blobs import (
    CHUNK_BYTES,
    S3_PART_BYTES,
    BlobNotFound,
    BlobStore,
    BlobTooLarge,
    DatabaseBlobStore,
    S3BlobStore,
    blob_store,
    s3_secret,
)

BUCKET = "porpoise-test"


@pytest.fixture(scope="module")
def moto_s3() -> Iterator[str]:
    """moto's S3 server on a loopback port; its endpoint URL."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def s3_config(endpoint: str, **extra: str) -> config_mod.Config:
    sets = {
        "storage.type": "s3",
        "storage.s3_bucket": BUCKET,
        "storage.s3_endpoint": endpoint,
        "storage.s3_access_key_id": "testing",
        "storage.s3_secret_access_key": "testing",
        "storage.s3_timeout": "10",
        **extra,
    }
    return config_mod.load(overrides=[f"{k}={v}" for k, v in sets.items()], environ={})


@pytest.fixture(params=["database", "s3"])
def backend(request: pytest.FixtureRequest) -> tuple[str, str]:
    """The implementation under test and where it stores: a fresh database's DSN, or moto's endpoint."""
    if request.param == "database":
        return "database", request.getfixturevalue("fresh_db")
    return "s3", request.getfixturevalue("moto_s3")


@pytest.fixture
async def store(backend: tuple[str, str]) -> AsyncIterator[BlobStore]:
    kind, where = backend
    if kind == "database":
        pool = await asyncpg.create_pool(where, min_size=1, max_size=3)
        try:
            made = blob_store(config_mod.load(environ={}), pool)
            assert isinstance(made, DatabaseBlobStore)
            yield made
        finally:
            await pool.close()
    else:
        s3 = blob_store(s3_config(where, **{"storage.s3_prefix": f"t{os.urandom(4).hex()}/"}), None)
        assert isinstance(s3, S3BlobStore)
        with contextlib.suppress(s3.client.exceptions.BucketAlreadyOwnedByYou):
            await asyncio.to_thread(s3.client.create_bucket, Bucket=BUCKET)
        yield s3
        await s3.close()


async def stream(data: bytes, piece: int = 300_000) -> AsyncIterator[bytes]:
    for i in range(0, len(data), piece):
        yield data[i : i + piece]


async def read(store: BlobStore, key: str) -> bytes:
    out = bytearray()
    async for chunk in store.open(key):
        assert len(chunk) <= max(CHUNK_BYTES, S3_PART_BYTES)
        out += chunk
    return bytes(out)


@pytest.mark.parametrize("size", [0, 5, CHUNK_BYTES, 2 * S3_PART_BYTES + 12345])
async def test_put_then_open_returns_the_bytes_with_size_and_checksum(store: BlobStore, size: int) -> None:
    data = os.urandom(size)
    stored = await store.put("a/b/file.bin", stream(data))
    assert (stored.key, stored.size, stored.sha256) == ("a/b/file.bin", size, hashlib.sha256(data).hexdigest())
    assert await store.exists("a/b/file.bin")
    assert await read(store, "a/b/file.bin") == data


async def test_put_replaces_and_delete_removes(store: BlobStore) -> None:
    await store.put("k", stream(b"one"))
    await store.put("k", stream(b"two, longer"))
    assert await read(store, "k") == b"two, longer"
    await store.delete("k")
    assert not await store.exists("k")
    await store.delete("k")  # again: no error
    with pytest.raises(BlobNotFound):
        await read(store, "k")


async def test_delete_prefix_removes_only_that_prefix(store: BlobStore) -> None:
    for key in ("logs/1/a", "logs/1/b", "logs/10/a", "logs_1/a", "other"):
        await store.put(key, stream(key.encode()))
    assert await store.delete_prefix("logs/1/") == 2
    assert [await store.exists(k) for k in ("logs/1/a", "logs/1/b", "logs/10/a", "logs_1/a", "other")] == [
        False,
        False,
        True,
        True,
        True,
    ]


@pytest.mark.parametrize("size", [CHUNK_BYTES + 1, 2 * S3_PART_BYTES + 1])
async def test_past_max_size_is_refused_and_leaves_nothing(store: BlobStore, size: int) -> None:
    with pytest.raises(BlobTooLarge, match=f"larger than the limit of {size - 1} bytes"):
        await store.put("big", stream(os.urandom(size), piece=CHUNK_BYTES), max_size=size - 1)
    assert not await store.exists("big")
    # a key that held something keeps it
    await store.put("kept", stream(b"old"))
    with pytest.raises(BlobTooLarge):
        await store.put("kept", stream(os.urandom(size), piece=CHUNK_BYTES), max_size=size - 1)
    assert await read(store, "kept") == b"old"
    # exactly the limit is accepted
    stored = await store.put("edge", stream(b"x" * 10), max_size=10)
    assert stored.size == 10


async def test_a_failing_source_leaves_nothing(store: BlobStore) -> None:
    async def broken() -> AsyncIterator[bytes]:
        yield os.urandom(S3_PART_BYTES + 1)
        yield os.urandom(S3_PART_BYTES + 1)
        raise ConnectionResetError("client went away")

    with pytest.raises(ConnectionResetError):
        await store.put("half", broken())
    assert not await store.exists("half")


async def test_bad_keys_are_refused(store: BlobStore) -> None:
    from engine.storage.blobs import BlobError

    for key in ("", "/abs", "x" * 1025):
        with pytest.raises(BlobError, match="bad blob key"):
            await store.put(key, stream(b"x"))


async def test_database_store_holds_one_chunk_in_a_row(fresh_db: str) -> None:
    pool = await asyncpg.create_pool(fresh_db, min_size=1, max_size=2)
    try:
        await DatabaseBlobStore(pool).put("rows", stream(os.urandom(2 * CHUNK_BYTES + 1)))
        sizes = await pool.fetch(
            "SELECT octet_length(data) AS n FROM blob_chunk c JOIN blob b ON b.id = c.blob_id"
            " WHERE b.key = 'rows' ORDER BY seq"
        )
        assert [r["n"] for r in sizes] == [CHUNK_BYTES, CHUNK_BYTES, 1]
    finally:
        await pool.close()


def test_s3_configuration_is_checked_and_the_secret_masked(moto_s3: str) -> None:
    with pytest.raises(ConfigError, match=r"storage\.s3_bucket: required"):
        config_mod.load(overrides=["storage.type=s3"], environ={})
    with pytest.raises(ConfigError, match=r"storage\.s3_endpoint"):
        config_mod.load(overrides=["storage.s3_endpoint=ftp://x"], environ={})
    cfg = s3_config(moto_s3, **{"storage.s3_secret_access_key": "plain-secret-value"})
    assert "plain-secret-value" not in repr(cfg)
    assert "plain-secret-value" not in repr(cfg.storage)
    with pytest.raises(ConfigError, match="has no database connection"):
        blob_store(config_mod.load(environ={}), None)


def test_a_sealed_s3_secret_is_opened_with_the_keyring(moto_s3: str) -> None:
    line = new_key_line("k1")
    sealed = Keyring.from_config(type("C", (), {"key_file": "", "keys": line})()).seal(
        "the-secret", "storage.s3_secret_access_key"
    )
    cfg = s3_config(moto_s3, **{"storage.s3_secret_access_key": sealed, "secrets.keys": line})
    assert s3_secret(cfg) == "the-secret"
    without: Any = s3_config(moto_s3, **{"storage.s3_secret_access_key": sealed})
    with pytest.raises(ConfigError, match="cannot open the sealed value"):
        s3_secret(without)


async def test_a_small_blob_on_a_new_key_is_one_statement_and_a_known_key_is_replaced(fresh_db: str) -> None:
    """At most one chunk: read whole, then one statement writes the row and its chunk when the key is new (a
    task log's archive); a key written before gets a new row (a new id) in a transaction."""
    pool = await asyncpg.create_pool(fresh_db, min_size=1, max_size=2)
    calls: list[str] = []

    class Counting:
        def __getattr__(self, name: str) -> Any:
            calls.append(name)
            return getattr(pool, name)

    store = DatabaseBlobStore(Counting())  # type: ignore[arg-type]
    try:
        await store.put("log", stream(b"one line\n"))
        assert calls == ["fetchval"]
        (first,) = await pool.fetch("SELECT id, size, chunks FROM blob WHERE key = 'log'")
        calls.clear()
        await store.put("log", stream(b"two\nlines\n", piece=4))
        assert calls == ["fetchval", "acquire"]
        (second,) = await pool.fetch("SELECT id, size, chunks FROM blob WHERE key = 'log'")
        assert second["id"] != first["id"] and (second["size"], second["chunks"]) == (10, 1)
        assert await read(store, "log") == b"two\nlines\n"
        await store.put("empty", stream(b""))
        (empty,) = await pool.fetch("SELECT id, size, chunks FROM blob WHERE key = 'empty'")
        assert (empty["size"], empty["chunks"]) == (0, 0)
        assert await pool.fetchval("SELECT count(*) FROM blob_chunk WHERE blob_id = $1", empty["id"]) == 0
        assert await read(store, "empty") == b""
        assert await pool.fetchval("SELECT count(*) FROM blob_chunk") == 1  # the old row's chunk went with it
    finally:
        await pool.close()


async def test_writers_of_one_key_at_once_take_turns(fresh_db: str) -> None:
    """Eight puts of one key at once (a known key, then a new one): none fails, and the key holds one of them
    whole."""
    pool = await asyncpg.create_pool(fresh_db, min_size=1, max_size=8)
    store = DatabaseBlobStore(pool)
    try:
        await store.put("known", stream(b"old"))
        for key in ("known", "new"):
            bodies = [f"writer {i}\n".encode() * (i + 1) for i in range(8)]
            await asyncio.gather(*(store.put(key, stream(body)) for body in bodies))
            assert await read(store, key) in bodies
            assert await pool.fetchval("SELECT count(*) FROM blob WHERE key = $1", key) == 1
    finally:
        await pool.close()
