"""Pages' payloads in Qdrant Edge are kept cached (mapped), the other collections as Edge
keeps them; a folder made before, with cold pages, opens and is read as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adapters.ports import PAGES, PERSONAS, Point
from adapters.stores import edge
from adapters.stores.edge import EdgeStore

DIM = 4


def _persisted(folder: Path, collection: str) -> object:
    return json.loads((folder / collection / "edge_config.json").read_text()).get("payload_memory")


def _point(index: int) -> Point:
    payload = {"user_id": "ann", "page_id": f"p{index}", "seq": index, "text": "x" * 200}
    return Point(f"00000000-0000-5000-8000-{index:012d}", [1.0, 0.0, 0.0, float(index)], payload)


async def test_pages_payloads_are_cached_and_the_rest_left_to_edge(tmp_path: Path) -> None:
    store = EdgeStore(tmp_path)
    await store.ensure_collections(DIM)
    await store.close()
    assert _persisted(tmp_path, PAGES) == "cached"
    assert _persisted(tmp_path, PERSONAS) is None


async def test_a_folder_with_cold_pages_opens_cached_with_its_points(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(edge, "PAYLOAD_MEMORY", {})  # as releases before this one made it
    store = EdgeStore(tmp_path)
    await store.ensure_collections(DIM)
    await store.upsert(PAGES, [_point(i) for i in range(20)])
    await store.close()
    assert _persisted(tmp_path, PAGES) is None
    monkeypatch.undo()
    for _ in range(2):  # and again once it is cached
        store = EdgeStore(tmp_path, field_cache_points=0)
        await store.ensure_collections(DIM)
        try:
            hits = await store.search(PAGES, "ann", [1.0, 0.0, 0.0, 19.0], 5, fields=["seq"])
            assert len(hits) == 5 and all(set(hit.payload) == {"seq"} for hit in hits)
            points = await store.scroll(PAGES, "ann")
            assert sorted(p.payload["seq"] for p in points) == list(range(20))
            assert all(p.payload["text"] == "x" * 200 for p in points)
        finally:
            await store.close()
        assert _persisted(tmp_path, PAGES) == "cached"
