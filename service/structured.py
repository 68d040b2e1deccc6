"""Structured retrieval (``MEMORYOS_MTM_RETRIEVAL=structured``): the store gives a pool of the
user's pages (both tiers, by dense and by lexical search), ``memory.ranking`` orders it.

Query side: question words and the user's common words are left out of the lexical search
(a term found in more than ``rank_common_share`` of the user's pages), and with
``rank_feedback_pages`` the query is expanded with the top pages' terms (RM3) and searched again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from adapters.repository import MemoryRepository
from adapters.settings import Settings
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


async def structured_pages(
    repo: MemoryRepository,
    user_id: str,
    vector: list[float],
    query: str,
    k: int,
    settings: Settings,
    segment_f: Mapping[str, float],
) -> tuple[list[str], list[PageCandidate], dict[str, Page]]:
    """(ranking, chosen, pages): the ranking (page ids of either tier) up to the k-th MTM page,
    the MTM pages among it with their segments, and every page seen by id.

    ``segment_f`` is the F of the segments near the query (the prior of their pages)."""
    text = " ".join(await distinctive_query_terms(repo, user_id, vector, query, settings))
    dense, lexical = await asyncio.gather(
        repo.search_all_pages(user_id, vector, text, settings.rank_pool, lexical_only=False),
        repo.search_all_pages(user_id, vector, text, settings.rank_pool, lexical_only=True),
    )
    pages = {page.page_id: page for _, page in [*dense, *lexical]}
    segment_of = {page.page_id: hit.payload.get("segment_id") for hit, page in [*dense, *lexical]}
    dense_score = {page.page_id: hit.score for hit, page in dense}
    best_f = max(segment_f.values(), default=0.0)
    prior = {sid: f / best_f for sid, f in segment_f.items()} if best_f > 0 else {}
    segment_prior = {page_id: prior.get(str(sid), 0.0) for page_id, sid in segment_of.items()}
    weights = RankWeights(
        dense=settings.rank_dense_weight,
        neighbor=settings.rank_neighbor_weight,
        session=settings.rank_session_weight,
        session_gap_s=settings.rank_session_gap_s,
        segment=settings.rank_segment_weight,
    )
    lexical_score = {page.page_id: hit.score for hit, page in lexical}
    pool = _pool(pages, lexical_score, dense_score, segment_prior)
    ranked = rank_pool(pool, weights, len(pool))
    if settings.rank_feedback_pages > 0 and ranked:
        sparse = expanded_query(text, ranked, pages, settings)
        expanded = await repo.search_all_pages(
            user_id, vector, text, settings.rank_pool, lexical_only=True, sparse=sparse
        )
        for hit, page in expanded:
            pages.setdefault(page.page_id, page)
            segment_of.setdefault(page.page_id, hit.payload.get("segment_id"))
        lexical_score = {page.page_id: hit.score for hit, page in expanded}
        pool = _pool(pages, lexical_score, dense_score, segment_prior)
        ranked = rank_pool(pool, weights, len(pool))
    ranking, chosen = _until_k_mid_term(ranked, segment_of, k)
    return ranking, chosen, pages


def _pool(
    pages: Mapping[str, Page],
    lexical: Mapping[str, float],
    dense: Mapping[str, float],
    prior: Mapping[str, float],
) -> list[PoolPage]:
    return [
        PoolPage(
            page_id,
            page.seq,
            page.timestamp.timestamp(),
            lexical.get(page_id, 0.0),
            dense.get(page_id),
            prior.get(page_id, 0.0),
        )
        for page_id, page in pages.items()
    ]


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
    repo: MemoryRepository, user_id: str, vector: list[float], query: str, settings: Settings
) -> list[str]:
    """The query's terms without question words and without the user's common words."""
    terms = list(dict.fromkeys(query_terms(query)))
    if settings.rank_common_share >= 1.0 or not terms:
        return terms
    pages = await repo.count_pages(user_id)
    limit = int(settings.rank_common_share * pages) + 1  # enough to tell "more than"
    counts = await asyncio.gather(
        *(repo.pages_with_token(user_id, vector, term, limit) for term in terms)
    )
    holding = dict(zip(terms, counts, strict=True))
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
