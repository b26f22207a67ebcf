"""The etcd client's watch stream parsing: every response, however the bytes are split."""

from __future__ import annotations

import asyncio
import json
from unittest.mock import Mock

from hypothesis import given, settings
from hypothesis import strategies as st

from registry import EtcdClient
from registry.client import _json_objects


def _reader(chunks: list[bytes]):  # type: ignore[no-untyped-def]
    import aiohttp

    loop = asyncio.get_running_loop()
    reader = aiohttp.StreamReader(Mock(_reading_paused=False), 2**16, loop=loop)
    for c in chunks:
        reader.feed_data(c)
    reader.feed_eof()
    return reader


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(st.text(max_size=5), st.integers(), max_size=3), min_size=1, max_size=6), st.data())
def test_objects_survive_any_split(objs: list[dict], data: st.DataObject) -> None:
    raw = b"".join(json.dumps({"result": o}).encode() + b"\n" for o in objs)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=8)))
    chunks = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True) if raw[a:b]]

    async def collect() -> list[dict]:
        return [o async for o in _json_objects(_reader(chunks))]

    assert [o["result"] for o in asyncio.run(collect())] == objs


async def test_watch_replays_every_historic_event(etcd: EtcdClient, etcd_root: str) -> None:
    first = await etcd.put(f"{etcd_root}/k0", "v")
    for i in range(1, 30):
        await etcd.put(f"{etcd_root}/k{i}", "v")
    seen: list[str] = []
    async for batch in etcd.watch_prefix(etcd_root, first, idle_timeout=1.0):
        seen += [ev.kv.key for ev in batch.events]
        if len(seen) >= 30:
            break
    assert seen == [f"{etcd_root}/k{i}" for i in range(30)]
