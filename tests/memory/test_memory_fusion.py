from __future__ import annotations

import pytest

from memory.retrieval import PageCandidate, fuse_rankings


def ranking(*ids: str) -> list[PageCandidate]:
    return [PageCandidate(page_id, f"s-{page_id}", 1.0) for page_id in ids]


def test_reciprocal_rank_fusion_by_hand() -> None:
    fused = fuse_rankings([ranking("a", "b", "c"), ranking("c", "a")], k=3, rrf_k=60)
    # a: 1/61 + 1/62; c: 1/63 + 1/61; b: 1/62
    assert [p.page_id for p in fused] == ["a", "c", "b"]
    assert fused[0].similarity == pytest.approx(1 / 61 + 1 / 62)
    assert fused[1].similarity == pytest.approx(1 / 63 + 1 / 61)
    assert fused[2].similarity == pytest.approx(1 / 62)


def test_fusion_keeps_k_counts_duplicates_once_and_breaks_ties_by_id() -> None:
    fused = fuse_rankings([ranking("x", "x", "y"), ranking("y", "x")], k=1)
    assert [p.page_id for p in fused] == ["x"]
    assert fuse_rankings([ranking("b"), ranking("a")], k=2)[0].page_id == "a"
    assert fuse_rankings([ranking("a")], k=0) == []
    assert fuse_rankings([], k=3) == []
