"""The STM window: FIFO, replays, chain links, purity."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory.stm import push_page
from schemas.records import ChainLink, Page
from tests.support.builders import page


def ids(pages: list[Page]) -> list[str]:
    return [page.page_id for page in pages]


def test_fifo_evicts_oldest_first() -> None:
    window: list[Page] = []
    evicted_all: list[Page] = []
    for n in range(5):
        window, evicted = push_page(window, page(n), capacity=3)
        evicted_all += evicted
    assert ids(window) == ["p2", "p3", "p4"]
    assert ids(evicted_all) == ["p0", "p1"]


def test_capacity_one() -> None:
    window, evicted = push_page([], page(1), capacity=1)
    assert (ids(window), evicted) == (["p1"], [])
    window, evicted = push_page(window, page(2), capacity=1)
    assert (ids(window), ids(evicted)) == (["p2"], ["p1"])


def test_lowered_capacity_evicts_every_excess_page_oldest_first() -> None:
    window = [page(n) for n in range(7)]  # held under a capacity of 7, now 3
    new_window, evicted = push_page(window, page(7), capacity=3)
    assert ids(new_window) == ["p5", "p6", "p7"]
    assert ids(evicted) == ["p0", "p1", "p2", "p3", "p4"]


def test_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError, match="capacity"):
        push_page([], page(1), capacity=0)


def test_replayed_page_is_a_no_op_even_when_full() -> None:
    window = [page(1), page(2)]
    replay = page(1).model_copy(update={"query": "changed"})
    new_window, evicted = push_page(window, replay, capacity=2)
    assert new_window == window
    assert evicted == []


def test_continuation_links_previous_page_and_shares_summary() -> None:
    first = page(1, summary="Paris trip")
    other = page(2, summary="Cooking")
    second = page(3, chain_id="p1", prev="p1", summary="Paris trip, museums")
    window, _ = push_page([first, other], second, capacity=5)
    by_id = {page.page_id: page for page in window}
    assert by_id["p1"].chain == ChainLink(
        chain_id="p1", prev=None, next="p3", summary="Paris trip, museums"
    )
    assert by_id["p2"].chain == other.chain
    assert by_id["p3"].chain == second.chain


def test_summary_reaches_every_page_of_the_chain() -> None:
    window: list[Page] = []
    window, _ = push_page(window, page(1, summary="s1"), capacity=5)
    window, _ = push_page(window, page(2, chain_id="p1", prev="p1", summary="s2"), capacity=5)
    window, _ = push_page(window, page(3, chain_id="p1", prev="p2", summary="s3"), capacity=5)
    assert [page.chain.summary for page in window] == ["s3", "s3", "s3"]
    assert [page.chain.next for page in window] == ["p2", "p3", None]
    assert [page.chain.prev for page in window] == [None, "p1", "p2"]


def test_evicted_page_leaves_with_its_next_link() -> None:
    window, _ = push_page([], page(1), capacity=1)
    window, evicted = push_page(window, page(2, chain_id="p1", prev="p1", summary="s"), 1)
    assert evicted[0].chain.next == "p2"
    assert evicted[0].chain.summary == "s"


def test_inputs_are_not_mutated() -> None:
    window = [page(1), page(2)]
    snapshot = [page.model_dump() for page in window]
    _, evicted = push_page(window, page(3, chain_id="p1", prev="p1", summary="x"), 2)
    assert [page.model_dump() for page in window] == snapshot
    assert evicted[0].chain.next == "p3"
    assert window[0].chain.next is None


# A push is (page number, continues the previous page?, summary).
pushes = st.lists(
    st.tuples(st.integers(0, 30), st.booleans(), st.sampled_from(["", "a", "b"])),
    max_size=40,
)


def build(number: int, continues: bool, summary: str, last: Page | None) -> Page:
    if continues and last is not None and last.page_id != f"p{number}":
        return page(number, chain_id=last.chain.chain_id, prev=last.page_id, summary=summary)
    return page(number, summary=summary)


@given(pushes, st.integers(1, 8))
def test_window_never_exceeds_capacity_and_loses_nothing(
    steps: list[tuple[int, bool, str]], capacity: int
) -> None:
    window: list[Page] = []
    evicted_all: list[Page] = []
    seen: list[str] = []
    last: Page | None = None
    for number, continues, summary in steps:
        page = build(number, continues, summary, last)
        snapshot = [held.model_dump() for held in window]
        new_window, evicted = push_page(window, page, capacity)
        assert [held.model_dump() for held in window] == snapshot
        assert len(new_window) <= capacity
        if page.page_id not in ids(window):
            seen.append(page.page_id)
            last = page
        window = new_window
        evicted_all += evicted
    # every distinct page pushed is in the window or was evicted, exactly once, in order
    # (a page evicted and pushed again later counts again)
    assert ids(evicted_all) + ids(window) == seen
