"""One interface for file contents (resource center files, archived task logs): :class:`BlobStore`.

Two implementations, chosen by ``storage.type`` (configs/storage.yaml):

- ``database`` (:class:`DatabaseBlobStore`, the default): the metadata PostgreSQL, one ``blob`` row per
  object and its content in ``blob_chunk`` rows of :data:`CHUNK_BYTES` each, so a multi-host cluster needs
  no shared file system. A put is one transaction: a failed or refused put leaves nothing, and a reader
  sees the old object or the new one, never a mix (chunks hang off the object's id, not its key).
- ``s3`` (:class:`S3BlobStore`): any S3-compatible store through boto3, whose blocking calls run in
  threads off the event loop; large objects go up as multipart uploads, aborted on failure.

Both stream: a put reads its chunks as they come and holds at most one part in memory; ``open`` yields
chunks as they are read. Errors (all :class:`BlobError`, a StorageError)::

    BlobError             the store failed or refused a call
    ├── BlobNotFound      no object under that key (or it was replaced while being read)
    └── BlobTooLarge      a put went past its max_size; nothing was stored
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterable, AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import asyncpg

from core import logs
from core.errors import ConfigError, StorageError
from engine.storage.failures import DB_FAILURES

if TYPE_CHECKING:
    from engine.config import Config, StorageConfig

log = logs.get(__name__)

#: bytes per blob_chunk row of the database store
CHUNK_BYTES = 1 << 20
#: bytes per part of an S3 multipart upload (S3's minimum for every part but the last is 5 MiB)
S3_PART_BYTES = 8 << 20
MAX_KEY_LENGTH = 1024

T = TypeVar("T")


class BlobError(StorageError):
    """The blob store failed or refused a call."""


class BlobNotFound(BlobError):
    """No object is stored under the key."""


class BlobTooLarge(BlobError):
    """A put went past its ``max_size``; nothing was stored."""

    def __init__(self, key: str, max_size: int) -> None:
        super().__init__(f"{key}: larger than the limit of {max_size} bytes; nothing was stored")
        self.max_size = max_size


@dataclass(frozen=True)
class StoredBlob:
    key: str
    size: int
    #: hex SHA-256 of the content
    sha256: str


class BlobStore(Protocol):
    """Where file contents live. Keys are ``/``-separated names (no leading ``/``, at most 1024 characters)."""

    async def put(self, key: str, chunks: AsyncIterable[bytes], *, max_size: int | None = None) -> StoredBlob:
        """Store the chunks under ``key`` (replacing what was there); BlobTooLarge past ``max_size``."""
        ...

    def open(self, key: str) -> AsyncIterator[bytes]:
        """The content, chunk by chunk; BlobNotFound (on the first iteration) when there is none."""
        ...

    async def delete(self, key: str) -> None:
        """Remove the object; no error when there is none."""
        ...

    async def delete_prefix(self, prefix: str) -> int:
        """Remove every object whose key starts with ``prefix``; how many were removed."""
        ...

    async def exists(self, key: str) -> bool: ...

    async def close(self) -> None: ...


def check_key(key: str) -> str:
    if not key or key.startswith("/") or len(key) > MAX_KEY_LENGTH or "\x00" in key:
        raise BlobError(f"bad blob key {key!r}: 1 to {MAX_KEY_LENGTH} characters, not starting with '/'")
    return key


class _Sizer:
    """Counts and hashes what passes; raises BlobTooLarge past the limit."""

    def __init__(self, key: str, max_size: int | None) -> None:
        self.key, self.max_size = key, max_size
        self.size = 0
        self.hash = hashlib.sha256()

    def add(self, data: bytes) -> None:
        self.size += len(data)
        if self.max_size is not None and self.size > self.max_size:
            raise BlobTooLarge(self.key, self.max_size)
        self.hash.update(data)

    def stored(self) -> StoredBlob:
        return StoredBlob(self.key, self.size, self.hash.hexdigest())


class _SourceFailed(Exception):
    """The chunks' source raised (the client went away): its error, not the store's, reaches the caller."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


async def _parts(chunks: AsyncIterable[bytes], size: int, sizer: _Sizer) -> AsyncIterator[bytes]:
    """Re-cut a stream into parts of ``size`` bytes (the last one shorter), counting it through ``sizer``.
    An error of the source comes out as _SourceFailed."""
    buf = bytearray()
    source = aiter(chunks)
    while True:
        try:
            chunk = await anext(source)
        except StopAsyncIteration:
            break
        except Exception as exc:
            raise _SourceFailed(exc) from exc
        if not chunk:
            continue
        sizer.add(chunk)
        buf += chunk
        while len(buf) >= size:
            yield bytes(buf[:size])
            del buf[:size]
    if buf:
        yield bytes(buf)


# -- PostgreSQL ---------------------------------------------------------------------------------------------


_PUT_CHUNK = "INSERT INTO blob_chunk (blob_id, seq, data) VALUES ($1, $2, $3)"
#: two writers of one key take turns (a transaction-scoped lock, taken in a statement of its own: the DELETE
#: after it must read with a snapshot taken once the other writer committed), or the second's INSERT would meet
#: the first's new row
_TURN = "SELECT pg_advisory_xact_lock(hashtextextended('blob:' || $1, 0))"
#: a blob of at most one chunk (``$4``: 0 or 1; ``$5``: its data or NULL), its row and its chunk
_PUT_SMALL = (
    "WITH b AS (INSERT INTO blob (key, size, sha256, chunks) VALUES ($1, $2, $3, $4){conflict} RETURNING id),"
    " c AS (INSERT INTO blob_chunk (blob_id, seq, data) SELECT id, 0, $5::bytea FROM b WHERE $5::bytea IS NOT NULL)"
    " SELECT count(*) FROM b"
)
#: the same when the key is new, else nothing written (0)
_PUT_NEW_SMALL = _PUT_SMALL.format(conflict=" ON CONFLICT (key) DO NOTHING")
_PUT_SMALL = _PUT_SMALL.format(conflict="")


async def _clear(conn: asyncpg.Connection, key: str) -> None:
    """Inside a put's transaction: the key's turn, then its old row (and chunks) gone."""
    await conn.execute(_TURN, key)
    await conn.execute("DELETE FROM blob WHERE key = $1", key)


class DatabaseBlobStore:
    """Blobs in the metadata database: ``blob`` + ``blob_chunk`` rows (engine/storage/blob_tables.py)."""

    def __init__(self, pool: asyncpg.Pool, chunk_bytes: int = CHUNK_BYTES) -> None:
        self.pool = pool
        self.chunk_bytes = chunk_bytes

    async def put(self, key: str, chunks: AsyncIterable[bytes], *, max_size: int | None = None) -> StoredBlob:
        """A blob of at most one chunk (every task log, most resource files) is read whole first and written
        in one statement when its key is new (the blob row and its chunk, committing themselves: one round
        trip where the general way takes six); a key written before, or a bigger blob, in a transaction
        that replaces the key's row (a new id: a reader of the old one never mixes the two)."""
        check_key(key)
        sizer = _Sizer(key, max_size)
        parts = aiter(_parts(chunks, self.chunk_bytes, sizer))
        try:
            first = await anext(parts, None)
            second = None if first is None else await anext(parts, None)
            if second is None:
                stored = sizer.stored()
                args = (key, stored.size, stored.sha256, 0 if first is None else 1, first)
                if await self.pool.fetchval(_PUT_NEW_SMALL, *args):
                    return stored
                async with self.pool.acquire() as conn, conn.transaction():
                    await _clear(conn, key)
                    await conn.execute(_PUT_SMALL, *args)
                return stored
            async with self.pool.acquire() as conn, conn.transaction():
                await _clear(conn, key)
                blob_id = await conn.fetchval(
                    "INSERT INTO blob (key, size, sha256, chunks) VALUES ($1, 0, '', 0) RETURNING id", key
                )
                seq = 0
                for part in (first, second):
                    await conn.execute(_PUT_CHUNK, blob_id, seq, part)
                    seq += 1
                async for part in parts:
                    await conn.execute(_PUT_CHUNK, blob_id, seq, part)
                    seq += 1
                stored = sizer.stored()
                await conn.execute(
                    "UPDATE blob SET size = $2, sha256 = $3, chunks = $4 WHERE id = $1",
                    blob_id,
                    stored.size,
                    stored.sha256,
                    seq,
                )
        except _SourceFailed as failed:
            raise failed.error from None
        except DB_FAILURES as exc:
            raise BlobError(f"{key}: the database failed while storing it: {exc}") from exc
        return stored

    async def open(self, key: str) -> AsyncIterator[bytes]:  # type: ignore[override]
        check_key(key)
        try:
            row = await self.pool.fetchrow("SELECT id, chunks FROM blob WHERE key = $1", key)
        except DB_FAILURES as exc:
            raise BlobError(f"{key}: the database failed while reading it: {exc}") from exc
        if row is None:
            raise BlobNotFound(f"{key}: no such blob")
        for seq in range(row["chunks"]):
            try:
                data = await self.pool.fetchval(
                    "SELECT data FROM blob_chunk WHERE blob_id = $1 AND seq = $2", row["id"], seq
                )
            except DB_FAILURES as exc:
                raise BlobError(f"{key}: the database failed while reading it: {exc}") from exc
            if data is None:
                raise BlobNotFound(f"{key}: deleted or replaced while being read")
            yield data

    async def delete(self, key: str) -> None:
        check_key(key)
        try:
            await self.pool.execute("DELETE FROM blob WHERE key = $1", key)
        except DB_FAILURES as exc:
            raise BlobError(f"{key}: the database failed while deleting it: {exc}") from exc

    async def delete_prefix(self, prefix: str) -> int:
        pattern = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        try:
            result = await self.pool.execute("DELETE FROM blob WHERE key LIKE $1", pattern)
        except DB_FAILURES as exc:
            raise BlobError(f"{prefix}*: the database failed while deleting: {exc}") from exc
        return int(result.split()[-1])

    async def exists(self, key: str) -> bool:
        check_key(key)
        try:
            return bool(await self.pool.fetchval("SELECT EXISTS (SELECT 1 FROM blob WHERE key = $1)", key))
        except DB_FAILURES as exc:
            raise BlobError(f"{key}: the database failed: {exc}") from exc

    async def close(self) -> None:
        """The pool is the caller's."""


# -- S3 -----------------------------------------------------------------------------------------------------


class S3BlobStore:
    """Blobs in an S3-compatible bucket through boto3, every call in a worker thread (boto3 blocks)."""

    def __init__(self, cfg: StorageConfig, secret_access_key: str) -> None:
        try:
            import boto3
            from botocore.config import Config as BotoConfig
        except ImportError as exc:  # pragma: no cover - depends on the installation
            raise ConfigError("storage.type s3 needs boto3: pip install 'porpoise-scheduler[s3]'") from exc
        self.bucket = cfg.s3_bucket
        self.prefix = cfg.s3_prefix
        session = boto3.session.Session(
            aws_access_key_id=cfg.s3_access_key_id or None,
            aws_secret_access_key=secret_access_key or None,
            region_name=cfg.s3_region or None,
        )
        self.client = session.client(
            "s3",
            endpoint_url=cfg.s3_endpoint or None,
            config=BotoConfig(
                connect_timeout=cfg.s3_timeout,
                read_timeout=cfg.s3_timeout,
                retries={"max_attempts": 3, "mode": "standard"},
                s3={"addressing_style": "path"} if cfg.s3_endpoint else None,
            ),
        )

    def _name(self, key: str) -> str:
        return self.prefix + check_key(key)

    async def _call(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return await asyncio.to_thread(fn, *args, **kwargs)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in ("NoSuchKey", "404", "NotFound"):
                raise BlobNotFound(f"{what}: no such blob") from exc
            raise BlobError(f"{what}: S3 refused the call: {exc}") from exc
        except BotoCoreError as exc:
            raise BlobError(f"{what}: S3 failed: {exc}") from exc

    async def put(self, key: str, chunks: AsyncIterable[bytes], *, max_size: int | None = None) -> StoredBlob:
        try:
            return await self._put(key, chunks, max_size)
        except _SourceFailed as failed:
            raise failed.error from None

    async def _put(self, key: str, chunks: AsyncIterable[bytes], max_size: int | None) -> StoredBlob:
        name = self._name(key)
        sizer = _Sizer(key, max_size)
        parts = _parts(chunks, S3_PART_BYTES, sizer)
        first = await anext(parts, b"")
        second = await anext(parts, None)
        if second is None:  # one part: a plain put
            await self._call(key, self.client.put_object, Bucket=self.bucket, Key=name, Body=first)
            return sizer.stored()
        upload = await self._call(key, self.client.create_multipart_upload, Bucket=self.bucket, Key=name)
        upload_id = upload["UploadId"]
        try:
            done: list[dict[str, Any]] = []

            async def send(data: bytes) -> None:
                number = len(done) + 1
                answer = await self._call(
                    key,
                    self.client.upload_part,
                    Bucket=self.bucket,
                    Key=name,
                    UploadId=upload_id,
                    PartNumber=number,
                    Body=data,
                )
                done.append({"PartNumber": number, "ETag": answer["ETag"]})

            await send(first)
            await send(second)
            async for part in parts:
                await send(part)
            await self._call(
                key,
                self.client.complete_multipart_upload,
                Bucket=self.bucket,
                Key=name,
                UploadId=upload_id,
                MultipartUpload={"Parts": done},
            )
        except BaseException:
            await asyncio.shield(self._abort(name, upload_id))
            raise
        return sizer.stored()

    async def _abort(self, name: str, upload_id: str) -> None:
        try:
            await self._call(name, self.client.abort_multipart_upload, Bucket=self.bucket, Key=name, UploadId=upload_id)
        except BlobError as exc:
            log.warning("could not abort a multipart upload", key=name, error=str(exc))

    async def open(self, key: str) -> AsyncIterator[bytes]:  # type: ignore[override]
        name = self._name(key)
        answer = await self._call(key, self.client.get_object, Bucket=self.bucket, Key=name)
        body = answer["Body"]
        try:
            while True:
                data = await self._call(key, body.read, CHUNK_BYTES)
                if not data:
                    return
                yield data
        finally:
            await asyncio.to_thread(body.close)

    async def delete(self, key: str) -> None:
        await self._call(key, self.client.delete_object, Bucket=self.bucket, Key=self._name(key))

    async def delete_prefix(self, prefix: str) -> int:
        removed = 0
        while True:
            page = await self._call(
                prefix, self.client.list_objects_v2, Bucket=self.bucket, Prefix=self.prefix + prefix, MaxKeys=1000
            )
            names = [{"Key": item["Key"]} for item in page.get("Contents", [])]
            if not names:
                return removed
            await self._call(prefix, self.client.delete_objects, Bucket=self.bucket, Delete={"Objects": names})
            removed += len(names)

    async def exists(self, key: str) -> bool:
        try:
            await self._call(key, self.client.head_object, Bucket=self.bucket, Key=self._name(key))
        except BlobNotFound:
            return False
        return True

    async def close(self) -> None:
        await asyncio.to_thread(self.client.close)


# -- factory ------------------------------------------------------------------------------------------------


def s3_secret(config: Config) -> str:
    """``storage.s3_secret_access_key``, opened with the secrets keyring when it is sealed."""
    from engine import secretbox

    value = config.storage.s3_secret_access_key
    if not secretbox.is_sealed(value):
        return value
    try:
        return str(secretbox.Keyring.from_config(config.secrets).open(value, "storage.s3_secret_access_key"))
    except secretbox.SecretError as exc:
        raise ConfigError(f"storage.s3_secret_access_key: cannot open the sealed value: {exc}") from exc


def blob_store(config: Config, pool: asyncpg.Pool | None) -> BlobStore:
    """The blob store ``config.storage`` selects; ``pool`` is the metadata database's (database store)."""
    if config.storage.type == "s3":
        return S3BlobStore(config.storage, s3_secret(config))
    if pool is None:
        raise ConfigError("storage.type database: this process has no database connection")
    return DatabaseBlobStore(pool)
