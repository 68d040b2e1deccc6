"""Memory records in the vector store: the durable source of truth for every tier.

Agents keep fast partition-local tables, but the embedded broker forgets everything on
restart, so every change is also written here and a table rebuilds from here on a miss.
The response service, stateless, reads only from here.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from adapters.doc_codec import DATA, doc_data, encode_doc
from adapters.ports import (
    AGENT_TRAITS,
    PAGES,
    PERSONA_DIM,
    PERSONAS,
    SEGMENTS,
    USER_KNOWLEDGE,
    Between,
    Filter,
    FilterValue,
    Hit,
    Point,
    VectorStore,
)
from adapters.stores.common import CHAIN_ID, META
from memory import ids
from memory.fact_book import KINDS
from memory.persona import FactKind, assistant_of
from memory.scoring import SegmentCandidate
from memory.text import lexical_vector, phrase_tokens, token_index
from schemas.facts import Fact, FactBook
from schemas.filters import Filters
from schemas.records import Page, Persona, Segment
from schemas.tenants import reference, tenant_of

log = logging.getLogger(__name__)
STM = "stm"
LEAVING = "leaving"  # evicted from STM, not yet placed in a segment: the reconciler re-drives it
MTM = "mtm"
# Every page point is in one of these (``save_pages`` refuses others), so a search of every
# tier needs no tier condition: one that every page matches only made Edge's search longer
# (``python -m tools.edge_search_speed``).
TIERS = (STM, LEAVING, MTM)
HEAT_DOC = "heat"
PERSONA_DOC = "persona"
FACTS_DOC = "facts"  # written by the persona stage only: the user's facts as records
TOMBSTONE_DOC = "tombstone"  # written by DELETE only: when the user was last deleted
FORGOTTEN_DOC = "forgotten"  # written by the last stage only: the latest marker it has seen
PROFILE_DOC = "profile"  # written by the API only (PUT .../profile): the stated profile
PAIRING_DOC = "pairing"  # written by the pairing stage only: messages waiting for a reply
# Assistant profiles belong to no user: kept under a key no user id can take (ids start with
# a letter or digit), so no user's DELETE removes them.
ASSISTANTS = "@assistants"
SYSTEM = "@memoryos"  # the store's own documents, under a key no user id can take either
EMBEDDER_DOC = "embedder"  # which embedder made the store's vectors
POOL_FIELDS = ("page_id", "seq", "timestamp", "segment_id")  # what a page ranking reads
FACT_COLLECTIONS = {FactKind.USER: USER_KNOWLEDGE, FactKind.AGENT: AGENT_TRAITS}


@dataclass(frozen=True)
class StoredSegment:
    segment: Segment
    vector: list[float]
    size: int

    def candidate(self, cosine: float) -> SegmentCandidate:
        """This segment as the F-score sees it (used by placement and by retrieval alike)."""
        keywords = phrase_tokens(tuple(self.segment.keywords))
        return SegmentCandidate(self.segment.segment_id, cosine, keywords)


def _page_payload(page: Page, tier: str, segment_id: str | None) -> dict[str, Any]:
    payload = page.model_dump(mode="json", exclude={"vector"})
    # ts: the timestamp in epoch seconds, indexed, for the time filters of a retrieve
    payload.update(tier=tier, segment_id=segment_id, ts=page.timestamp.timestamp())
    return payload


_PLACE_FIELDS = ("tier", "segment_id", "ts")  # where a page is, not what it is


def _seq(payload: Mapping[str, Any]) -> int:
    seq = payload.get("seq", 0)
    return seq if isinstance(seq, int) else 0


def _page_from(point_payload: Mapping[str, Any], vector: list[float] | None) -> Page:
    fields = {k: v for k, v in point_payload.items() if k not in _PLACE_FIELDS}
    return Page.model_validate(fields | {"vector": vector})


def tenant_assistant(user_ref: str, assistant_id: str | None) -> str:
    """The reference of an assistant of the user's tenant (the default one when None)."""
    return reference(tenant_of(user_ref), assistant_of(assistant_id))


def _profile_kind(assistant_ref: str) -> str:
    return f"profile:{assistant_ref}"


class MemoryRepository:
    def __init__(self, store: VectorStore) -> None:
        self.store = store

    # --- pages ---

    async def save_pages(
        self, pages: Sequence[Page], tier: str, segment_id: str | None = None
    ) -> None:
        if tier not in TIERS:
            raise ValueError(f"no such tier {tier!r}")  # the searches of every tier rely on it
        points = []
        for page in pages:
            if page.vector is None:
                raise ValueError(f"page {page.page_id} has no vector")
            points.append(
                Point(
                    id=page.page_id,
                    vector=page.vector,
                    payload=_page_payload(page, tier, segment_id),
                    sparse=lexical_vector(f"{page.query} {page.response}"),
                )
            )
        await self.store.upsert(PAGES, points)

    async def update_pages(
        self, pages: Sequence[Page], tier: str, segment_id: str | None = None
    ) -> None:
        """Stored pages moved to ``tier`` (and ``segment_id``) with the keywords and chain they
        carry, in place: what the stages change, never the text, vectors or time. A page no
        longer stored stays gone. Cheaper than ``save_pages`` by the vectors not sent again."""
        if tier not in TIERS:
            raise ValueError(f"no such tier {tier!r}")
        for page in pages:
            fields = {
                "tier": tier,
                "segment_id": segment_id,
                "keywords": list(page.keywords),
                "chain": page.chain.model_dump(mode="json"),
            }
            await self.store.set_fields(PAGES, [page.page_id], fields)

    async def page_vectors(self, page_ids: Sequence[str]) -> dict[str, list[float]]:
        """The dense vectors of these pages that are stored."""
        points = await self.store.retrieve(PAGES, page_ids, with_vectors=True)
        return {point.id: point.vector for point in points}

    async def page_tiers(self, page_ids: Sequence[str]) -> dict[str, str]:
        """Which of these pages are stored, and in which tier."""
        points = await self.store.retrieve(PAGES, page_ids)
        return {point.id: str(point.payload.get("tier")) for point in points}

    async def stm_pages(
        self, user_id: str, with_vectors: bool = True, where: Filter | None = None
    ) -> list[Page]:
        """The STM window in order (its pages that match ``where``, if given); readers that
        only show pages skip the vectors."""
        points = await self.store.scroll(
            PAGES, user_id, {**(where or {}), "tier": STM}, with_vectors=with_vectors
        )
        points.sort(key=lambda p: int(p.payload.get("seq", 0)))
        return [_page_from(p.payload, p.vector if with_vectors else None) for p in points]

    async def follow_chain_summary(self, page: Page) -> int:
        """The MTM pages of ``page``'s chain take the summary of the chain's newest page among
        them (paper: the chain's meta summary runs along the whole chain); how many changed.
        Newest by position, so a page placed again late (a retry, a repair) cannot put an
        older summary back."""
        where: Filter = {"tier": MTM, CHAIN_ID: page.chain.chain_id}
        points = await self.store.scroll(PAGES, page.user_id, where)
        if not points:
            return 0
        newest = max(points, key=lambda p: _seq(p.payload))
        summary = str(newest.payload.get("chain", {}).get("summary", ""))
        stale = [p for p in points if p.payload.get("chain", {}).get("summary") != summary]
        for point in stale:
            chain = {**point.payload.get("chain", {}), "summary": summary}
            await self.store.set_fields(PAGES, [point.id], {"chain": chain})
        return len(stale)

    async def pages_by_id(
        self,
        user_id: str,
        page_ids: Sequence[str],
        with_vectors: bool = False,
        tier: str | None = None,
    ) -> list[Page]:
        """These pages of the user that are stored (in ``tier``, if given), oldest first."""
        points = [
            p
            for p in await self.store.retrieve(PAGES, page_ids, with_vectors=with_vectors)
            if p.payload.get("user_id") == user_id
            and (tier is None or p.payload.get("tier") == tier)
        ]
        points.sort(key=lambda p: int(p.payload.get("seq", 0)))
        return [_page_from(p.payload, p.vector if with_vectors else None) for p in points]

    async def mid_term_pages(self, user_id: str) -> list[tuple[str, Page]]:
        """(segment id, page) of every MTM page of the user, oldest first."""
        points = await self.store.scroll(PAGES, user_id, {"tier": MTM})
        points.sort(key=lambda p: int(p.payload.get("seq", 0)))
        return [(str(p.payload["segment_id"]), _page_from(p.payload, None)) for p in points]

    async def unplace_orphans(self, user_id: str, segment_ids: set[str]) -> list[Page]:
        """Mid-term pages whose segment is not among ``segment_ids`` go back to ``leaving``,
        for the MTM stage to place again: after a store log lost the segment (each collection
        has its own log, so one can be behind another), such a page is in no segment."""
        points = await self.store.scroll(PAGES, user_id, {"tier": MTM}, with_vectors=True)
        orphans = [p for p in points if str(p.payload.get("segment_id")) not in segment_ids]
        pages = [_page_from(p.payload, p.vector) for p in orphans]
        if pages:
            await self.save_pages(pages, LEAVING)
        return pages

    async def search_pages(
        self,
        user_id: str,
        vector: Sequence[float],
        text: str,
        segment_ids: Sequence[str] | None,
        limit: int,
        lexical_only: bool = False,
        semantic_only: bool = False,
        scope: Filter | None = None,
    ) -> list[tuple[Hit, Page]]:
        """One hybrid ranking over the pages of these segments (scores comparable across
        them), or over all the user's MTM pages when ``segment_ids`` is None.

        ``lexical_only`` ranks by the sparse vector alone, ``semantic_only`` by cosine alone
        (the paper's page stage); the score is then that search's own score.
        """
        if segment_ids is not None and not segment_ids:
            return []
        where: Filter = {"tier": MTM} if segment_ids is None else {"segment_id": list(segment_ids)}
        where = {**(scope or {}), **where}
        return await self._search(user_id, vector, text, limit, where, lexical_only, semantic_only)

    async def pool_hits(
        self,
        user_id: str,
        vector: Sequence[float],
        text: str,
        limit: int,
        lexical_only: bool,
        scope: Filter | None = None,
    ) -> list[Hit]:
        """Pages of every tier (STM, in transit, MTM) by cosine alone or by lexical score alone,
        raw scores, for a ranking that weighs the two itself. Only the fields a ranking reads
        (POOL_FIELDS): a pool of a hundred pages is ranked on every retrieve, and building every
        pool page in full would be a large part of a retrieve's time."""
        where = scope or None  # every tier (TIERS)
        given = lexical_vector(text) if lexical_only else None
        if lexical_only and not given:
            return []
        return await self.store.search(
            PAGES,
            user_id,
            vector,
            limit,
            where=where,
            sparse=given,
            lexical_only=lexical_only,
            fields=POOL_FIELDS,
        )

    async def count_pages(self, user_id: str) -> int:
        """Pages of the user in every tier."""
        return await self.store.count(PAGES, user_id)  # every tier (TIERS)

    async def pages_with_token(
        self, user_id: str, vector: Sequence[float], token: str, limit: int
    ) -> int:
        """How many of the user's pages hold ``token`` (a ``tokenize`` token), counted up to
        ``limit``: a lexical search for that one token returns exactly those pages."""
        hits = await self.store.search(
            PAGES,
            user_id,
            vector,
            limit,
            sparse={token_index(token): 1.0},  # every tier (TIERS)
            lexical_only=True,
            fields=[],
        )
        return len(hits)

    async def _search(
        self,
        user_id: str,
        vector: Sequence[float],
        text: str,
        limit: int,
        where: Filter,
        lexical_only: bool,
        semantic_only: bool,
        given: Mapping[int, float] | None = None,
    ) -> list[tuple[Hit, Page]]:
        sparse = None if semantic_only else dict(given) if given else lexical_vector(text)
        if lexical_only and not sparse:
            return []  # a text of stop words only: nothing to match lexically
        hits = await self.store.search(
            PAGES, user_id, vector, limit, where=where, sparse=sparse, lexical_only=lexical_only
        )
        return [(hit, _page_from(hit.payload, None)) for hit in hits]

    async def delete_pages(self, page_ids: Sequence[str]) -> None:
        if page_ids:
            await self.store.delete(PAGES, page_ids)

    # --- segments ---

    async def save_segment(self, segment: Segment, vector: list[float], size: int) -> None:
        payload = segment.model_dump(mode="json") | {"size": size}
        await self.store.upsert(SEGMENTS, [Point(segment.segment_id, vector, payload)])

    async def nearest_segments(
        self, user_id: str, vector: Sequence[float], limit: int, with_vectors: bool = True
    ) -> list[tuple[float, StoredSegment]]:
        hits = await self.store.search(SEGMENTS, user_id, vector, limit, with_vectors=with_vectors)
        return [(hit.score, self._segment(hit.payload, hit.vector or [])) for hit in hits]

    async def all_segments(self, user_id: str) -> list[StoredSegment]:
        points = await self.store.scroll(SEGMENTS, user_id)
        return [self._segment(p.payload, []) for p in points]

    async def segments_by_id(self, segment_ids: Sequence[str]) -> list[StoredSegment]:
        """The stored segments among ``segment_ids``, with their vectors."""
        points = await self.store.retrieve(SEGMENTS, segment_ids, with_vectors=True)
        return [self._segment(p.payload, list(p.vector or [])) for p in points]

    async def delete_segments(self, segment_ids: Sequence[str]) -> None:
        if segment_ids:
            await self.store.delete(SEGMENTS, segment_ids)

    @staticmethod
    def _segment(payload: Mapping[str, Any], vector: list[float]) -> StoredSegment:
        size = int(payload.get("size", 0))
        fields = {k: v for k, v in payload.items() if k != "size"}
        return StoredSegment(Segment.model_validate(fields), vector, size)

    # --- per-user documents (payload-only points): heat bookkeeping and persona ---

    async def load_doc(self, user_id: str, kind: str) -> dict[str, Any] | None:
        return (await self.load_docs([(user_id, kind)]))[0]

    async def load_docs(self, keys: Sequence[tuple[str, str]]) -> list[dict[str, Any] | None]:
        """The documents of these (user, kind) keys in one store read, in the order asked;
        None where there is none."""
        wanted = [ids.point_id(user_id, "doc", kind) for user_id, kind in keys]
        points = await self.store.retrieve(PERSONAS, wanted)
        found = {point.id: doc_data(point.payload) for point in points}
        return [found.get(point_id) for point_id in wanted]

    async def save_doc(
        self, user_id: str, kind: str, data: Mapping[str, Any], **flags: int
    ) -> None:
        """``flags`` are top-level payload fields that cross-user scans filter on; the data
        is stored as one JSON string (``doc_codec`` says why)."""
        point = Point(
            id=ids.point_id(user_id, "doc", kind),
            vector=[1.0] * PERSONA_DIM,
            payload={"user_id": user_id, "kind": kind, DATA: encode_doc(data), **flags},
        )
        await self.store.upsert(PERSONAS, [point])

    async def load_persona(self, user_id: str) -> Persona:
        data = await self.load_doc(user_id, PERSONA_DOC)
        return Persona.model_validate(data) if data else Persona(user_id=user_id)

    async def load_persona_view(
        self, user_id: str, assistant_id: str | None
    ) -> tuple[Persona, dict[str, Any], dict[str, Any]]:
        """(extracted persona, stated profile, assistant's profile) in one store read: every
        retrieve reads all three, and three reads cost the event loop three times."""
        persona, stated, agent = await self.load_docs(
            [
                (user_id, PERSONA_DOC),
                (user_id, PROFILE_DOC),
                (ASSISTANTS, _profile_kind(tenant_assistant(user_id, assistant_id))),
            ]
        )
        extracted = Persona.model_validate(persona) if persona else Persona(user_id=user_id)
        return extracted, stated or {}, agent or {}

    async def save_persona(self, persona: Persona) -> None:
        await self.save_doc(persona.user_id, PERSONA_DOC, persona.model_dump(mode="json"))

    async def load_profile(self, user_id: str) -> dict[str, Any]:
        """The user profile set through the API (not what the persona stage extracted)."""
        return await self.load_doc(user_id, PROFILE_DOC) or {}

    async def save_profile(self, user_id: str, profile: Mapping[str, Any]) -> None:
        await self.save_doc(user_id, PROFILE_DOC, profile)

    async def stored_embedder(self) -> str | None:
        """The embedder that made this store's vectors, if the store names one yet."""
        stored = await self.load_doc(SYSTEM, EMBEDDER_DOC)
        return None if stored is None else str(stored.get("name"))

    async def claim_embedder(self, name: str) -> str:
        """The embedder that made this store's vectors: ``name`` if the store names none yet
        (it does from now on), else the one it names."""
        stored = await self.load_doc(SYSTEM, EMBEDDER_DOC)
        if stored is None:
            await self.save_doc(SYSTEM, EMBEDDER_DOC, {"name": name})
            # read back: of two first starts with different embedders, the one whose write
            # did not stay learns it here (a store has no compare-and-set to close it fully)
            stored = await self.load_doc(SYSTEM, EMBEDDER_DOC) or {"name": name}
        return str(stored.get("name"))

    async def load_assistant_profile(self, assistant_ref: str) -> dict[str, Any]:
        """``assistant_ref``: the assistant's id, after ``<tenant>/`` outside the default
        tenant (``tenant_assistant``): each tenant's assistants have profiles of their own."""
        return await self.load_doc(ASSISTANTS, _profile_kind(assistant_ref)) or {}

    async def save_assistant_profile(self, assistant_ref: str, profile: Mapping[str, Any]) -> None:
        await self.save_doc(ASSISTANTS, _profile_kind(assistant_ref), profile)

    # --- user knowledge and agent traits ---

    async def save_facts(
        self,
        user_id: str,
        kind: FactKind,
        facts: Sequence[str],
        vectors: Sequence[list[float]],
        assistant_id: str | None = None,
    ) -> None:
        """``assistant_id`` scopes agent traits to one assistant (none: the default one)."""
        scope = _scope(kind, assistant_id)
        points = [
            Point(
                id=ids.fact_id(user_id, kind, fact, assistant_id),
                vector=vector,
                payload={"user_id": user_id, "text": fact, **scope},
                sparse=lexical_vector(fact),
            )
            for fact, vector in zip(facts, vectors, strict=True)
        ]
        if points:
            await self.store.upsert(FACT_COLLECTIONS[kind], points)

    async def load_fact_book(self, user_id: str) -> FactBook | None:
        data = await self.load_doc(user_id, FACTS_DOC)
        return FactBook.model_validate(data) if data else None

    async def save_fact_book(self, book: FactBook) -> None:
        await self.save_doc(book.user_id, FACTS_DOC, book.model_dump(mode="json"))

    async def save_fact_points(
        self, user_id: str, facts: Sequence[Fact], vectors: Sequence[list[float]]
    ) -> None:
        """Current facts' retrieval points, each named by its text and carrying its id."""
        for kind in FactKind:
            mine = [(f, v) for f, v in zip(facts, vectors, strict=True) if KINDS[f.kind] is kind]
            points = [
                Point(
                    id=ids.fact_id(user_id, kind, fact.text, fact.assistant_id),
                    vector=vector,
                    payload={"user_id": user_id, "text": fact.text, "fact_id": fact.fact_id}
                    | _scope(kind, fact.assistant_id),
                    sparse=lexical_vector(fact.text),
                )
                for fact, vector in mine
            ]
            if points:
                await self.store.upsert(FACT_COLLECTIONS[kind], points)

    async def delete_fact_points(self, user_id: str, facts: Sequence[Fact]) -> None:
        for kind in FactKind:
            point_ids = [
                ids.fact_id(user_id, kind, fact.text, fact.assistant_id)
                for fact in facts
                if KINDS[fact.kind] is kind
            ]
            if point_ids:
                await self.store.delete(FACT_COLLECTIONS[kind], point_ids)

    async def search_facts(
        self,
        user_id: str,
        kind: FactKind,
        vector: Sequence[float],
        text: str,
        limit: int,
        assistant_id: str | None = None,
        lexical: bool = True,
    ) -> list[Hit]:
        """Agent traits are searched among ``assistant_id``'s only (none: the default's).
        ``lexical``: dense and keyword search fused; without, the paper's semantic search."""
        where = {"assistant_id": assistant_of(assistant_id)} if kind is FactKind.AGENT else None
        sparse = lexical_vector(text) if lexical else None
        return await self.store.search(
            FACT_COLLECTIONS[kind], user_id, vector, limit, where=where, sparse=sparse
        )

    async def delete_doc(self, user_id: str, kind: str) -> None:
        await self.store.delete(PERSONAS, [ids.point_id(user_id, "doc", kind)])

    async def flagged_docs(self, user_id: str, flag: str) -> list[Point]:
        """The user's documents whose ``flag`` is set: read whole (a user has a few dozen) and
        picked here, so a flag an older version stored as ``true`` counts as well as a 1."""
        points = await self.store.scroll(PERSONAS, user_id)
        return [point for point in points if point.payload.get(flag)]

    async def users_holding(self, flag: str) -> list[str]:
        """Every user (reference) with a document whose ``flag`` is 1, sorted."""
        points = await self.store.scroll(PERSONAS, None, {flag: 1})
        return sorted({str(p.payload["user_id"]) for p in points})

    async def users_with_doc(self, kind: str) -> list[str]:
        points = await self.store.scroll(PERSONAS, None, {"kind": kind})
        return sorted({str(p.payload["user_id"]) for p in points})

    # --- forgetting: the DELETE purges at once, then each stage purges what it owns ---

    async def count_user(self, user_id: str) -> dict[str, int]:
        return {
            "short_term": await self.store.count(PAGES, user_id, {"tier": [STM, LEAVING]}),
            "mid_term_pages": await self.store.count(PAGES, user_id, {"tier": MTM}),
            "segments": await self.store.count(SEGMENTS, user_id),
            "user_knowledge": await self.store.count(USER_KNOWLEDGE, user_id),
            "agent_traits": await self.store.count(AGENT_TRAITS, user_id),
        }

    async def forget_user(self, user_id: str, at: float) -> dict[str, int]:
        """Delete every point of the user, then leave a tombstone dated ``at`` (a DELETE calls
        ``open_forget`` first, so a failure part-way leaves a DELETE its marker completes).

        The tombstone authorises the forget marker that follows the user's events through
        the stages. Until the last stage has seen that marker, reads show nothing.
        """
        counts = await self.count_user(user_id)
        # The DELETE wrote its tombstone first (``open_forget``); it is among the user's
        # documents, so it is written again once they are gone.
        for collection in (PAGES, SEGMENTS, USER_KNOWLEDGE, AGENT_TRAITS, PERSONAS):
            await self.store.delete_user(collection, user_id)
        await self.save_doc(user_id, TOMBSTONE_DOC, {"deleted_at": at})
        return counts

    async def open_forget(self, user_id: str, at: float) -> None:
        """The DELETE's tombstone: from now on reads show nothing of the user, and its
        forget marker is authorised."""
        await self.save_doc(user_id, TOMBSTONE_DOC, {"deleted_at": at})

    async def tombstone(self, user_id: str) -> tuple[float, bool] | None:
        """(deleted_at, still open) of the user's last DELETE, if any.

        Two documents with one writer each, so DELETE and the last stage never overwrite
        each other: open while the last stage has not seen this DELETE's marker.
        """
        stone_id = ids.point_id(user_id, "doc", TOMBSTONE_DOC)
        seen_id = ids.point_id(user_id, "doc", FORGOTTEN_DOC)
        points = {
            p.id: doc_data(p.payload)
            for p in await self.store.retrieve(PERSONAS, [stone_id, seen_id])
        }
        if stone_id not in points:
            return None
        at = float(points[stone_id]["deleted_at"])
        seen = float(points[seen_id]["through"]) if seen_id in points else float("-inf")
        return at, seen < at - 1e-3  # within a millisecond: the same DELETE (float digits)

    async def last_delete(self, user_id: str) -> int:
        """The time of the user's last DELETE in ms (0: never): an event about a change after
        it is a new event even where the change's ids repeat (a turn id sent again)."""
        stone = await self.tombstone(user_id)
        return round(stone[0] * 1000) if stone is not None else 0

    async def mark_forgotten(self, user_id: str, at: float) -> None:
        """The last stage has purged the user for every DELETE up to ``at``."""
        await self.save_doc(user_id, FORGOTTEN_DOC, {"through": at})

    async def open_tombstones(self) -> dict[str, float]:
        """Users whose forget marker has not reached the last stage yet."""
        stones = await self.store.scroll(PERSONAS, None, {"kind": TOMBSTONE_DOC})
        result = {}
        for point in stones:
            user_id = str(point.payload["user_id"])
            state = await self.tombstone(user_id)
            if state is not None and state[1]:
                result[user_id] = state[0]
        return result

    async def purge_short_term(self, user_id: str) -> None:
        points = await self.store.scroll(PAGES, user_id, {"tier": [STM, LEAVING]})
        await self.delete_pages([p.id for p in points])

    async def purge_mid_term(self, user_id: str) -> None:
        points = await self.store.scroll(PAGES, user_id, {"tier": MTM})
        await self.delete_pages([p.id for p in points])
        await self.store.delete_user(SEGMENTS, user_id)
        await self.delete_doc(user_id, HEAT_DOC)

    async def purge_persona(self, user_id: str) -> None:
        await self.store.delete_user(USER_KNOWLEDGE, user_id)
        await self.store.delete_user(AGENT_TRAITS, user_id)
        await self.delete_doc(user_id, PERSONA_DOC)
        await self.delete_doc(user_id, FACTS_DOC)

    async def leaving_pages(self, limit: int = 10_000) -> list[Page]:
        """Pages evicted from STM and not yet placed in a segment, of every user."""
        points = await self.store.scroll(PAGES, None, {"tier": LEAVING}, with_vectors=True)
        points.sort(key=lambda p: (str(p.payload.get("user_id")), _seq(p.payload)))
        pages = []
        for point in points[:limit]:
            try:
                pages.append(_page_from(point.payload, point.vector))
            except ValidationError as exc:  # one unreadable point must not stop every pass
                log.warning("a leaving page %s cannot be read, left out: %s", point.id, exc)
        return pages


def _scope(kind: FactKind, assistant_id: str | None) -> dict[str, str]:
    """Agent traits are searched among one assistant's: its id is on their points."""
    return {"assistant_id": assistant_of(assistant_id)} if kind is FactKind.AGENT else {}


def page_scope(filters: Filters | None) -> dict[str, FilterValue]:
    """A retrieve's filters as conditions on the pages' indexed payload fields."""
    if filters is None:
        return {}
    where: dict[str, FilterValue] = {}
    if filters.channel is not None:
        where["channel"] = (
            list(filters.channel) if isinstance(filters.channel, list) else filters.channel
        )
    if filters.assistant_id is not None:
        where["assistant_id"] = filters.assistant_id
    if filters.conversation_id is not None:
        where["conversation_id"] = filters.conversation_id
    if filters.after is not None or filters.before is not None:
        where["ts"] = Between(
            gte=filters.after.timestamp() if filters.after else None,
            lt=filters.before.timestamp() if filters.before else None,
        )
    for key, value in (filters.meta or {}).items():
        where[META + key] = value
    return where
