"""Pages from turns and their place in a dialogue chain."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory.chain import ContinuityVerdict, link_page, page_from_turn
from memory.ids import page_id
from schemas.records import ChainLink
from schemas.turn import TurnEvent
from tests.support.builders import turn

WHEN = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)


def chain_turn(turn_id: str, user_id: str = "u1") -> TurnEvent:
    """A turn whose every field names it, with an assistant, a channel and meta."""
    return turn(
        user_id,
        turn_id=turn_id,
        query=f"q {turn_id}",
        response=f"r {turn_id}",
        timestamp=WHEN,
        assistant_id="bot",
        channel="web",
        meta={"source": turn_id},
    )


def test_page_from_turn() -> None:
    page = page_from_turn(chain_turn("t1"), vector=[0.5, 0.5])
    pid = page_id("u1", "t1")
    assert page.page_id == pid
    assert page.chain == ChainLink(chain_id=pid)
    assert (page.user_id, page.turn_id, page.query, page.response) == ("u1", "t1", "q t1", "r t1")
    assert (page.timestamp, page.assistant_id, page.channel) == (WHEN, "bot", "web")
    assert page.meta == {"source": "t1"}
    assert page.vector == [0.5, 0.5]
    assert page_from_turn(chain_turn("t1")).vector is None


def test_continuous_page_joins_previous_chain() -> None:
    first = link_page(None, page_from_turn(chain_turn("t1")), ContinuityVerdict(False, "s1"))
    second = page_from_turn(chain_turn("t2"))
    linked = link_page(first, second, ContinuityVerdict(True, "s1 and s2"))
    assert linked.chain == ChainLink(
        chain_id=first.page_id, prev=first.page_id, next=None, summary="s1 and s2"
    )
    third = link_page(linked, page_from_turn(chain_turn("t3")), ContinuityVerdict(True, "all"))
    assert third.chain.chain_id == first.page_id
    assert third.chain.prev == second.page_id


def test_discontinuous_page_starts_a_chain() -> None:
    first = page_from_turn(chain_turn("t1"))
    second = page_from_turn(chain_turn("t2"))
    linked = link_page(first, second, ContinuityVerdict(False, "new topic"))
    assert linked.chain == ChainLink(chain_id=second.page_id, summary="new topic")


def test_continuous_without_previous_starts_a_chain() -> None:
    page = page_from_turn(chain_turn("t1"))
    linked = link_page(None, page, ContinuityVerdict(True, "hello"))
    assert linked.chain == ChainLink(chain_id=page.page_id, summary="hello")


def test_replayed_page_keeps_its_links() -> None:
    first = page_from_turn(chain_turn("t1"))
    second = link_page(first, page_from_turn(chain_turn("t2")), ContinuityVerdict(True, "s"))
    replay = link_page(second, page_from_turn(chain_turn("t2")), ContinuityVerdict(True, "other"))
    assert replay.chain == second.chain
    assert replay.chain.prev != replay.page_id


def test_pages_of_different_users_do_not_chain() -> None:
    with pytest.raises(ValueError, match="different users"):
        link_page(
            page_from_turn(chain_turn("t1", "u1")),
            page_from_turn(chain_turn("t2", "u2")),
            ContinuityVerdict(True, ""),
        )


def test_link_page_does_not_mutate() -> None:
    first = page_from_turn(chain_turn("t1"))
    second = page_from_turn(chain_turn("t2"))
    before = (first.model_dump(), second.model_dump())
    link_page(first, second, ContinuityVerdict(True, "s"))
    assert (first.model_dump(), second.model_dump()) == before


def test_clear_continuity_leaves_the_middle_to_the_llm() -> None:
    from memory.chain import clear_continuity

    assert clear_continuity(0.9, 0.5, low=0.15, high=0.6) is True  # mean 0.7
    assert clear_continuity(0.1, 0.0, low=0.15, high=0.6) is False  # mean 0.05
    assert clear_continuity(0.5, 0.2, low=0.15, high=0.6) is None  # mean 0.35: ask
    assert clear_continuity(0.3, 0.0, low=0.15, high=0.6) is False  # exactly low
    assert clear_continuity(0.8, 0.4, low=0.15, high=0.6) is True  # exactly high
