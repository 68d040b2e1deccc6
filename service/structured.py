"""Structured retrieval (``MEMORYOS_MTM_RETRIEVAL=structured``): the store gives a pool of the
user's pages (both tiers, by dense and by lexical search), ``memory.ranking`` orders it.

Query side: question words and the user's common words are left out of the lexical search
(a term found in more than ``rank_common_share`` of the user's pages), and with
``rank_feedback_pages`` the query is expanded with the top pages' terms (RM3) and searched again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

from adapters.ports import Hit
from adapters.repository import MemoryRepository
from adapters.settings import Settings
from memory.dates import NamedDate, date_named, named_dates
from memory.ranking import (
    PoolPage,
    RankWeights,
    distinctive_terms,
    expansion_terms,
    rank_pool,
)
from memory.retrieval import PageCandidate
from memory.text import lexical_vector, query_terms, token_index, tokenize
from schemas.records import Page
from service.term_counts import TermCounts


async def structured_pages(
    repo: MemoryRepository,
    user_id: str,
    vector: list[float],
    query: str,
    k: int,
    settings: Settings,
    segment_f: Mapping[str, float],
    counts: TermCounts,
    known: Sequence[Page] = (),
) -> tuple[list[str], list[PageCandidate], dict[str, Page]]:
    """(ranking, chosen, pages): the ranking (page ids of either tier) up to the k-th MTM page,
    the MTM pages among it with their segments, and the ranked pages by id.

    ``segment_f`` is the F of the segments near the query (the prior of their pages);
    ``known``: pages this retrieve has read already (the STM window), not read again."""
    text = " ".join(await distinctive_query_terms(counts, user_id, vector, query, settings))
    dense, lexical = await asyncio.gather(
        repo.pool_hits(user_id, vector, text, settings.rank_pool, lexical_only=False),
        repo.pool_hits(user_id, vector, text, settings.rank_pool, lexical_only=True),
    )
    found = {str(hit.payload["page_id"]): hit.payload for hit in [*dense, *lexical]}
    dense_score = {str(hit.payload["page_id"]): hit.score for hit in dense}
    best_f = max(segment_f.values(), default=0.0)
    prior = {sid: f / best_f for sid, f in segment_f.items()} if best_f > 0 else {}
    weights = RankWeights(
        dense=settings.rank_dense_weight,
        neighbor=settings.rank_neighbor_weight,
        session=settings.rank_session_weight,
        session_gap_s=settings.rank_session_gap_s,
        segment=settings.rank_segment_weight,
        dense_scale=settings.rank_dense_scale,
        date=settings.rank_date_weight,
    )
    named = frozenset(named_dates(query)) if settings.rank_date_weight > 0 else frozenset()

    def ranked_pool(hits: Sequence[Hit]) -> list[tuple[str, float]]:
        lexical_score = {str(hit.payload["page_id"]): hit.score for hit in hits}
        pool = _pool(found, lexical_score, dense_score, prior, named)
        return rank_pool(pool, weights, len(pool))

    ranked = ranked_pool(lexical)
    if settings.rank_feedback_pages > 0 and ranked:
        texts = {p.page_id: p for p in await repo.pages_by_id(user_id, [i for i, _ in ranked])}
        kept = [
            (page_id, score) for page_id, score in ranked if page_id in texts
        ]  # not deleted since
        sparse = expanded_query(text, kept, texts, settings)
        expanded = await repo.pool_hits(
            user_id, vector, text, settings.rank_pool, lexical_only=True, sparse=sparse
        )
        for hit in expanded:
            found.setdefault(str(hit.payload["page_id"]), hit.payload)
        ranked = ranked_pool(expanded)
    segment_of = {page_id: payload.get("segment_id") for page_id, payload in found.items()}
    ranking, chosen = _until_k_mid_term(ranked, segment_of, k)
    # Only the ranked pages are read in full, and those of the STM window were (issue 19).
    read = {page.page_id: page for page in known}
    pages = {page_id: read[page_id] for page_id in ranking if page_id in read}
    missing = [page_id for page_id in ranking if page_id not in read]
    if missing:
        pages.update((page.page_id, page) for page in await repo.pages_by_id(user_id, missing))
    return ranking, [c for c in chosen if c.page_id in pages], pages


def _pool(
    found: Mapping[str, Mapping[str, Any]],
    lexical: Mapping[str, float],
    dense: Mapping[str, float],
    prior: Mapping[str, float],
    named: frozenset[NamedDate],
) -> list[PoolPage]:
    return [
        PoolPage(
            page_id,
            int(payload.get("seq", 0)),
            _seconds(payload.get("timestamp")),
            lexical.get(page_id, 0.0),
            dense.get(page_id),
            prior.get(str(payload.get("segment_id")), 0.0),
            bool(named) and _dated(payload.get("timestamp"), named),
        )
        for page_id, payload in found.items()
    ]


@lru_cache(maxsize=1 << 16)  # a user's pages come back in pool after pool
def _parsed(timestamp: str) -> tuple[float, int, int]:
    """(epoch seconds, year, month as written): kept, not the datetime, whose epoch seconds
    were computed again for every page of every pool (issue 19)."""
    moment = datetime.fromisoformat(timestamp)
    return moment.timestamp(), moment.year, moment.month


def _seconds(timestamp: object) -> float:
    """A stored page's timestamp (ISO 8601, as the page payload holds it) in epoch seconds."""
    return _parsed(timestamp)[0] if isinstance(timestamp, str) else 0.0


def _dated(timestamp: object, named: frozenset[NamedDate]) -> bool:
    # The date as written (the conversation's own zone), not as UTC seconds.
    if not isinstance(timestamp, str):
        return False
    _, year, month = _parsed(timestamp)
    return date_named(named, year, month)


def _until_k_mid_term(
    ranked: Sequence[tuple[str, float]], segment_of: Mapping[str, object], k: int
) -> tuple[list[str], list[PageCandidate]]:
    """The ranking runs until it holds k MTM pages: the k the paper gives MTM, with the STM
    pages that rank among them placed where they rank (the rest of STM follows them)."""
    ranking: list[str] = []
    chosen: list[PageCandidate] = []
    for page_id, score in ranked:
        if len(chosen) == k:
            break
        ranking.append(page_id)
        segment_id = segment_of.get(page_id)
        if segment_id:
            chosen.append(PageCandidate(page_id, str(segment_id), score))
    return ranking, chosen


async def distinctive_query_terms(
    counts: TermCounts, user_id: str, vector: list[float], query: str, settings: Settings
) -> list[str]:
    """The query's terms without question words and without the user's common words."""
    terms = list(dict.fromkeys(query_terms(query)))
    if settings.rank_common_share >= 1.0 or not terms:
        return terms
    pages = await counts.count_pages(user_id)
    limit = int(settings.rank_common_share * pages) + 1  # enough to tell "more than"
    found = await asyncio.gather(
        *(counts.pages_with_token(user_id, vector, term, limit) for term in terms)
    )
    holding = dict(zip(terms, found, strict=True))
    return distinctive_terms(terms, holding, pages, settings.rank_common_share)


def expanded_query(
    text: str, ranked: Sequence[tuple[str, float]], pages: Mapping[str, Page], settings: Settings
) -> dict[int, float]:
    """The query's lexical vector, (1 - lambda) of it plus lambda x the feedback terms."""
    bags = {page_id: tokenize(f"{page.query} {page.response}") for page_id, page in pages.items()}
    frequency: dict[str, int] = {}
    for bag in bags.values():
        for token in set(bag):
            frequency[token] = frequency.get(token, 0) + 1
    top = ranked[: settings.rank_feedback_pages]
    terms = expansion_terms(
        [(bags[page_id], score) for page_id, score in top],
        frequency,
        len(bags),
        set(tokenize(text)),
        settings.rank_feedback_terms,
    )
    share = settings.rank_feedback_weight
    sparse = {index: (1 - share) * weight for index, weight in lexical_vector(text).items()}
    for term, weight in terms.items():
        index = token_index(term)
        sparse[index] = sparse.get(index, 0.0) + share * weight
    return sparse
