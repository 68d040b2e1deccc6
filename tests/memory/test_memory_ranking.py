"""Structured page ranking: base score, sessions, neighbours, common terms."""

from __future__ import annotations

import pytest

from memory.ranking import (
    PoolPage,
    RankWeights,
    base_scores,
    distinctive_terms,
    rank_pool,
    sessions,
)
from memory.text import query_terms


def test_base_stretches_cosines_over_the_pool() -> None:
    pool = [
        PoolPage("a", 1, 0.0, lexical=2.0, dense=0.5),
        PoolPage("b", 2, 0.0, lexical=1.0, dense=None),  # at most as close as the lowest
        PoolPage("c", 3, 0.0, lexical=0.0, dense=0.2),
        PoolPage("d", 4, 0.0, lexical=0.0, dense=0.35),
    ]
    scores = base_scores(pool, dense_weight=0.4)
    assert scores == pytest.approx({"a": 1.0 + 0.4, "b": 0.5, "c": 0.0, "d": 0.4 * 0.5})
    # one cosine, or all equal: the dense score tells no page from another
    same = [PoolPage("a", 1, 0.0, lexical=1.0, dense=0.3), PoolPage("b", 2, 0.0, dense=0.3)]
    assert base_scores(same, dense_weight=0.4) == pytest.approx({"a": 1.0, "b": 0.0})


def test_sessions_split_on_long_pauses_only() -> None:
    pool = [
        PoolPage("d", 9, 5010.0),
        PoolPage("a", 1, 0.0),
        PoolPage("b", 3, 10.0),  # seq 2 is not in the pool: still the same sitting
        PoolPage("c", 8, 5000.0),
    ]
    assert sessions(pool, gap_s=1800.0) == {"a": 0, "b": 0, "c": 1, "d": 1}


def test_a_page_of_the_month_asked_about_gets_the_date_weight() -> None:
    pool = [PoolPage("a", 1, 0.0, lexical=1.0), PoolPage("b", 2, 0.0, lexical=1.0, dated=True)]
    assert base_scores(pool, 0.35, date_weight=0.5) == pytest.approx({"a": 1.0, "b": 1.5})
    assert base_scores(pool, 0.35) == pytest.approx({"a": 1.0, "b": 1.0})


def _pool() -> list[PoolPage]:
    # base (dense weight 0): lexical / 4 -> p1 0, p2 1, p3 0.5, p4 0.75; p4 a day later
    return [
        PoolPage("p1", 1, 0.0, lexical=0.0),
        PoolPage("p2", 2, 1.0, lexical=4.0),
        PoolPage("p3", 3, 2.0, lexical=2.0),
        PoolPage("p4", 4, 86_400.0, lexical=3.0),
    ]


def test_neighbours_share_their_score_within_a_session() -> None:
    weights = RankWeights(dense=0.0, neighbor=0.5)
    ranked = rank_pool(_pool(), weights, k=4)
    # p1 0 + .5*1; p2 1 + .5*(0 + .5); p3 .5 + .5*1 (p4 is another session); p4 .75
    assert ranked == [
        ("p2", pytest.approx(1.25)),
        ("p3", pytest.approx(1.0)),
        ("p4", pytest.approx(0.75)),
        ("p1", pytest.approx(0.5)),
    ]


def test_rank_pool_top_k_ties_and_duplicates() -> None:
    pool = [PoolPage("b", 1, 0.0, 1.0), PoolPage("a", 5, 0.0, 1.0), PoolPage("a", 5, 0.0, 1.0)]
    assert rank_pool(pool, RankWeights(dense=0.0, neighbor=0.0), k=1) == [("a", 1.0)]
    assert rank_pool(pool, RankWeights(), k=0) == []
    assert rank_pool([], RankWeights(), k=3) == []


def test_common_terms_are_left_out_unless_all_are() -> None:
    holding = {"caroline": 50, "paint": 3, "sunset": 20}
    assert distinctive_terms(["caroline", "paint", "sunset"], holding, 100, 0.2) == [
        "paint",
        "sunset",  # 20 of 100 pages: at the share, still kept
    ]
    assert distinctive_terms(["caroline"], holding, 100, 0.2) == ["caroline"]
    assert distinctive_terms([], holding, 100, 0.2) == []


def test_query_terms_drop_question_words() -> None:
    assert query_terms("What kind of art does Caroline make?") == ["art", "caroline", "make"]
    assert query_terms("Whose dog is likely the oldest?") == ["dog", "oldest"]
