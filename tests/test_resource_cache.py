"""The worker's resource fetch and cache (engine/worker/resources.py) against a real RPC server answering
``resource.fetch`` as a master does (streamed bytes, signed calls), and the pure reference rules
(engine/resources/refs.py)."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from engine.resources import refs
from engine.worker.resources import ResourceCache, ResourceFailure
from engine.workflows.model import DefinitionError
from rpc import RpcClient
from rpc.errors import BadRequest
from rpc.messages import ResourceFetch
from rpc.server import RpcServer
from tests.helpers import TEST_SECRET


class FakeMaster:
    """Serves ``resource.fetch`` from a dict (key -> bytes) and counts the fetches."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}
        self.fetched: list[str] = []

    async def fetch(self, msg: ResourceFetch) -> web.Response:
        if msg.blob_key not in self.blobs:
            raise BadRequest(f"no resource version is stored under {msg.blob_key!r}", 404)
        self.fetched.append(msg.blob_key)
        data = self.blobs[msg.blob_key]

        async def body() -> AsyncIterator[bytes]:
            for i in range(0, len(data), 100_000):
                yield data[i : i + 100_000]

        return web.Response(body=body(), content_type="application/octet-stream")


@pytest.fixture
async def master() -> AsyncIterator[tuple[FakeMaster, str]]:
    app = web.Application()
    fake = FakeMaster()
    RpcServer(app, TEST_SECRET).register(ResourceFetch, fake.fetch)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield fake, f"127.0.0.1:{server.port}"
    finally:
        await server.close()


@pytest.fixture
async def rpc() -> AsyncIterator[RpcClient]:
    client = RpcClient(TEST_SECRET, 5.0)
    yield client
    await client.close()


def entry(fake: FakeMaster, name: str, data: bytes, key: str | None = None, version: int = 1) -> dict[str, Any]:
    key = key or f"resources/1/{hashlib.sha256(data).hexdigest()[:16]}"
    fake.blobs[key] = data
    return {
        "name": name,
        "version": version,
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "blob_key": key,
    }


async def test_files_are_fetched_once_then_served_from_the_cache(
    master: tuple[FakeMaster, str], rpc: RpcClient, tmp_path: Path
) -> None:
    fake, address = master
    cache = ResourceCache(tmp_path / "cache", 10 << 20, rpc)
    script = entry(fake, "etl/run.sh", b"echo hi\n")
    module = entry(fake, "lib.py", os.urandom(300_000))
    first = tmp_path / "a1"
    first.mkdir()
    lines = await cache.place([script, module], address, first)
    assert (first / "etl" / "run.sh").read_bytes() == b"echo hi\n"
    # the task's alone (its tenant owns it): another tenant's task on this worker must not read it
    assert os.stat(first / "etl" / "run.sh").st_mode & 0o777 == 0o700
    assert os.stat(tmp_path / "cache").st_mode & 0o777 == 0o700
    assert all("fetched" in line for line in lines) and len(fake.fetched) == 2
    second = tmp_path / "a2"
    second.mkdir()
    lines = await cache.place([script, module], address, second)
    assert all("cached" in line for line in lines) and len(fake.fetched) == 2
    assert (second / "lib.py").read_bytes() == fake.blobs[module["blob_key"]]
    # a task that changes its copy does not change the cache
    (second / "etl" / "run.sh").write_bytes(b"changed")
    third = tmp_path / "a3"
    third.mkdir()
    await cache.place([script], address, third)
    assert (third / "etl" / "run.sh").read_bytes() == b"echo hi\n"
    # a new worker process finds the cache the last one left
    again = ResourceCache(tmp_path / "cache", 10 << 20, rpc)
    fourth = tmp_path / "a4"
    fourth.mkdir()
    assert all("cached" in line for line in await again.place([script, module], address, fourth))


async def test_a_checksum_mismatch_fails_and_caches_nothing(
    master: tuple[FakeMaster, str], rpc: RpcClient, tmp_path: Path
) -> None:
    fake, address = master
    cache = ResourceCache(tmp_path / "cache", 10 << 20, rpc)
    good = entry(fake, "a.py", b"print(1)\n")
    fake.blobs[good["blob_key"]] = b"print(2)\n"  # the store holds other bytes than the version says
    with pytest.raises(ResourceFailure, match=r"'a.py' version 1: checksum mismatch"):
        await cache.place([good], address, tmp_path)
    assert not (tmp_path / "a.py").exists()
    assert [p.name for p in (tmp_path / "cache").rglob("*") if p.is_file()] == []


async def test_missing_and_unfetchable_resources_fail_with_the_reason(
    master: tuple[FakeMaster, str], rpc: RpcClient, tmp_path: Path
) -> None:
    fake, address = master
    cache = ResourceCache(tmp_path / "cache", 10 << 20, rpc)
    why = "resource 'x.sh' is not in the project's resource center (resourceList[0])"
    with pytest.raises(ResourceFailure, match=re.escape(why)):
        await cache.place([{"name": "x.sh", "version": None, "missing": why}], address, tmp_path)
    gone = entry(fake, "g.sh", b"x")
    del fake.blobs[gone["blob_key"]]
    with pytest.raises(ResourceFailure, match="could not be fetched from master"):
        await cache.place([gone], address, tmp_path)
    clash = entry(fake, "script.sh", b"x")
    with pytest.raises(ResourceFailure, match="would replace the task's own file"):
        await cache.place([clash], address, tmp_path, taken=frozenset({"script.sh"}))


async def test_the_cache_keeps_to_its_size_least_recently_used_out(
    master: tuple[FakeMaster, str], rpc: RpcClient, tmp_path: Path
) -> None:
    fake, address = master
    cache = ResourceCache(tmp_path / "cache", 250_000, rpc)
    a, b, c = (entry(fake, f"{n}.bin", os.urandom(100_000)) for n in "abc")
    for e in (a, b, a, c):  # a used again after b: b is the least recently used when c comes
        await cache.place([e], address, tmp_path / "x")
    assert cache.size <= 250_000
    assert cache.hits == 1 and len(fake.fetched) == 3
    await cache.place([a, c], address, tmp_path / "y")
    assert len(fake.fetched) == 3  # a and c still cached
    await cache.place([b], address, tmp_path / "z")
    assert len(fake.fetched) == 4  # b was evicted
    # larger than the whole cache: fetched straight into the attempt's directory, never cached
    big = entry(fake, "big.bin", os.urandom(300_000))
    await cache.place([big], address, tmp_path / "w")
    assert (tmp_path / "w" / "big.bin").stat().st_size == 300_000 and not (tmp_path / "w" / ".fetch").exists()
    assert cache.size <= 250_000


# -- references in task parameters ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("task_type", "params", "expected"),
    [
        ("SHELL", {"resourceList": [{"resourceName": "etl/a.sh"}, "b.py"]}, [("etl/a.sh", None), ("b.py", None)]),
        ("SHELL", {"resourceList": [{"resourceName": "/dolphinscheduler/t1/resources/etl/a.sh", "version": 3}]},
         [("etl/a.sh", 3)]),
        ("SHELL", {"resourceList": [{"fullName": "/etl/a.sh", "res": "a.sh", "id": 5}]}, [("etl/a.sh", None)]),
        ("SPARK", {"mainJar": {"resourceName": "jars/app.jar"}, "mainFile": {"resourceName": "app.py"}},
         [("jars/app.jar", None), ("app.py", None)]),
        ("SPARK", {"mainJar": "/opt/app.jar", "mainFile": "app.py"}, []),  # strings: paths on the worker
        ("MR", {"mainJar": {"resourceName": "/opt/hadoop/streaming.jar"}}, []),  # absolute: on the worker
        ("SHELL", {"mainJar": {"resourceName": "x.jar"}}, []),  # mainJar means nothing to SHELL
    ],
)  # fmt: skip
def test_references_are_read_the_dolphinscheduler_way(
    task_type: str, params: dict[str, Any], expected: list[tuple[str, int | None]]
) -> None:
    assert [(r.name, r.version) for r in refs.references(task_type, params)] == expected


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"resourceList": "a.sh"}, "resourceList"),
        ({"resourceList": [{"resourceName": "../a.sh"}]}, "resourceList[0]"),
        ({"resourceList": [{"resourceName": "a.sh", "version": 0}]}, "resourceList[0].version"),
        ({"resourceList": [{"other": 1}]}, "resourceList[0]"),
    ],
)
def test_malformed_references_are_refused_at_the_field(params: dict[str, Any], field: str) -> None:
    with pytest.raises(DefinitionError) as caught:
        refs.references("SHELL", params)
    assert caught.value.field == field


async def test_pinning_fills_versions_except_latest() -> None:
    stored = {"a.sh": 4, "b.py": 2}

    async def latest(name: str) -> int | None:
        return stored.get(name)

    async def by_id(rid: int) -> tuple[str, int] | None:
        return ("a.sh", 1) if rid == 7 else None

    params = {"resourceList": [{"resourceName": "a.sh"}, {"resourceName": "b.py", "version": "latest"}, {"id": 7}]}
    pinned, found = await refs.pin("SHELL", params, latest, by_id)
    assert pinned["resourceList"] == [
        {"resourceName": "a.sh", "version": 4},
        {"resourceName": "b.py", "version": "latest"},
        {"resourceName": "a.sh", "version": 1},
    ]
    assert [(r.name, r.version) for r in found] == [("a.sh", 4), ("b.py", None), ("a.sh", 1)]
    with pytest.raises(DefinitionError, match="not in the project's resource center"):
        await refs.pin("SHELL", {"resourceList": ["c.sh"]}, latest, by_id)
    kept, _ = await refs.pin("SHELL", {"resourceList": ["c.sh"]}, latest, by_id, missing_ok=True)
    assert kept["resourceList"] == [{"resourceName": "c.sh", "version": "latest"}]


def test_a_spark_main_file_may_be_a_resource() -> None:
    import datetime as dt

    from engine.tasks.base import TaskContext
    from engine.tasks.spark import SparkTask

    params = {"mainFile": {"resourceName": "jobs/agg.py", "version": 2}, "mainArgs": "--x 1"}
    SparkTask.validate(params)
    ctx = TaskContext(
        task_instance_id=5, task_name="agg", task_params=params, values={}, when=dt.datetime(2026, 5, 17),
        exec_dir=Path("/tmp"),
    )  # fmt: skip
    assert " ".join(SparkTask().launch(ctx).argv).endswith(" jobs/agg.py --x 1")  # where the worker put it
    assert [(r.name, r.version) for r in refs.references("SPARK", params)] == [("jobs/agg.py", 2)]


async def test_files_too_large_to_cache_are_placed_whatever_their_names(
    master: tuple[FakeMaster, str], rpc: RpcClient, tmp_path: Path
) -> None:
    # fetched straight into the attempt's directory through a staging folder that is removed afterwards:
    # a resource named like that folder (once ".fetch") must survive its removal
    fake, address = master
    cache = ResourceCache(tmp_path / "cache", 1000, rpc)
    big, other = os.urandom(5000), os.urandom(6000)
    files = [entry(fake, ".fetch/big.bin", big), entry(fake, "other.bin", other)]
    exec_dir = tmp_path / "attempt"
    exec_dir.mkdir()
    lines = await cache.place(files, address, exec_dir)
    assert all("fetched" in line for line in lines), lines
    assert (exec_dir / ".fetch" / "big.bin").read_bytes() == big and (exec_dir / "other.bin").read_bytes() == other
    assert sorted(p.name for p in exec_dir.iterdir()) == [".fetch", "other.bin"]  # no staging folder left


async def test_a_file_being_placed_is_not_evicted_meanwhile(
    master: tuple[FakeMaster, str], rpc: RpcClient, tmp_path: Path
) -> None:
    # another task's placement fetching a new file evicts the least recently used ones: not one that a
    # placement is copying into its attempt's directory at that moment (its copy would find no file)
    fake, address = master
    cache = ResourceCache(tmp_path / "cache", 150_000, rpc)
    a, b = (entry(fake, f"{n}.bin", os.urandom(100_000)) for n in "ab")
    await cache.place([a], address, tmp_path / "x")
    cache._in_use[a["sha256"]] += 1  # a placement of a between finding it and copying it
    await cache.place([b], address, tmp_path / "y")
    assert (tmp_path / "cache").exists() and cache.size == 200_000  # over its size while a is in use
    cache._in_use.pop(a["sha256"])
    c = entry(fake, "c.bin", os.urandom(10_000))
    await cache.place([c], address, tmp_path / "z")  # the next fetch evicts a, the least recently used
    assert cache.size <= 150_000 and len(fake.fetched) == 3
    await cache.place([b], address, tmp_path / "w")
    assert len(fake.fetched) == 3  # b stayed


async def test_an_evicted_file_fetched_again_before_its_delete_is_kept(
    master: tuple[FakeMaster, str], rpc: RpcClient, tmp_path: Path
) -> None:
    # the eviction's delete runs after the evicting placement let go of its lock: a placement of the evicted
    # file in between fetches it again into the same path, which the late delete must then leave alone
    fake, address = master
    cache = ResourceCache(tmp_path / "cache", 150_000, rpc)
    a, b = (entry(fake, f"{n}.bin", os.urandom(100_000)) for n in "ab")
    await cache.place([a], address, tmp_path / "x")
    remove = cache._remove

    async def placed_in_between(victims: list[str]) -> None:
        if victims == [a["sha256"]]:  # b's placement evicted a: a placement of a comes first
            cache._remove = remove  # type: ignore[method-assign]
            await cache.place([a], address, tmp_path / "again")  # fetched again (it was evicted)
        await remove(victims)

    cache._remove = placed_in_between  # type: ignore[method-assign]
    await cache.place([b], address, tmp_path / "y")
    assert len(fake.fetched) == 3 and cache._remove == remove
    lines = await cache.place([a], address, tmp_path / "z")
    assert "cached" in lines[0] and (tmp_path / "z" / "a.bin").read_bytes() == fake.blobs[a["blob_key"]]
