"""Qdrant Edge with one search thread per collection (``MEMORYOS_EDGE_SEARCH_THREADS``, the
default) answers exactly as with Edge's own default (a thread per core)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from adapters.ports import PAGES, Point
from adapters.settings import Settings
from adapters.stores import build_store
from adapters.stores.edge import EdgeStore

DIM = 16


def points(rng: np.random.Generator) -> list[Point]:
    found = []
    for i in range(600):
        vector = rng.standard_normal(DIM)
        found.append(
            Point(
                f"{i:032x}",
                (vector / np.linalg.norm(vector)).tolist(),
                {"user_id": f"u{i % 6}", "page_id": str(i), "seq": i},
                sparse={i % 40: 1.0 + i / 1000, 40 + i % 7: 0.5},  # no two scores tie
            )
        )
    return found


async def answers(store: EdgeStore, rng: np.random.Generator) -> list[list[tuple[float, str]]]:
    found = []
    for index in range(30):
        user, vector = f"u{index % 6}", rng.standard_normal(DIM).tolist()
        sparse = {index % 40: 1.0}
        for hits in (
            await store.search(PAGES, user, vector, 50, fields=["page_id", "seq"]),
            await store.search(PAGES, user, vector, 50, sparse=sparse, lexical_only=True),
            await store.search(PAGES, user, vector, 10, sparse=sparse),
        ):
            # pages of equal score may come in either order
            found.append(sorted((-round(hit.score, 5), hit.id) for hit in hits))
    return found


@pytest.mark.asyncio
async def test_one_search_thread_answers_as_edges_default(tmp_path: Path) -> None:
    results = []
    for threads in (1, 0):
        store = EdgeStore(tmp_path / f"threads-{threads}", search_threads=threads)
        await store.ensure_collections(DIM)
        try:
            await store.upsert(PAGES, points(np.random.default_rng(5)))
            results.append(await answers(store, np.random.default_rng(9)))
        finally:
            await store.close()
    assert results[0] == results[1]
    assert all(results[0]), "every search found pages"


def test_the_setting_reaches_the_store(tmp_path: Path) -> None:
    store = build_store(
        Settings(data_dir=tmp_path, edge_search_threads=3, edge_field_cache_points=7)
    )
    assert isinstance(store, EdgeStore)
    assert store._search_threads == 3
    assert store._fields.max_points == 7
    assert Settings().edge_search_threads == 1


@pytest.mark.asyncio
async def test_each_start_uses_the_threads_it_is_given(tmp_path: Path) -> None:
    """Edge keeps what a start saved unless told otherwise: 0 must still mean a thread per
    core after a start with 1, not the 1 saved then."""
    for threads, expected in ((1, 1), (0, os.cpu_count()), (3, 3), (0, os.cpu_count())):
        store = EdgeStore(tmp_path, search_threads=threads)
        await store.ensure_collections(DIM)
        await store.close()
        saved = json.loads((tmp_path / PAGES / "edge_config.json").read_text())
        assert saved["max_search_threads"] == expected, threads
