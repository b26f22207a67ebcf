"""Resource-center writes that race (engine/resources/catalog.py): a workflow save pinning a file while the file
is deleted, a restore of a version deleted meanwhile. Real PostgreSQL, two connections."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from engine import config as config_mod
from engine.resources import catalog
from engine.resources.catalog import InUse, ResourceError
from engine.storage.blobs import DatabaseBlobStore
from engine.workflows.definitions import save_workflow
from engine.workflows.model import TaskDef, WorkflowDef
from tests.helpers import eventually


async def _chunks(data: bytes) -> AsyncIterator[bytes]:
    yield data


@pytest.fixture
async def pool(fresh_db: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await asyncpg.create_pool(fresh_db, min_size=2, max_size=4)
    yield pool
    await pool.close()


async def _project(pool: asyncpg.Pool) -> int:
    return int(await pool.fetchval("INSERT INTO project (name, code) VALUES ('res', 4242) RETURNING code"))


async def test_a_delete_waits_for_a_save_pinning_the_file_and_then_refuses(pool: asyncpg.Pool) -> None:
    limits = config_mod.load(environ={}).storage
    blobs = DatabaseBlobStore(pool)
    code = await _project(pool)
    await catalog.upload(pool, blobs, limits, code, "etl/run.sh", _chunks(b"echo hi\n"), None)
    task = TaskDef("t", "SHELL", {"rawScript": "bash etl/run.sh", "resourceList": ["etl/run.sh"]})
    wf = WorkflowDef(name="uses", project="res", tasks=(task,))
    saving = await pool.acquire()
    try:
        tx = saving.transaction()
        await tx.start()
        await save_workflow(saving, wf)  # pinned, not yet committed
        deleting = asyncio.ensure_future(catalog.delete(pool, blobs, code, "etl/run.sh"))

        async def waiting_or_done() -> bool:
            if deleting.done():
                return True
            return bool(
                await saving.fetchval(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND query LIKE '%pg_advisory_xact_lock%' AND pid <> pg_backend_pid()"
                )
            )

        await eventually(waiting_or_done, 30, "the delete waiting for the save (or done)")
        await tx.commit()
    finally:
        await pool.release(saving)
    with pytest.raises(InUse, match="used by workflow"):
        await asyncio.wait_for(deleting, 30)
    assert await catalog.latest(pool, code, "etl/run.sh") is not None


async def test_a_restore_of_a_version_deleted_meanwhile_adds_nothing(pool: asyncpg.Pool) -> None:
    limits = config_mod.load(environ={}).storage
    blobs = DatabaseBlobStore(pool)
    code = await _project(pool)
    first = await catalog.upload(pool, blobs, limits, code, "a.txt", _chunks(b"one\n"), None)
    await catalog.delete(pool, blobs, code, "a.txt")
    stored = catalog.StoredBlob(first.blob_key, first.size, first.sha256)  # what the restore read before
    with pytest.raises(ResourceError, match="no version 1"):
        await catalog._add_version(pool, limits, code, "a.txt", stored, None, None, first.version)
    assert await catalog.latest(pool, code, "a.txt") is None
