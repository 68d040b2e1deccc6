"""The STM window: its table entry (keyed by user) names the pages, the store holds them. An
entry that no longer matches the store, or is of another key generation, or is gone (a worker
that lost its table), gives way to the store's STM tier: the window comes out the same."""

from __future__ import annotations

import uuid

import pytest

from schemas.topics import MTM
from tests.support.fakes import Pipeline, make_deps
from tests.support.pipelines import ingest

pytestmark = pytest.mark.filterwarnings("ignore")


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
