"""The STM window: its table entry (keyed by user) names the pages, the store holds them. An
entry that no longer matches the store, or is of another key generation, or is gone (a worker
that lost its table), gives way to the store's STM tier: the window comes out the same."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from adapters.keyring import MAGIC
from adapters.ports import PAGES as PAGE_POINTS
from adapters.repository import LEAVING
from schemas.codec import decode
from schemas.records import EvictedPage, MidTermInput
from schemas.topics import MTM, PAGES
from tests.support.fakes import Pipeline, make_deps
from tests.support.pipelines import ingest

pytestmark = pytest.mark.filterwarnings("ignore")


def evicted_of(opened: Any) -> EvictedPage | None:
    record = decode(MidTermInput, opened.plain).root
    return record if isinstance(record, EvictedPage) else None


async def window_after(pipeline: Pipeline, user: str) -> list[str]:
    return [page.turn_id for page in await pipeline.deps.repo.stm_pages(user)]


async def test_the_entry_holds_ids_only_in_the_windows_order() -> None:
    pipeline = Pipeline(await make_deps(stm_capacity=3))
    await ingest(pipeline, "ann", 5)
    await pipeline.drain()
    entry = pipeline.tables["stm"]["ann"]
    stored = await pipeline.deps.repo.stm_pages("ann")
    assert entry["pages"] == [page.page_id for page in stored]
    assert set(entry) == {"gen", "pages"}, "no text, nothing to seal"


@pytest.mark.parametrize(
    "damage",
    ["gone", "stale page", "a page that left", "other generation", "older version", "no list"],
)
async def test_a_wrong_entry_gives_way_to_the_store(damage: str) -> None:
    intact = Pipeline(await make_deps(stm_capacity=3))
    damaged = Pipeline(await make_deps(stm_capacity=3))
    for pipeline in (intact, damaged):
        await ingest(pipeline, "ann", 4)
        await pipeline.drain()
    table = damaged.tables["stm"]
    if damage == "gone":
        del table["ann"]
    elif damage == "stale page":
        table["ann"] = {**table["ann"], "pages": [str(uuid.uuid4()), *table["ann"]["pages"][1:]]}
    elif damage == "a page that left":  # the entry of before an eviction whose write was lost
        left = (await damaged.deps.repo.mid_term_pages("ann"))[-1][1].page_id
        table["ann"] = {**table["ann"], "pages": [left, *table["ann"]["pages"]]}
    elif damage == "no list":
        table["ann"] = {"gen": table["ann"]["gen"]}
    elif damage == "other generation":
        table["ann"] = {**table["ann"], "gen": table["ann"]["gen"] + 1}
    else:  # the sealed window an older version kept, base64 text
        table["ann"] = "AG1vczEAAAAAAAAAAAAD"
    for pipeline in (intact, damaged):
        await ingest(pipeline, "ann", 3, start=4)
        await pipeline.drain()
    assert await window_after(damaged, "ann") == await window_after(intact, "ann")
    assert await window_after(damaged, "ann") == ["t004", "t005", "t006"]
    # no page left STM twice: a page the entry still named after it left is not evicted again
    assert len(damaged.topics[MTM]) == len(intact.topics[MTM])
    mid = await damaged.deps.repo.mid_term_pages("ann")
    assert sorted(page.turn_id for _, page in mid) == ["t000", "t001", "t002", "t003"]


async def test_an_evicted_page_leaves_with_its_vector_and_every_page_keeps_its_own() -> None:
    """The window is read without vectors and changed in place: what leaves for MTM carries
    the vector it was stored with, and no page of either tier loses its vector."""
    pipeline = Pipeline(await make_deps(stm_capacity=3))
    await ingest(pipeline, "ann", 3)
    await pipeline.drain(until=PAGES)
    first = {p.page_id: p.vector for p in await pipeline.deps.repo.stm_pages("ann")}
    await ingest(pipeline, "ann", 3, start=3)
    await pipeline.drain()
    sealed = [sent.value for sent in pipeline.topics[MTM] if sent.value.startswith(MAGIC)]
    left = [opened for raw in sealed if (opened := await pipeline.deps.keyring.open(raw))]
    handed = {e.page.page_id: e.page.vector for e in map(evicted_of, left) if e is not None}
    assert handed == first, "the three first pages left, each with its stored vector"
    stored = await pipeline.deps.store.retrieve(PAGE_POINTS, list(first), with_vectors=True)
    assert len(stored) == len(first)
    for point in stored:
        assert point.vector == pytest.approx(first[point.id]), "the vector as first stored"
    assert all(p.payload["tier"] == "mtm" for p in stored)


async def test_a_page_deleted_as_it_leaves_is_neither_brought_back_nor_handed_over() -> None:
    """A user's DELETE in the response service removes the pages at once; an eviction in
    flight then changes nothing of them and sends nothing on."""
    pipeline = Pipeline(await make_deps(stm_capacity=2))
    await ingest(pipeline, "ann", 2)
    await pipeline.drain()
    repo = pipeline.deps.repo
    update_pages = repo.update_pages

    async def deleted_first(pages: Any, tier: str, segment_id: str | None = None) -> None:
        if tier == LEAVING:
            await repo.delete_pages([page.page_id for page in pages])
        await update_pages(pages, tier, segment_id)

    repo.update_pages = deleted_first  # type: ignore[method-assign]
    await ingest(pipeline, "ann", 1, start=2)
    await pipeline.drain()
    assert pipeline.topics[MTM] == [], "nothing handed over"
    assert [p.turn_id for p in await repo.stm_pages("ann")] == ["t001", "t002"]
    assert await repo.mid_term_pages("ann") == []
    assert await repo.count_pages("ann") == 2, "the deleted page did not come back"
