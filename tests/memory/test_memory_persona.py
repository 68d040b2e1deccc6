"""Bounded fact queues (user KB, agent traits) and trait merging."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory.persona import append_facts, merge_traits
from memory.text import normalize_fact
from schemas.records import Trait


def test_fifo_keeps_the_newest() -> None:
    queue, dropped = append_facts(["f1", "f2"], ["f3", "f4", "f5"], capacity=3)
    assert queue == ["f3", "f4", "f5"]
    assert dropped == ["f1", "f2"]


def test_capacity_one() -> None:
    assert append_facts(["old"], ["new"], capacity=1) == (["new"], ["old"])


def test_known_fact_is_refreshed_not_duplicated() -> None:
    queue, dropped = append_facts(["I like jazz", "b", "c"], ["i like  JAZZ."], capacity=3)
    assert queue == ["b", "c", "i like  JAZZ."]
    assert dropped == []


def test_refresh_saves_a_fact_from_ageing_out() -> None:
    queue, dropped = append_facts(["a", "b"], ["a", "c"], capacity=2)
    assert queue == ["a", "c"]
    assert dropped == ["b"]


def test_blank_and_none_are_ignored() -> None:
    queue, dropped = append_facts(["a"], ["", "   ", "None", "none.", " NONE "], capacity=5)
    assert (queue, dropped) == (["a"], [])


def test_new_facts_are_stripped() -> None:
    assert append_facts([], ["  I live in Oslo \n"], capacity=5)[0] == ["I live in Oslo"]


def test_overflowing_new_fact_is_reported_dropped() -> None:
    queue, dropped = append_facts([], ["a", "b", "c"], capacity=2)
    assert (queue, dropped) == (["b", "c"], ["a"])


def test_inputs_are_not_mutated() -> None:
    queue, new = ["a", "b"], ["c"]
    append_facts(queue, new, capacity=2)
    assert (queue, new) == (["a", "b"], ["c"])


def test_capacity_must_be_positive() -> None:
    with pytest.raises(ValueError, match="capacity"):
        append_facts([], ["a"], capacity=0)


facts = st.lists(
    st.sampled_from(["I like jazz", "i like jazz.", "Lives in Oslo", "lives in  oslo", "a", ""])
    | st.text(max_size=12),
    max_size=30,
)


@given(st.lists(facts, max_size=6), st.integers(1, 6))
def test_queue_is_bounded_and_free_of_duplicates(batches: list[list[str]], capacity: int) -> None:
    queue: list[str] = []
    for batch in batches:
        queue, dropped = append_facts(queue, batch, capacity)
        keys = [normalize_fact(fact) for fact in queue]
        assert len(queue) <= capacity
        assert len(set(keys)) == len(keys)
        assert "" not in keys
        assert "none" not in keys
        # deleting the dropped facts' points must never delete a kept fact's point
        assert not {normalize_fact(fact) for fact in dropped} & set(keys)
        accepted = [f for f in batch if normalize_fact(f) not in ("", "none")]
        if accepted:
            assert normalize_fact(queue[-1]) == normalize_fact(accepted[-1])


def test_merge_traits_new_wins_per_dimension() -> None:
    known = {"Openness": Trait(level="Low"), "Humor": Trait(level="High", reason="jokes")}
    new = {"Openness": Trait(level="High", reason="travels")}
    merged = merge_traits(known, new)
    assert merged == {
        "Openness": Trait(level="High", reason="travels"),
        "Humor": Trait(level="High", reason="jokes"),
    }
    assert known["Openness"].level == "Low"
    assert merge_traits({}, {}) == {}
