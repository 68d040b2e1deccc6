"""Structured page ranking: base score, sessions, neighbours, feedback terms, common terms."""

from __future__ import annotations

import math

import pytest

from memory.ranking import (
    PoolPage,
    RankWeights,
    base_scores,
    distinctive_terms,
    expansion_terms,
    rank_pool,
    sessions,
)
from memory.text import query_terms


def test_base_scales_lexical_and_fills_missing_cosines() -> None:
    pool = [
        PoolPage("a", 1, 0.0, lexical=2.0, dense=0.5),
        PoolPage("b", 2, 0.0, lexical=1.0, dense=None),  # not found by the dense search
        PoolPage("c", 3, 0.0, lexical=0.0, dense=0.2),
    ]
    scores = base_scores(pool, dense_weight=0.35, dense_scale="raw")
    assert scores["a"] == pytest.approx(2.0 / 2.0 + 0.35 * 0.5)
    assert scores["b"] == pytest.approx(1.0 / 2.0 + 0.35 * 0.2)  # the lowest cosine seen
    assert scores["c"] == pytest.approx(0.35 * 0.2)


def test_base_with_no_lexical_hit_and_a_segment_prior() -> None:
    pool = [PoolPage("a", 1, 0.0, dense=0.4, prior=1.0), PoolPage("b", 2, 0.0, dense=0.3)]
    assert base_scores(pool, 1.0, 0.5, "raw") == pytest.approx({"a": 0.9, "b": 0.3})


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


def _pool() -> list[PoolPage]:
    # base (dense weight 0): lexical / 4 -> p1 0, p2 1, p3 0.5, p4 0.75; p4 a day later
    return [
        PoolPage("p1", 1, 0.0, lexical=0.0),
        PoolPage("p2", 2, 1.0, lexical=4.0),
        PoolPage("p3", 3, 2.0, lexical=2.0),
        PoolPage("p4", 4, 86_400.0, lexical=3.0),
    ]


def test_neighbours_share_their_score_within_a_session() -> None:
    weights = RankWeights(dense=0.0, neighbor=0.5, session=0.0)
    ranked = rank_pool(_pool(), weights, k=4)
    # p1 0 + .5*1; p2 1 + .5*(0 + .5); p3 .5 + .5*1 (p4 is another session); p4 .75
    assert ranked == [
        ("p2", pytest.approx(1.25)),
        ("p3", pytest.approx(1.0)),
        ("p4", pytest.approx(0.75)),
        ("p1", pytest.approx(0.5)),
    ]


def test_session_expansion_adds_the_best_of_the_session() -> None:
    weights = RankWeights(dense=0.0, neighbor=0.5, session=0.2)
    ranked = rank_pool(_pool(), weights, k=4)
    # session 0 best 1.25: p1 .75, p2 1.5, p3 1.25; session 1 best .75: p4 .9
    assert [page_id for page_id, _ in ranked] == ["p2", "p3", "p4", "p1"]
    assert [score for _, score in ranked] == pytest.approx([1.5, 1.25, 0.9, 0.75])


def test_rank_pool_top_k_ties_and_duplicates() -> None:
    pool = [PoolPage("b", 1, 0.0, 1.0), PoolPage("a", 5, 0.0, 1.0), PoolPage("a", 5, 0.0, 1.0)]
    assert rank_pool(pool, RankWeights(dense=0.0, neighbor=0.0), k=1) == [("a", 1.0)]
    assert rank_pool(pool, RankWeights(), k=0) == []
    assert rank_pool([], RankWeights(), k=3) == []


def test_expansion_terms_by_hand() -> None:
    feedback = [(["a", "b", "b"], 2.0), (["c"], 2.0)]
    terms = expansion_terms(feedback, {"a": 1, "b": 4, "c": 2}, 4, {"a"}, limit=5)
    # b: (2/4)/3 * 2 occurrences * log(1 + 4/4); c: (2/4)/1 * log(1 + 4/2); scaled to the top
    b, c = (1 / 3) * math.log(2), 0.5 * math.log(3)
    assert list(terms) == ["c", "b"]
    assert terms["c"] == pytest.approx(1.0)
    assert terms["b"] == pytest.approx(b / c)
    assert list(expansion_terms(feedback, {}, 4, {"a"}, limit=1)) == ["c"]
    assert expansion_terms([], {}, 0, set(), limit=5) == {}
    assert expansion_terms(feedback, {}, 4, set(), limit=0) == {}


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
