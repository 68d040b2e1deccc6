"""Structured page ranking: dense + lexical evidence, spread along the dialogue's structure.

The paper ranks the pages of the chosen segments by semantic similarity alone. On LoCoMo the
words of a question and the turn that answers it often sit one turn apart ("What did you
paint?" / "A sunset"), and a question about a day's events matches several turns of that day.
This module scores a pool of pages (the store's nearest pages by dense and by lexical search)
in two steps:

1. base: lexical score / best lexical score in the pool + ``dense`` x cosine, the cosine
   stretched over the pool (lowest 0, highest 1): MiniLM's cosines of one pool sit in a
   narrow band, so raw, the dense score would barely move a page against the lexical score's
   full 0 to 1; plus ``date`` if the page's date is in a month or year the question names
   ("What did she donate in December 2023?");
2. neighbours: + ``neighbor`` x the base of the pages just before and after in the same
   session (``seq`` adjacency; pages less than ``session_gap_s`` apart by timestamp), so a
   turn inherits some of its context's evidence.

The weights are the values that ranked best on LoCoMo (docs/benchmarks.md). Pure and
deterministic: ties go to the smaller page id.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple


class PoolPage(NamedTuple):
    """A page found near the query: its place in the history and its two raw scores.

    ``lexical`` is 0.0 and ``dense`` is None when that search did not return the page. A
    named tuple, not a frozen dataclass: a retrieve builds a couple of hundred, and a frozen
    dataclass is slower to build.
    """

    page_id: str
    seq: int
    timestamp: float  # seconds since the epoch
    lexical: float = 0.0
    dense: float | None = None
    dated: bool = False  # the page's date falls in a month or year the query names


@dataclass(frozen=True)
class RankWeights:
    dense: float = 0.35
    neighbor: float = 0.4
    session_gap_s: float = 1800.0  # a longer pause between two pages starts a new session
    date: float = 0.5


def base_scores(
    pool: Sequence[PoolPage], dense_weight: float, date_weight: float = 0.0
) -> dict[str, float]:
    """Lexical score scaled by the pool's best, plus ``dense_weight`` x cosine stretched over
    the pool, plus ``date_weight`` if the page is of a month or year the query names.

    A page the dense search did not return gets the lowest cosine seen in the pool (it is
    at most that close), or 0.0 when no page has one. The cosine is stretched to
    (cosine - lowest) / (highest - lowest) over the pool, like the lexical score, so the weight
    means the same share whatever the embedder's range of cosines.
    """
    best_lexical = max((page.lexical for page in pool), default=0.0)
    cosines = [page.dense for page in pool if page.dense is not None]
    floor = min(cosines, default=0.0)
    spread = max(cosines, default=0.0) - floor
    scale = 1.0 / best_lexical if best_lexical > 0 else 0.0
    scores: dict[str, float] = {}
    for page in pool:
        cosine = floor if page.dense is None else page.dense
        stretched = (cosine - floor) / spread if spread > 0 else 0.0
        scores[page.page_id] = (
            page.lexical * scale + dense_weight * stretched + (date_weight if page.dated else 0.0)
        )
    return scores


def sessions(pool: Sequence[PoolPage], gap_s: float) -> dict[str, int]:
    """Session number of every page: pages in ``seq`` order, a new session after more than
    ``gap_s`` seconds between consecutive pages (pages missing from the pool between two
    pages of one sitting only shorten the steps, so they do not split it)."""
    ordered = sorted(pool, key=lambda page: (page.seq, page.page_id))
    found: dict[str, int] = {}
    number = 0
    for before, page in zip([None, *ordered], ordered, strict=False):
        if before is not None and page.timestamp - before.timestamp > gap_s:
            number += 1
        found[page.page_id] = number
    return found


def rank_pool(pool: Sequence[PoolPage], weights: RankWeights, k: int) -> list[tuple[str, float]]:
    """The top ``k`` pages of the pool as (page id, score), best first."""
    if k <= 0 or not pool:
        return []
    unique = list({page.page_id: page for page in pool}.values())
    base = base_scores(unique, weights.dense, weights.date)
    session_of = sessions(unique, weights.session_gap_s)
    by_seq = {page.seq: page.page_id for page in unique}
    final: dict[str, float] = {}
    for page in unique:
        score = base[page.page_id]
        for seq in (page.seq - 1, page.seq + 1):
            other = by_seq.get(seq)
            if other is not None and session_of[other] == session_of[page.page_id]:
                score += weights.neighbor * base[other]
        final[page.page_id] = score
    ordered = sorted(final, key=lambda page_id: (-final[page_id], page_id))
    return [(page_id, final[page_id]) for page_id in ordered[:k]]


def distinctive_terms(
    terms: Sequence[str], holding: dict[str, int], pages: int, share: float
) -> list[str]:
    """The query terms held by at most ``share`` of the user's ``pages`` (``holding``: pages
    per term). A word said all through one user's history (the partner's name, "photo")
    points nowhere in particular; if every term is that common, all are kept."""
    kept = [term for term in terms if holding.get(term, 0) <= share * pages]
    return kept or list(terms)
