"""The paper's F-score and the segment choice (F > theta, strictly)."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory.scoring import SegmentCandidate, choose_segment, cosine, f_score, jaccard


def cand(segment_id: str, cos: float, *keywords: str) -> SegmentCandidate:
    return SegmentCandidate(segment_id, cos, frozenset(keywords))


def test_cosine_by_hand() -> None:
    assert cosine([1.0, 0.0], [0.0, 1.0]) == 0.0
    assert cosine([1.0, 0.0], [1.0, 1.0]) == pytest.approx(1 / math.sqrt(2))
    assert cosine([1.0, 2.0], [2.0, 4.0]) == pytest.approx(1.0)
    assert cosine([1.0, 2.0], [-1.0, -2.0]) == pytest.approx(-1.0)
    assert cosine([3.0, 4.0], [4.0, 3.0]) == pytest.approx(24 / 25)


def test_cosine_of_a_zero_vector_is_zero() -> None:
    assert cosine([0.0, 0.0], [1.0, 2.0]) == 0.0
    assert cosine([1.0, 2.0], [0.0, 0.0]) == 0.0
    assert cosine([], []) == 0.0


def test_cosine_rejects_vectors_of_different_length() -> None:
    with pytest.raises(ValueError, match="length"):
        cosine([1.0], [1.0, 0.0])


@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=8))
def test_cosine_stays_in_range(vector: list[float]) -> None:
    other = list(reversed(vector))
    assert -1.0 <= cosine(vector, other) <= 1.0
    assert -1.0 <= cosine(vector, vector) <= 1.0


def test_jaccard_by_hand() -> None:
    assert jaccard({"a", "b"}, {"b", "c"}) == pytest.approx(1 / 3)
    assert jaccard({"a"}, {"a"}) == 1.0
    assert jaccard({"a"}, {"b"}) == 0.0
    assert jaccard(set(), {"b"}) == 0.0
    assert jaccard(set(), set()) == 0.0


def test_f_score_is_cosine_plus_jaccard() -> None:
    assert f_score(0.5, {"a", "b"}, {"b", "c"}) == pytest.approx(0.5 + 1 / 3)
    assert f_score(0.25, set(), set()) == 0.25
    assert f_score(-0.2, {"x"}, {"x"}) == pytest.approx(0.8)


def test_f_score_from_vectors_and_keywords() -> None:
    cos = cosine([1.0, 0.0], [1.0, 1.0])
    assert f_score(cos, {"trip", "paris"}, {"trip"}) == pytest.approx(1 / math.sqrt(2) + 0.5)


def test_score_exactly_at_theta_is_rejected() -> None:
    assert choose_segment([cand("s1", 0.6)], set(), theta=0.6) == (None, 0.6)
    # 0.1 + 2/4 == 0.6 exactly in floating point
    exact = cand("s1", 0.1, "a", "b", "c")
    assert choose_segment([exact], {"a", "b", "d"}, theta=0.6)[0] is None


def test_score_above_theta_joins() -> None:
    chosen, score = choose_segment([cand("s1", 0.1, "a", "b")], {"a", "b"}, theta=0.6)
    assert chosen == "s1"
    assert score == pytest.approx(1.1)


def test_below_theta_reports_best_score() -> None:
    candidates = [cand("s1", 0.3), cand("s2", 0.5)]
    assert choose_segment(candidates, set(), theta=0.6) == (None, 0.5)


def test_no_candidates() -> None:
    assert choose_segment([], {"a"}, theta=0.6) == (None, 0.0)


def test_keywords_can_outweigh_cosine() -> None:
    candidates = [cand("semantic", 0.7), cand("lexical", 0.4, "trip", "paris")]
    assert choose_segment(candidates, {"trip", "paris"}, theta=0.6) == ("lexical", 1.4)


def test_equal_score_goes_to_higher_cosine() -> None:
    high_cos = cand("z-high", 0.9)
    high_jaccard = cand("a-low", 0.4, "k", "x")  # 0.4 + 1/2 == 0.9
    for order in ([high_cos, high_jaccard], [high_jaccard, high_cos]):
        assert choose_segment(order, {"k"}, theta=0.6)[0] == "z-high"


def test_full_tie_goes_to_smaller_id() -> None:
    for order in ([cand("b", 0.8), cand("a", 0.8)], [cand("a", 0.8), cand("b", 0.8)]):
        assert choose_segment(order, set(), theta=0.6) == ("a", 0.8)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["s1", "s2", "s3", "s4"]),
            st.sampled_from([0.0, 0.3, 0.6, 0.9]),
            st.frozensets(st.sampled_from("abcd"), max_size=3),
        ),
        max_size=8,
    ),
    st.randoms(use_true_random=False),
)
def test_choice_does_not_depend_on_order(
    rows: list[tuple[str, float, frozenset[str]]], rnd: random.Random
) -> None:
    candidates = [SegmentCandidate(*row) for row in rows]
    shuffled = list(candidates)
    rnd.shuffle(shuffled)
    assert choose_segment(candidates, {"a", "b"}, 0.6) == choose_segment(shuffled, {"a", "b"}, 0.6)
