"""The paper's matching score F = cos(e_s, e_p) + Jaccard(K_s, K_p) and the segment choice.

Used both when an evicted STM page looks for its segment (threshold theta) and when a query
ranks segments at retrieval (see ``memory.retrieval``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

Keywords = AbstractSet[str]  # a set or a frozenset of keyword tokens


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity, 0.0 when either vector is all zeros (no direction, no similarity).

    The result is clamped to [-1, 1] so rounding never lets a page beat theta by 1e-16.
    """
    if len(a) != len(b):
        raise ValueError(f"vectors differ in length: {len(a)} != {len(b)}")
    norm_a = math.sqrt(math.fsum(x * x for x in a))
    norm_b = math.sqrt(math.fsum(y * y for y in b))
    if norm_a == 0.0 or norm_b == 0.0:
        return 0.0
    value = math.fsum(x * y for x, y in zip(a, b, strict=True)) / (norm_a * norm_b)
    return max(-1.0, min(1.0, value))


def jaccard(a: Keywords, b: Keywords) -> float:
    """|a & b| / |a | b|, and 0.0 when both are empty (nothing shared, nothing to reward)."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def f_score(cos: float, segment_keywords: Keywords, page_keywords: Keywords) -> float:
    """The paper's F_score: semantic similarity plus keyword Jaccard, unweighted (range -1..2)."""
    return cos + jaccard(segment_keywords, page_keywords)


@dataclass(frozen=True)
class SegmentCandidate:
    """A segment found near a page or query: its id, cosine to it, and its keyword tokens.

    ``keywords`` should come from ``memory.text.keyword_set`` so phrases compare by tokens.
    """

    segment_id: str
    cosine: float
    keywords: frozenset[str]


def scored(
    candidates: Iterable[SegmentCandidate], keywords: Keywords
) -> list[tuple[SegmentCandidate, float]]:
    """Candidates with their F against ``keywords``, best first.

    Ties go to the higher cosine, then to the smaller segment id, so the order never depends
    on the order the store returned its hits in. A segment listed twice keeps its best score.
    """
    best: dict[str, tuple[SegmentCandidate, float]] = {}
    for candidate in candidates:
        score = f_score(candidate.cosine, candidate.keywords, keywords)
        known = best.get(candidate.segment_id)
        if known is None or _rank_key(candidate, score) < _rank_key(*known):
            best[candidate.segment_id] = (candidate, score)
    return sorted(best.values(), key=lambda pair: _rank_key(*pair))


def _rank_key(candidate: SegmentCandidate, score: float) -> tuple[float, float, str]:
    return (-score, -candidate.cosine, candidate.segment_id)


def choose_segment(
    candidates: Iterable[SegmentCandidate], page_keywords: Keywords, theta: float
) -> tuple[str | None, float]:
    """The segment a page joins: the best F if it is strictly above ``theta`` (paper: F > θ).

    Returns (segment id, F), or (None, best F seen) when no candidate passes, so the caller
    can log how close it came; (None, 0.0) when there are no candidates at all.
    """
    ranking = scored(candidates, page_keywords)
    if not ranking:
        return None, 0.0
    best, score = ranking[0]
    return (best.segment_id, score) if score > theta else (None, score)
