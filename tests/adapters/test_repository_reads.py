"""The repository's scans across users survive one unreadable point."""

from __future__ import annotations

from adapters.ports import PAGES, Point
from adapters.repository import LEAVING
from memory import ids
from tests.support.builders import page
from tests.support.fakes import make_deps


async def test_an_unreadable_leaving_page_is_left_out_not_raised() -> None:
    deps = await make_deps()
    good = page(1, vector=[0.1] * 32, page_id=ids.page_id("u1", "t1"))
    await deps.repo.save_pages([good], LEAVING)
    broken = ids.page_id("bob", "t1")
    payload = {"user_id": "bob", "page_id": broken, "turn_id": "t1", "tier": LEAVING, "seq": "x"}
    await deps.store.upsert(PAGES, [Point(broken, [0.1] * 32, payload)])
    assert [p.page_id for p in await deps.repo.leaving_pages()] == [good.page_id]
