"""Qdrant Edge keeps deleted points until a vacuum."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest

from adapters.ports import PAGES, Point
from adapters.stores.edge import EdgeStore

pytestmark = pytest.mark.asyncio
DIM, LIVE, ROUNDS = 16, 1500, 6


def disk_bytes(folder: Path) -> int:
    """Blocks in use, not apparent sizes: Edge preallocates sparse files."""
    return sum(f.stat().st_blocks * 512 for f in folder.rglob("*") if f.is_file())


def pages(round_: int, rng: np.random.Generator) -> list[Point]:
    """LIVE new pages of 10 users, as pages evicted with their segments give way to new ones."""
    points = []
    for i in range(LIVE):
        vector = rng.standard_normal(DIM)
        points.append(
            Point(
                str(uuid.uuid5(uuid.NAMESPACE_URL, f"page-{round_}-{i}")),
                (vector / np.linalg.norm(vector)).tolist(),
                {"user_id": f"u{i % 10}", "text": "x" * 400, "round": round_},
            )
        )
    return points


async def test_a_vacuum_gives_back_the_space_of_deleted_points(tmp_path: Path) -> None:
    store = EdgeStore(tmp_path / "qdrant")
    await store.ensure_collections(DIM)
    try:
        assert await store.vacuum() == 0, "nothing written: nothing to rewrite"
        rng = np.random.default_rng(3)
        previous: list[Point] = []
        for round_ in range(ROUNDS):
            current = pages(round_, rng)
            await store.upsert(PAGES, current)
            await store.delete(PAGES, [p.id for p in previous])
            previous = current
        await store.flush()
        churned = disk_bytes(tmp_path / "qdrant" / PAGES)
        live = await store.scroll(PAGES, "u3")
        assert await store.vacuum() == 1, "the pages collection, and only it, was rewritten"
        vacuumed = disk_bytes(tmp_path / "qdrant" / PAGES)
        assert vacuumed < churned * 0.7, (churned, vacuumed)
        assert await store.count(PAGES) == LIVE
        assert await store.scroll(PAGES, "u3") == live
        assert {p.payload["round"] for p in live} == {ROUNDS - 1}
        assert await store.vacuum() == 0, "no write since: nothing to rewrite"
    finally:
        await store.close()
