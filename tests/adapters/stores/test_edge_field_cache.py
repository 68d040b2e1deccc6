"""Qdrant Edge searches for a few payload fields read them from a field cache: the same fields
as the shard holds, after every kind of write, even a write that was in a worker thread while
a search ran; and the cache stays within its bound."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from adapters.ports import PAGES, Point
from adapters.stores.edge import EdgeStore
from adapters.stores.field_cache import FieldCache

DIM = 8
FIELDS = ["seq", "segment_id"]


def pages(count: int, segment: str | None, user: str = "u1") -> list[Point]:
    rng = np.random.default_rng(3)
    found = []
    for i in range(count):
        vector = rng.standard_normal(DIM)
        payload = {"user_id": user, "seq": i, "segment_id": segment, "text": "x" * 50}
        found.append(Point(f"{i:032x}", (vector / np.linalg.norm(vector)).tolist(), payload))
    return found


async def fields_found(store: EdgeStore, user: str = "u1") -> dict[str, dict[str, Any]]:
    hits = await store.search(PAGES, user, [1.0] * DIM, 100, fields=FIELDS)
    return {hit.id: hit.payload for hit in hits}


async def fields_stored(store: EdgeStore, user: str = "u1") -> dict[str, dict[str, Any]]:
    points = await store.scroll(PAGES, user)
    return {p.id: {name: p.payload[name] for name in FIELDS} for p in points}


@pytest.fixture
async def store(tmp_path: Path) -> Any:
    opened = EdgeStore(tmp_path / "qdrant")
    await opened.ensure_collections(DIM)
    yield opened
    await opened.close()


@pytest.mark.asyncio
async def test_cached_fields_are_the_stored_fields_after_every_write(store: EdgeStore) -> None:
    await store.upsert(PAGES, pages(40, None))
    assert await fields_found(store) == await fields_stored(store)
    assert len(store._fields) == 40, "the first search kept them"
    assert await fields_found(store) == await fields_stored(store)  # from the cache
    moved = pages(10, "segment-a")  # ten pages placed in a segment
    await store.upsert(PAGES, moved)
    found = await fields_found(store)
    assert found == await fields_stored(store)
    assert sum(1 for f in found.values() if f["segment_id"] == "segment-a") == 10
    await store.delete(PAGES, [p.id for p in moved[:5]])
    assert len(await fields_found(store)) == 35
    await store.delete_user(PAGES, "u1")
    assert await fields_found(store) == {}
    await store.upsert(PAGES, pages(3, "segment-b"))  # the same ids again, other fields
    assert await fields_found(store) == await fields_stored(store)
    assert {f["segment_id"] for f in (await fields_found(store)).values()} == {"segment-b"}


class SlowUpdates:
    """A shard whose updates wait in their (worker) thread before they land."""

    def __init__(self, shard: Any, started: threading.Event) -> None:
        self._shard, self._started = shard, started

    def update(self, operation: Any) -> Any:
        self._started.set()
        time.sleep(0.3)
        return self._shard.update(operation)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._shard, name)


@pytest.mark.asyncio
async def test_a_search_during_a_write_in_a_thread_leaves_no_old_fields(store: EdgeStore) -> None:
    await store.upsert(PAGES, pages(40, None))
    started = threading.Event()
    store._shards[PAGES] = SlowUpdates(store._shards[PAGES], started)
    # 40 points: more than run on the loop, so the update goes to a worker thread
    write = asyncio.create_task(store.upsert(PAGES, pages(40, "segment-a")))
    assert await asyncio.to_thread(started.wait, 5.0), "the update started"
    during = await fields_found(store)  # the old fields, read and cached meanwhile
    assert {f["segment_id"] for f in during.values()} == {None}
    await write
    after = await fields_found(store)
    assert {f["segment_id"] for f in after.values()} == {"segment-a"}


@pytest.mark.asyncio
async def test_a_callers_change_to_a_payload_does_not_reach_the_cache(store: EdgeStore) -> None:
    await store.upsert(PAGES, pages(5, None))
    for payload in (await fields_found(store)).values():
        payload["segment_id"] = "changed by a caller"
    assert await fields_found(store) == await fields_stored(store)


@pytest.mark.asyncio
@pytest.mark.parametrize("bound", [10, 0])
async def test_the_cache_keeps_at_most_its_bound(tmp_path: Path, bound: int) -> None:
    store = EdgeStore(tmp_path / "qdrant", field_cache_points=bound)
    await store.ensure_collections(DIM)
    try:
        await store.upsert(PAGES, pages(60, "s"))
        for _ in range(3):
            assert await fields_found(store) == await fields_stored(store)
            assert len(store._fields) <= bound
    finally:
        await store.close()


def test_least_recently_used_fields_go_first() -> None:
    cache = FieldCache(max_points=2)
    cache.put("c", ("f",), {"a": {"f": 1}, "b": {"f": 2}})
    assert cache.get("c", ("f",), ["a"]) == {"a": {"f": 1}}  # a is now the most recent
    cache.put("c", ("f",), {"c": {"f": 3}})
    assert cache.get("c", ("f",), ["a", "b", "c"]) == {"a": {"f": 1}, "c": {"f": 3}}
    cache.forget("c", ["a"])
    assert cache.get("c", ("f",), ["a"]) == {}
    assert FieldCache(max_points=0).get("c", ("f",), ["a"]) == {}
