"""``MEMORYOS_EDGE_PAGE_PAYLOADS``: the pages' payloads cold (Edge's default) or cached; the
placement is named at every opening, and a folder switched either way keeps its points."""

from __future__ import annotations

import json
from pathlib import Path

from adapters.ports import PAGES, PERSONAS, Point
from adapters.settings import Settings
from adapters.stores import build_store
from adapters.stores.edge import EdgeStore

DIM = 4


def _persisted(folder: Path, collection: str) -> object:
    return json.loads((folder / collection / "edge_config.json").read_text()).get("payload_memory")


def _point(index: int) -> Point:
    payload = {"user_id": "ann", "page_id": f"p{index}", "seq": index, "text": "x" * 200}
    return Point(f"00000000-0000-5000-8000-{index:012d}", [1.0, 0.0, 0.0, float(index)], payload)


async def test_the_setting_places_the_pages_payloads_and_leaves_the_rest_to_edge(
    tmp_path: Path,
) -> None:
    assert Settings().edge_page_payloads == "cold"
    for placement in ("cold", "cached"):
        folder = tmp_path / placement
        settings = Settings(data_dir=folder, store="edge", edge_page_payloads=placement)
        store = build_store(settings)
        await store.ensure_collections(DIM)
        await store.close()
        edge_folder = next(path.parent.parent for path in folder.rglob("edge_config.json"))
        assert _persisted(edge_folder, PAGES) == placement
        assert _persisted(edge_folder, PERSONAS) is None  # Edge's own


async def test_a_folder_switched_either_way_keeps_its_points(tmp_path: Path) -> None:
    store = EdgeStore(tmp_path, page_payloads="cold")
    await store.ensure_collections(DIM)
    await store.upsert(PAGES, [_point(i) for i in range(20)])
    await store.close()
    for placement in ("cached", "cached", "cold"):
        store = EdgeStore(tmp_path, field_cache_points=0, page_payloads=placement)
        await store.ensure_collections(DIM)
        try:
            hits = await store.search(PAGES, "ann", [1.0, 0.0, 0.0, 19.0], 5, fields=["seq"])
            assert len(hits) == 5
            assert all(set(hit.payload) == {"seq"} for hit in hits)
            points = await store.scroll(PAGES, "ann")
            assert sorted(p.payload["seq"] for p in points) == list(range(20))
            assert all(p.payload["text"] == "x" * 200 for p in points)
        finally:
            await store.close()
        assert _persisted(tmp_path, PAGES) == placement
