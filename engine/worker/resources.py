"""Resource-center files into a task's working directory, before it starts (docs/RESOURCES.md).

The master resolves the exact versions a task gets and names them in the dispatch (``TaskDispatch.resources``:
path, version, size, sha256, blob key). Workers have no database, so the content comes from the owning
master over the cluster's RPC (``resource.fetch``, streamed: a file of any size passes in bounded memory),
which reads it from the blob store (engine/storage/blobs.py). Each file is checked against its size and
SHA-256 and kept in a cache directory named by checksum (``<cache>/<aa>/<sha256>``), up to
``storage.cache_max_bytes``, least recently used first out; a task whose files are cached starts without
a transfer. Then each is copied (not linked: a task may change its copy) to ``<exec dir>/<path>``, mode
0700, owned by the task's tenant (the cache directory is the worker's alone, 0700).

A file the master could not resolve, a transfer that fails, or content whose checksum differs fails the
task before it starts, with the reason (:class:`ResourceFailure`).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import os
import pwd
import shutil
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from core import logs
from core.errors import PorpoiseError
from engine.resources.refs import ResourceNameError, check_name
from rpc import RpcClient
from rpc.errors import RpcError
from rpc.messages import ResourceFetch

log = logs.get(__name__)

CHUNK = 1 << 20


class ResourceFailure(PorpoiseError):
    """A task's resources cannot be put in place; the message is the reason its task fails with."""


class ResourceCache:
    """Resource contents by checksum on this worker, fetched from masters on a miss."""

    def __init__(self, root: Path, max_bytes: int, rpc: RpcClient, idle_timeout: float = 60.0) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self.rpc = rpc
        self.idle_timeout = idle_timeout
        #: sha256 -> size, least recently used first
        self._entries: collections.OrderedDict[str, int] = collections.OrderedDict()
        #: checksums being placed right now (fetched or found, not yet copied): never evicted meanwhile
        self._in_use: collections.Counter[str] = collections.Counter()
        self._locks: dict[str, asyncio.Lock] = {}
        self._loaded = False
        self.hits = 0
        self.misses = 0

    @property
    def size(self) -> int:
        return sum(self._entries.values())

    def _path(self, sha: str) -> Path:
        return self.root / sha[:2] / sha

    def _load(self) -> None:
        """What an earlier run of the worker left in the cache, oldest use first (mtime is the last use)."""
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.root.chmod(0o700)  # the worker's alone: cached files are other tenants' resources
        found = []
        for sub in self.root.iterdir():
            if sub.is_dir() and len(sub.name) == 2:
                for item in sub.iterdir():
                    if len(item.name) == 64 and item.is_file():
                        st = item.stat()
                        found.append((st.st_mtime, item.name, st.st_size))
            elif sub.name.startswith("tmp-"):
                with contextlib.suppress(OSError):
                    sub.unlink()
        for _, sha, size in sorted(found):
            self._entries[sha] = size

    async def place(
        self,
        files: Sequence[Mapping[str, Any]],
        master: str,
        exec_dir: Path,
        taken: frozenset[str] = frozenset(),
        user: pwd.struct_passwd | None = None,
    ) -> list[str]:
        """Put every file in ``exec_dir``; lines for the task's log. ResourceFailure on the first problem.
        ``taken``: names the task's plugin wrote there (a resource may not replace them)."""
        if not self._loaded:
            await asyncio.to_thread(self._load)
            self._loaded = True
        lines = []
        # files too large for the cache are fetched here first: a name no resource path can take (its
        # segments are checked below), so removing it never removes a placed resource
        staging = exec_dir / f".porpoise-fetch-{uuid.uuid4().hex}"
        for entry in files:
            if entry.get("missing"):
                raise ResourceFailure(str(entry["missing"]))
            name = str(entry.get("name", ""))
            try:
                check_name(name)
            except ResourceNameError as exc:
                raise ResourceFailure(f"resource {name!r}: {exc}") from None
            if name in taken or name.split("/", 1)[0] == staging.name:
                raise ResourceFailure(f"resource {name!r} would replace the task's own file of that name")
            sha, size = str(entry["sha256"]), int(entry["size"])
            target = exec_dir / name
            self._in_use[sha] += 1
            try:
                source, how = await self._get(entry, master, staging)
                await asyncio.to_thread(_copy_in, source, target, exec_dir, user, source.parent == staging)
            finally:
                self._in_use[sha] -= 1
                if not self._in_use[sha]:
                    del self._in_use[sha]
            lines.append(f"resource {name} version {entry.get('version')} ({size} bytes, sha256 {sha[:12]}, {how})")
        with contextlib.suppress(FileNotFoundError):
            await asyncio.to_thread(shutil.rmtree, staging)
        return lines

    async def _get(self, entry: Mapping[str, Any], master: str, staging: Path) -> tuple[Path, str]:
        """A local file holding the entry's content: in the cache, or (not cacheable) fetched into staging."""
        sha, size = str(entry["sha256"]), int(entry["size"])
        if size > self.max_bytes:  # never fits: straight into the attempt's directory
            spot = staging / uuid.uuid4().hex
            await self._fetch(entry, master, spot)
            self.misses += 1
            return spot, "fetched"
        lock = self._locks.setdefault(sha, asyncio.Lock())
        async with lock:
            path = self._path(sha)
            if sha in self._entries and await asyncio.to_thread(_usable, path, size):
                self._entries.move_to_end(sha)
                await asyncio.to_thread(_touch, path)
                self.hits += 1
                return path, "cached"
            self._entries.pop(sha, None)
            await self._fetch(entry, master, path)
            self._entries[sha] = size
            self.misses += 1
            victims = self._evict(sha)
        await self._remove(victims)  # after our lock: each victim's file under its own (never two at once)
        return path, "fetched"

    async def _remove(self, victims: list[str]) -> None:
        """Delete evicted files, each under its checksum's lock, unless fetched again meanwhile (a placement
        of it between the eviction and the delete re-fetched it into the same path)."""
        for sha in victims:
            async with self._locks.setdefault(sha, asyncio.Lock()):
                if sha not in self._entries:
                    await asyncio.to_thread(_unlink_all, [self._path(sha)])

    async def _fetch(self, entry: Mapping[str, Any], master: str, path: Path) -> None:
        sha, size, name = str(entry["sha256"]), int(entry["size"]), entry.get("name")
        await asyncio.to_thread(path.parent.mkdir, parents=True, exist_ok=True)
        tmp = self.root / f"tmp-{uuid.uuid4().hex}"
        await asyncio.to_thread(self.root.mkdir, parents=True, exist_ok=True)
        digest = hashlib.sha256()
        got = 0
        fh = await asyncio.to_thread(open, tmp, "wb")
        try:
            try:
                async with self.rpc.stream(
                    master, ResourceFetch(str(entry["blob_key"]), sha), idle_timeout=self.idle_timeout
                ) as resp:
                    async for chunk in resp.content.iter_chunked(CHUNK):
                        got += len(chunk)
                        if got > size:
                            break
                        digest.update(chunk)
                        await asyncio.to_thread(fh.write, chunk)
            except RpcError as exc:
                raise ResourceFailure(f"resource {name!r}: could not be fetched from master {master}: {exc}") from None
            except (OSError, TimeoutError) as exc:
                raise ResourceFailure(f"resource {name!r}: transfer from master {master} failed: {exc}") from None
            finally:
                await asyncio.to_thread(fh.close)
            if got != size or digest.hexdigest() != sha:
                raise ResourceFailure(
                    f"resource {name!r} version {entry.get('version')}: checksum mismatch (expected {size} bytes"
                    f" with sha256 {sha}, got {got} bytes with sha256 {digest.hexdigest()})"
                )
            await asyncio.to_thread(os.replace, tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                await asyncio.to_thread(os.unlink, tmp)
            raise

    def _evict(self, keep: str) -> list[str]:
        """Forget least recently used files until the cache fits; the checksums forgotten (their files are
        the caller's to remove). On the event loop, which alone changes the entries; never ``keep`` (just
        fetched) nor a file being placed into an attempt's directory."""
        total = self.size
        victims = []
        for sha in list(self._entries):
            if total <= self.max_bytes:
                break
            if sha == keep or sha in self._in_use:
                continue
            total -= self._entries.pop(sha)
            victims.append(sha)
            log.debug("resource cache eviction", sha256=sha)
        return victims


def _unlink_all(paths: list[Path]) -> None:
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def _usable(path: Path, size: int) -> bool:
    try:
        return path.stat().st_size == size
    except FileNotFoundError:
        return False


def _touch(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.utime(path)


def _copy_in(source: Path, target: Path, exec_dir: Path, user: pwd.struct_passwd | None, move: bool) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if move:
        os.replace(source, target)
    else:
        shutil.copyfile(source, target)
    os.chmod(target, 0o700)  # its tenant's alone (chowned below): another tenant's task must not read it
    if user is not None:
        item = target
        while item != exec_dir:
            os.chown(item, user.pw_uid, user.pw_gid)
            item = item.parent
