"""Two-stage MTM retrieval (paper section 3.3): segments by F, then pages by similarity.

Stage 1 ranks segments by F = cos(e_query, e_segment) + Jaccard(K_query, K_segment) and keeps
the top m; stage 2 keeps the top k pages, by semantic similarity to the query, among the pages
of those segments. Every hit segment then gets N_visit + 1 (``MidTermState.record_visits``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from memory.scoring import SegmentCandidate, scored


def rank_segments(
    candidates: Sequence[SegmentCandidate], query_keywords: AbstractSet[str], m: int
) -> list[tuple[str, float]]:
    """The top ``m`` segments as (segment id, F), best first.

    Ties go to the higher cosine, then the smaller id; a segment listed twice counts once.
    """
    if m <= 0:
        return []
    ranking = scored(candidates, query_keywords)[:m]
    return [(candidate.segment_id, score) for candidate, score in ranking]


@dataclass(frozen=True)
class PageCandidate:
    """An MTM page found near the query, with the segment it belongs to."""

    page_id: str
    segment_id: str
    similarity: float


def rank_pages(
    pages: Iterable[PageCandidate], allowed_segments: AbstractSet[str], k: int
) -> list[PageCandidate]:
    """The top ``k`` pages of the chosen segments by similarity; ties by smaller page id.

    A page listed twice (say by a dense and a lexical search) counts once, at its best.
    """
    if k <= 0:
        return []
    best: dict[str, PageCandidate] = {}
    for page in pages:
        if page.segment_id not in allowed_segments:
            continue
        known = best.get(page.page_id)
        if known is None or _page_key(page) < _page_key(known):
            best[page.page_id] = page
    ranked = sorted(best.values(), key=_page_key)
    return ranked[:k]


def _page_key(page: PageCandidate) -> tuple[float, str, str]:
    return (-page.similarity, page.page_id, page.segment_id)


def fuse_rankings(
    rankings: Sequence[Sequence[PageCandidate]], k: int, rrf_k: int = 60
) -> list[PageCandidate]:
    """Reciprocal-rank fusion of page rankings: score = sum of 1 / (rrf_k + rank), rank from 1.

    A page's segment is taken from its first appearance; its similarity becomes the fused
    score. Ties go to the smaller page id, so the result is deterministic.
    """
    if k <= 0:
        return []
    scores: dict[str, float] = {}
    first: dict[str, PageCandidate] = {}
    for ranking in rankings:
        seen: set[str] = set()
        for rank, page in enumerate(ranking, start=1):
            if page.page_id in seen:
                continue
            seen.add(page.page_id)
            scores[page.page_id] = scores.get(page.page_id, 0.0) + 1.0 / (rrf_k + rank)
            first.setdefault(page.page_id, page)
    ordered = sorted(scores, key=lambda page_id: (-scores[page_id], page_id))[:k]
    return [
        PageCandidate(page_id, first[page_id].segment_id, scores[page_id]) for page_id in ordered
    ]
