"""Structured retrieval (``MEMORYOS_MTM_RETRIEVAL=structured``): the store gives a pool of the
user's pages (both tiers, by dense and by lexical search), ``memory.ranking`` orders it.

Query side: question words and the user's common words are left out of the lexical search
(a term found in more than ``COMMON_SHARE`` of the user's pages).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

from adapters.ports import Filter
from adapters.repository import MemoryRepository
from memory.dates import NamedDate, Window, date_named, named_dates
from memory.ranking import PoolPage, RankWeights, distinctive_terms, rank_pool
from memory.retrieval import PageCandidate
from memory.text import query_terms
from schemas.records import Page
from service.term_counts import TermCounts

POOL = 100  # pages fetched by each of the two searches
COMMON_SHARE = 0.2  # query terms in more of the user's pages than this share are left out
WEIGHTS = RankWeights()


async def structured_pages(
    repo: MemoryRepository,
    user_id: str,
    vector: list[float],
    query: str,
    k: int,
    counts: TermCounts,
    known: Sequence[Page] = (),
    weights: RankWeights = WEIGHTS,
    scope: Filter | None = None,
    windows: Sequence[Window] = (),
) -> tuple[list[str], list[PageCandidate], dict[str, Page], dict[str, float]]:
    """(ranking, chosen, pages, scores): the ranking (page ids of either tier) up to the k-th
    MTM page, the MTM pages among it with their segments, the ranked pages by id, and each
    ranked page's score.

    ``known``: pages this retrieve has read already (the STM window), not read again.
    ``scope``: the retrieve's filters, applied by the store in both pool searches.
    ``windows``: the spans relative time in the question points at; their pages count as
    dated, as the pages of a month the question names do."""
    text = " ".join(await distinctive_query_terms(counts, user_id, vector, query))
    dense, lexical = await asyncio.gather(
        repo.pool_hits(user_id, vector, text, POOL, lexical_only=False, scope=scope),
        repo.pool_hits(user_id, vector, text, POOL, lexical_only=True, scope=scope),
    )
    found = {str(hit.payload["page_id"]): hit.payload for hit in [*dense, *lexical]}
    dense_score = {str(hit.payload["page_id"]): hit.score for hit in dense}
    lexical_score = {str(hit.payload["page_id"]): hit.score for hit in lexical}
    named = frozenset(named_dates(query)) if weights.date > 0 else frozenset()
    spans = tuple(windows) if weights.date > 0 else ()
    pool = _pool(found, lexical_score, dense_score, named, spans)
    ranked = rank_pool(pool, weights, len(pool))
    segment_of = {page_id: payload.get("segment_id") for page_id, payload in found.items()}
    ranking, chosen = _until_k_mid_term(ranked, segment_of, k)
    # Only the ranked pages are read in full, and those of the STM window were already.
    read = {page.page_id: page for page in known}
    pages = {page_id: read[page_id] for page_id in ranking if page_id in read}
    missing = [page_id for page_id in ranking if page_id not in read]
    if missing:
        pages.update((page.page_id, page) for page in await repo.pages_by_id(user_id, missing))
    scores = dict(ranked)
    ranked_pages = [c for c in chosen if c.page_id in pages]
    return ranking, ranked_pages, pages, {page_id: scores[page_id] for page_id in ranking}


def _pool(
    found: Mapping[str, Mapping[str, Any]],
    lexical: Mapping[str, float],
    dense: Mapping[str, float],
    named: frozenset[NamedDate],
    spans: Sequence[Window] = (),
) -> list[PoolPage]:
    return [
        PoolPage(
            page_id,
            int(payload.get("seq", 0)),
            _seconds(payload.get("timestamp")),
            lexical.get(page_id, 0.0),
            dense.get(page_id),
            (bool(named) and _dated(payload.get("timestamp"), named))
            or (bool(spans) and _within(payload.get("timestamp"), spans)),
        )
        for page_id, payload in found.items()
    ]


@lru_cache(maxsize=1 << 16)  # a user's pages come back in pool after pool
def _parsed(timestamp: str) -> tuple[float, int, int]:
    """(epoch seconds, year, month as written): kept, not the datetime, whose epoch seconds
    would be computed again for every page of every pool."""
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


def _within(timestamp: object, spans: Sequence[Window]) -> bool:
    if not isinstance(timestamp, str):
        return False
    seconds = _parsed(timestamp)[0]
    return any(span.start.timestamp() <= seconds < span.end.timestamp() for span in spans)


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
    counts: TermCounts, user_id: str, vector: list[float], query: str
) -> list[str]:
    """The query's terms without question words and without the user's common words."""
    terms = list(dict.fromkeys(query_terms(query)))
    if not terms:
        return terms
    pages = await counts.count_pages(user_id)
    limit = int(COMMON_SHARE * pages) + 1  # enough to tell "more than"
    found = await asyncio.gather(
        *(counts.pages_with_token(user_id, vector, term, limit) for term in terms)
    )
    holding = dict(zip(terms, found, strict=True))
    return distinctive_terms(terms, holding, pages, COMMON_SHARE)
