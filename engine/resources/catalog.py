"""The resource center's metadata (tables ``resource`` and ``resource_reference``) and its uploads.

Every upload of a path adds a version (1, 2, 3 ...); earlier versions stay, downloadable; a restore adds a
version equal to an older one (sharing its stored content). The content of a version lives in the blob
store (engine/storage/blobs.py) under ``resources/<project code>/<random>``. Limits: one file at most
``storage.max_file_bytes``, a project's files together (distinct contents) at most
``storage.max_project_bytes``; past either an upload is refused (:class:`LimitExceeded`) and leaves nothing.

Workflow versions record the files their tasks use in ``resource_reference`` (engine/workflows/definitions.py
calls :func:`pin_task`); a path some workflow version uses cannot be deleted (:class:`InUse` names them).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterable, Mapping
from dataclasses import dataclass
from typing import Any

import asyncpg

from core import logs
from core.errors import PorpoiseError
from engine.config import StorageConfig
from engine.resources import refs
from engine.storage.blobs import BlobStore, BlobTooLarge, StoredBlob
from engine.workflows.model import DefinitionError

log = logs.get(__name__)

_COLUMNS = (
    "id, project_code, full_name, version, size, sha256, blob_key, description, restored_from, user_id, create_time"
)


class ResourceError(PorpoiseError):
    """A resource-center request cannot be done; the message says why."""


class LimitExceeded(ResourceError):
    """An upload went past the size limit of one file or of its project; nothing was stored."""


class InUse(ResourceError):
    """A path workflow versions use; ``users`` lists them (``{workflow, code, version, task}``)."""

    def __init__(self, message: str, users: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.users = users


@dataclass(frozen=True)
class Version:
    id: int
    project_code: int
    full_name: str
    version: int
    size: int
    sha256: str
    blob_key: str
    description: str | None
    restored_from: int | None
    user_id: int | None
    create_time: Any

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> Version:
        return cls(**{k: row[k] for k in cls.__dataclass_fields__})

    def public(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "path": self.full_name,
            "version": self.version,
            "size": self.size,
            "sha256": self.sha256,
            "description": self.description,
            "restored_from": self.restored_from,
            "user_id": self.user_id,
            "create_time": self.create_time,
        }


async def usage(db: asyncpg.Pool | asyncpg.Connection, project_code: int) -> int:
    """Bytes a project's resources take in the store (a content shared by restored versions counted once)."""
    value = await db.fetchval(
        "SELECT coalesce(sum(size), 0) FROM (SELECT DISTINCT blob_key, size FROM resource WHERE project_code = $1) s",
        project_code,
    )
    return int(value)


async def latest(db: asyncpg.Pool | asyncpg.Connection, project_code: int, name: str) -> Version | None:
    row = await db.fetchrow(
        f"SELECT {_COLUMNS} FROM resource WHERE project_code = $1 AND full_name = $2 ORDER BY version DESC LIMIT 1",
        project_code,
        name,
    )
    return Version.of(row) if row is not None else None


async def version_of(
    db: asyncpg.Pool | asyncpg.Connection, project_code: int, name: str, version: int | None
) -> Version | None:
    """One version of a path (None: the newest), or None when there is no such version."""
    if version is None:
        return await latest(db, project_code, name)
    row = await db.fetchrow(
        f"SELECT {_COLUMNS} FROM resource WHERE project_code = $1 AND full_name = $2 AND version = $3",
        project_code,
        name,
        version,
    )
    return Version.of(row) if row is not None else None


async def versions(db: asyncpg.Pool | asyncpg.Connection, project_code: int, name: str) -> list[Version]:
    rows = await db.fetch(
        f"SELECT {_COLUMNS} FROM resource WHERE project_code = $1 AND full_name = $2 ORDER BY version DESC",
        project_code,
        name,
    )
    return [Version.of(r) for r in rows]


async def listing(db: asyncpg.Pool | asyncpg.Connection, project_code: int, folder: str) -> dict[str, Any]:
    """The folder's direct entries: sub-folders (with their file counts and sizes) and files (newest
    version of each). ``folder`` is "" for the top."""
    prefix = f"{folder.rstrip('/')}/" if folder else ""
    rows = await db.fetch(
        f"SELECT DISTINCT ON (full_name) {_COLUMNS}, count(*) OVER (PARTITION BY full_name) AS versions"
        " FROM resource WHERE project_code = $1 AND starts_with(full_name, $2)"
        " ORDER BY full_name, version DESC",
        project_code,
        prefix,
    )
    folders: dict[str, dict[str, Any]] = {}
    files = []
    for r in rows:
        rest = r["full_name"][len(prefix) :]
        head, sep, _ = rest.partition("/")
        if sep:
            entry = folders.setdefault(head, {"name": head, "path": prefix + head, "files": 0, "size": 0})
            entry["files"] += 1
            entry["size"] += r["size"]
        else:
            item = Version.of(r).public()
            item["name"] = head
            item["versions"] = r["versions"]
            files.append(item)
    return {"folder": folder.rstrip("/"), "folders": sorted(folders.values(), key=lambda f: f["name"]), "files": files}


async def upload(
    pool: asyncpg.Pool,
    blobs: BlobStore,
    limits: StorageConfig,
    project_code: int,
    name: str,
    chunks: AsyncIterable[bytes],
    user_id: int | None,
    description: str | None = None,
) -> Version:
    """Store a new version of ``name``; LimitExceeded past a limit (nothing stored)."""
    refs.check_name(name)
    remaining = limits.max_project_bytes - await usage(pool, project_code)
    if remaining <= 0:
        raise LimitExceeded(f"the project's resources already take its limit of {limits.max_project_bytes} bytes")
    cap = min(limits.max_file_bytes, remaining)
    key = f"resources/{project_code}/{uuid.uuid4().hex}"
    try:
        stored = await blobs.put(key, chunks, max_size=cap)
    except BlobTooLarge:
        if cap == limits.max_file_bytes:
            raise LimitExceeded(
                f"{name}: larger than the limit of {limits.max_file_bytes} bytes a file (storage.max_file_bytes);"
                " nothing was stored"
            ) from None
        raise LimitExceeded(
            f"{name}: the project would go past its limit of {limits.max_project_bytes} bytes"
            f" (storage.max_project_bytes; {remaining} bytes left); nothing was stored"
        ) from None
    try:
        return await _add_version(pool, limits, project_code, name, stored, user_id, description, None)
    except BaseException:
        await blobs.delete(key)
        raise


async def lock_project(conn: asyncpg.Connection, project_code: int) -> None:
    """Inside a transaction: the project's resource lock, held until it ends. Version numbers, the project's
    total, deletes and the references a workflow save pins are decided under it: a save cannot pin a file a
    delete is removing, a restore cannot add a version of one."""
    await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('resource', $1))", project_code)


async def _add_version(
    pool: asyncpg.Pool,
    limits: StorageConfig,
    project_code: int,
    name: str,
    stored: StoredBlob,
    user_id: int | None,
    description: str | None,
    restored_from: int | None,
) -> Version:
    async with pool.acquire() as conn, conn.transaction():
        # one writer per project at a time: the version number and the project total are decided under it
        await lock_project(conn, project_code)
        if restored_from is not None and await version_of(conn, project_code, name, restored_from) is None:
            raise ResourceError(f"resource {name!r} has no version {restored_from} (deleted meanwhile)")
        shared = await conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM resource WHERE project_code = $1 AND blob_key = $2)", project_code, stored.key
        )
        if not shared and await usage(conn, project_code) + stored.size > limits.max_project_bytes:
            raise LimitExceeded(
                f"{name}: the project would go past its limit of {limits.max_project_bytes} bytes"
                " (storage.max_project_bytes); nothing was stored"
            )
        row = await conn.fetchrow(
            "INSERT INTO resource (project_code, full_name, version, size, sha256, blob_key, description,"
            " restored_from, user_id) SELECT $1, $2::varchar, coalesce(max(version), 0) + 1, $3, $4, $5, $6, $7, $8"
            f" FROM resource WHERE project_code = $1 AND full_name = $2::varchar RETURNING {_COLUMNS}",
            project_code,
            name,
            stored.size,
            stored.sha256,
            stored.key,
            description,
            restored_from,
            user_id,
        )
    return Version.of(row)


async def restore(
    pool: asyncpg.Pool, limits: StorageConfig, project_code: int, name: str, version: int, user_id: int | None
) -> Version:
    """A new version of ``name`` equal to ``version`` (same content, no copy)."""
    old = await version_of(pool, project_code, name, version)
    if old is None:
        raise ResourceError(f"resource {name!r} has no version {version}")
    stored = StoredBlob(old.blob_key, old.size, old.sha256)
    return await _add_version(pool, limits, project_code, name, stored, user_id, old.description, old.version)


async def users(
    db: asyncpg.Pool | asyncpg.Connection, project_code: int, name: str, folder: bool = False
) -> list[dict[str, Any]]:
    """The workflow versions whose tasks use ``name`` (or, with ``folder``, any file under it), newest first."""
    cond = "starts_with(r.full_name, $2)" if folder else "r.full_name = $2"
    rows = await db.fetch(
        "SELECT DISTINCT d.name AS workflow, r.workflow_code, r.workflow_version, r.full_name, r.version,"
        " t.name AS task FROM resource_reference r"
        " JOIN workflow_definition d ON d.code = r.workflow_code"
        " LEFT JOIN task_definition_log t ON t.code = r.task_code AND t.version = r.workflow_version"
        f" WHERE r.project_code = $1 AND {cond}"
        " ORDER BY d.name, r.workflow_version DESC, r.full_name",
        project_code,
        f"{name.rstrip('/')}/" if folder else name,
    )
    return [
        {
            "workflow": r["workflow"],
            "code": r["workflow_code"],
            "workflow_version": r["workflow_version"],
            "task": r["task"],
            "path": r["full_name"],
            "version": r["version"] if r["version"] is not None else refs.LATEST,
        }
        for r in rows
    ]


async def delete(pool: asyncpg.Pool, blobs: BlobStore, project_code: int, name: str) -> dict[str, Any]:
    """Delete every version of ``name`` (or, when it is a folder, of every file under it); InUse when a
    workflow version uses one of them."""
    async with pool.acquire() as conn, conn.transaction():
        await lock_project(conn, project_code)
        folder = not await conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM resource WHERE project_code = $1 AND full_name = $2)", project_code, name
        )
        used = await users(conn, project_code, name, folder=folder)
        if used:
            listed = ", ".join(sorted({f"{u['workflow']} (version {u['workflow_version']})" for u in used}))
            raise InUse(f"{name!r} is used by workflow(s) {listed}: change or delete them first", used)
        cond = "starts_with(full_name, $2)" if folder else "full_name = $2"
        rows = await conn.fetch(
            f"DELETE FROM resource WHERE project_code = $1 AND {cond} RETURNING full_name, blob_key",
            project_code,
            f"{name.rstrip('/')}/" if folder else name,
        )
    if not rows:
        raise ResourceError(f"resource {name!r} does not exist")
    for key in sorted({r["blob_key"] for r in rows}):
        try:
            await blobs.delete(key)
        except PorpoiseError as exc:  # the rows are gone: an orphan blob wastes space, nothing more
            log.warning("resource content not deleted", key=key, error=str(exc))
    return {"deleted": sorted({r["full_name"] for r in rows}), "versions": len(rows)}


# -- workflow versions ------------------------------------------------------------------------------------


async def pin_task(
    conn: asyncpg.Connection, project_code: int, task_type: str, params: Mapping[str, Any], missing_ok: bool = False
) -> tuple[dict[str, Any], list[refs.Ref]]:
    """A task's params with its resource references pinned (refs.pin) against this project's files."""

    async def newest(name: str) -> int | None:
        found = await latest(conn, project_code, name)
        return found.version if found is not None else None

    async def by_id(rid: int) -> tuple[str, int] | None:
        row = await conn.fetchrow(
            "SELECT full_name, version FROM resource WHERE id = $1 AND project_code = $2", rid, project_code
        )
        return (row["full_name"], row["version"]) if row is not None else None

    return await refs.pin(task_type, params, newest, by_id, missing_ok=missing_ok)


async def record_references(
    conn: asyncpg.Connection,
    project_code: int,
    workflow_code: int,
    workflow_version: int,
    used: list[tuple[int, refs.Ref]],
) -> None:
    """What a saved workflow version's tasks use: ``(task code, ref)`` pairs."""
    if used:
        await conn.executemany(
            "INSERT INTO resource_reference (project_code, full_name, version, workflow_code, workflow_version,"
            " task_code) VALUES ($1, $2, $3, $4, $5, $6)",
            [(project_code, r.name, r.version, workflow_code, workflow_version, code) for code, r in used],
        )


# -- runs ---------------------------------------------------------------------------------------------------


async def for_run(
    db: asyncpg.Pool | asyncpg.Connection, project_code: int, task_type: str, params: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The exact versions a task of a saved workflow version gets (its pins; ``latest``: the newest now),
    each ``{name, version, size, sha256, blob_key}``, or ``{name, version, missing}`` saying why there is none
    (the worker then fails the task before it starts)."""
    try:
        wanted = refs.references(task_type, params)
    except DefinitionError as exc:
        return [{"name": "", "version": None, "missing": f"{exc.field}: {exc.reason}"}]
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for ref in wanted:
        if ref.resource_id is not None:
            out.append({"name": "", "version": None, "missing": f"{ref.field}: no resource with id {ref.resource_id}"})
            continue
        if ref.name in seen:
            continue
        seen.add(ref.name)
        found = await version_of(db, project_code, ref.name, ref.version)
        if found is None:
            what = f"version {ref.version} of " if ref.version is not None else ""
            out.append(
                {
                    "name": ref.name,
                    "version": ref.version,
                    "missing": f"{what}resource {ref.name!r} is not in the project's resource center ({ref.field})",
                }
            )
            continue
        out.append(
            {
                "name": found.full_name,
                "version": found.version,
                "size": found.size,
                "sha256": found.sha256,
                "blob_key": found.blob_key,
            }
        )
    return out


async def is_resource_blob(db: asyncpg.Pool | asyncpg.Connection, blob_key: str, sha256: str) -> bool:
    """Whether ``blob_key`` holds a resource version with that checksum (what a worker may fetch)."""
    return bool(
        await db.fetchval(
            "SELECT EXISTS (SELECT 1 FROM resource WHERE blob_key = $1 AND sha256 = $2)", blob_key, sha256
        )
    )
