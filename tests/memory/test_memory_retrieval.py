"""Two-stage MTM ranking: segments by F, then pages by similarity."""

from __future__ import annotations

import pytest

from memory.retrieval import PageCandidate, rank_pages, rank_segments
from memory.scoring import SegmentCandidate


def cand(segment_id: str, cos: float, *keywords: str) -> SegmentCandidate:
    return SegmentCandidate(segment_id, cos, frozenset(keywords))


def test_segments_ranked_by_cosine_plus_jaccard() -> None:
    candidates = [
        cand("s1", 0.9),  # 0.9
        cand("s2", 0.5, "trip", "paris"),  # 0.5 + 2/2 = 1.5
        cand("s3", 0.7, "trip", "food"),  # 0.7 + 1/3
    ]
    ranked = rank_segments(candidates, {"trip", "paris"}, m=5)
    assert [sid for sid, _ in ranked] == ["s2", "s3", "s1"]
    assert [score for _, score in ranked] == pytest.approx([1.5, 0.7 + 1 / 3, 0.9])


def test_top_m_only() -> None:
    candidates = [cand(f"s{index}", index / 10) for index in range(10)]
    assert [sid for sid, _ in rank_segments(candidates, set(), m=3)] == ["s9", "s8", "s7"]
    assert rank_segments(candidates, set(), m=0) == []
    assert rank_segments([], {"a"}, m=5) == []


def test_segment_ties_are_deterministic() -> None:
    tied = [cand("b", 0.5, "k", "x"), cand("a", 0.5, "k", "x"), cand("c", 1.0)]  # F == 1.0
    assert [sid for sid, _ in rank_segments(tied, {"k"}, m=3)] == ["c", "a", "b"]


def test_segment_listed_twice_counts_once() -> None:
    ranked = rank_segments([cand("s1", 0.2), cand("s1", 0.8), cand("s2", 0.5)], set(), m=5)
    assert ranked == [("s1", 0.8), ("s2", 0.5)]


def test_pages_only_from_chosen_segments_top_k() -> None:
    pages = [
        PageCandidate("p1", "s1", 0.9),
        PageCandidate("p2", "other", 0.99),
        PageCandidate("p3", "s2", 0.5),
        PageCandidate("p4", "s1", 0.7),
    ]
    assert [page.page_id for page in rank_pages(pages, {"s1", "s2"}, k=2)] == ["p1", "p4"]
    assert [page.page_id for page in rank_pages(pages, {"s1", "s2"}, k=10)] == ["p1", "p4", "p3"]
    assert rank_pages(pages, {"s1"}, k=0) == []
    assert rank_pages(pages, set(), k=5) == []


def test_page_ties_and_duplicates() -> None:
    pages = [
        PageCandidate("pb", "s1", 0.5),
        PageCandidate("pa", "s1", 0.5),
        PageCandidate("pa", "s1", 0.6),
    ]
    assert rank_pages(pages, {"s1"}, k=5) == [
        PageCandidate("pa", "s1", 0.6),
        PageCandidate("pb", "s1", 0.5),
    ]
