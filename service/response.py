"""The response service: reads every tier from the store, writes through Kafka.

Stateless: any number of replicas can serve the same users. Retrieval follows the paper
(STM whole; top m segments by F with query keywords, then top k pages; LPM top 10) and
reports the segments it hit, so the MTM stage counts N_visit and recency.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple, get_args
from uuid import uuid4

import aiorwlock

from adapters import tracing
from adapters.deps import Deps
from adapters.disk_space import DiskGuard, NoGuard
from adapters.journal import Journal, NoJournal
from adapters.ports import Filter, Hit, PromptMemory
from adapters.repository import HEAT_DOC, PAIRING_DOC, page_scope, tenant_assistant
from adapters.settings import MtmRetrieval, Settings
from adapters.token_budget import acting_for
from memory.answers import says_it_does_not_know
from memory.dates import relative_windows
from memory.heat import heat, recency
from memory.mtm import MidTermState
from memory.pairing import PairingState, message_digest
from memory.persona import FactKind, persona_view
from memory.prompt import build_prompt, prompt_texts
from memory.retrieval import PageCandidate, fuse_rankings, rank_pages, rank_segments
from memory.text import keyword_set, query_keywords
from schemas.codec import decode, dumps
from schemas.errors import Conflict, InvalidEvent, Restarting
from schemas.facts import FactEdit
from schemas.filters import Filters
from schemas.limits import MAX_EVENT_TIME
from schemas.message import MessageEvent
from schemas.records import ForgetUser, Page, Persona
from schemas.topics import MESSAGES, PERSONA, TURNS, user_key
from schemas.turn import MAX_TEXT_CHARS, TurnEvent
from service.history import empty_history, user_history
from service.locks import UserLocks
from service.structured import structured_pages
from service.term_counts import TermCounts
from service.visits import LINGER_S, EventSink, VisitSender

FORGETTING = (
    "the user is being forgotten (a DELETE has not completed): send the edit again once GET "
    ".../memory shows the DELETE done"
)


async def _nothing() -> list[Any]:
    return []


class ScoredFact(NamedTuple):
    text: str
    score: float
    fact_id: str  # so a bot can correct the exact fact it was given

    @classmethod
    def of(cls, hit: Hit) -> ScoredFact:
        # points stored before facts were records: named by their text, which was the id
        return cls(str(hit.payload["text"]), hit.score, str(hit.payload.get("fact_id", hit.id)))


@dataclass
class Retrieved:
    short_term: list[Page]
    mid_term: list[tuple[Page, str, float]]  # page, segment id, score
    persona: Persona
    user_knowledge: list[ScoredFact]
    agent_traits: list[ScoredFact]
    segment_ids: list[str] = field(default_factory=list)
    ranking: list[str] = field(default_factory=list)  # page ids, most relevant first
    scores: dict[str, float] = field(default_factory=dict)  # of the ranked pages, either tier

    def context(self) -> list[Page]:
        """The pages in context order: the ranked pages of either tier, best first, then the
        rest of the STM window in its order."""
        known = {page.page_id: page for page in self.short_term}
        known |= {page.page_id: page for page, _, _ in self.mid_term}
        ordered = [known[page_id] for page_id in self.ranking if page_id in known]
        ordered += [page for page, _, _ in self.mid_term] + self.short_term
        return list({page.page_id: page for page in ordered}.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "short_term": [page.public() for page in self.short_term],
            "mid_term": [
                page.public() | {"segment_id": segment_id, "score": score}
                for page, segment_id, score in self.mid_term
            ],
            "user_profile": self.persona.profile,
            "agent_profile": self.persona.agent_profile,
            "user_traits": {k: v.model_dump() for k, v in self.persona.traits.items()},
            "user_knowledge": [fact._asdict() for fact in self.user_knowledge],
            "agent_traits": [fact._asdict() for fact in self.agent_traits],
            "context": [page.page_id for page in self.context()],
            "scores": self.scores,
        }


class Responded(NamedTuple):
    text: str
    memory: Retrieved
    usage: dict[str, int]
    remembered: bool  # the answer became memory (with the query, as a turn)


class ResponseService:
    def __init__(
        self,
        deps: Deps,
        sink: EventSink,
        journal: Journal | None = None,
        disk: DiskGuard | NoGuard | None = None,
    ) -> None:
        """``disk``: the data folder's guard; a client's write is refused under its floor."""
        self.deps = deps
        self.sink = sink
        self.journal: Journal = journal or NoJournal()
        self.disk = disk or NoGuard()
        # Held by a DELETE, and shared with the reconciler of this process (streams/stack.py).
        self.forget_lock = asyncio.Lock()
        # Held shared by each write from its journal entry to its send; taken alone by a roll
        # before it refuses writes, and by the start-up catch-up for its last read, so no
        # write is half done then (streams/stack.py).
        self.writes = aiorwlock.RWLock()
        # Set while the embedded broker restarts (a log roll): a client's write is refused
        # (503, Retry-After this many seconds) before anything of it is written.
        self.restarting: int | None = None
        self._user_locks = UserLocks()
        self.visits = VisitSender(sink, deps.metrics, LINGER_S)
        self.term_counts = TermCounts(deps.repo)

    @tracing.traced("memoryos.add_turns", tracing.of_turns)
    async def add_turns(self, turns: Sequence[TurnEvent]) -> list[str]:
        """A client's turns: refused (503) while the data folder is under its floor."""
        self.disk.check()
        return await self.write_turns(turns, client=True)

    async def write_turns(
        self,
        turns: Sequence[TurnEvent],
        unless: Callable[[], Awaitable[bool]] | None = None,
        client: bool = False,
    ) -> list[str]:
        """Acknowledged means durable: on disk in the journal (embedded) and sent with
        acks=all before the caller hears back. ``unless``: asked with the users' locks held,
        before anything is written; true drops the turns (the pairing stage's turns made of
        messages sent before a DELETE that finished meanwhile: already acknowledged as
        messages, so never refused for the disk). ``client``: a client's write, refused while
        the broker restarts (the pairing stage's are not: it is being stopped or started).
        Returns the ids written."""
        # Per-user locks: a DELETE of one of these users waits until the turns are both
        # journaled and sent, so it can never drop a journal entry whose send is to come.
        async with self._user_locks.hold({turn.user_id for turn in turns}), self.writes.reader:
            if client:
                self.check_writable()
            if unless is not None and await unless():
                return []
            await self.journal.append(turns)
            for turn in turns:
                await self.sink.send(TURNS, user_key(turn.user_id), dumps(turn))
        return [turn.turn_id for turn in turns]

    def check_writable(self) -> None:
        """Raises ``Restarting`` while the embedded broker restarts. Asked with the writers'
        lock held, which the roll takes alone to start refusing: a write is then either wholly
        before the roll (journaled and sent) or refused, with nothing written."""
        if self.restarting is not None:
            raise Restarting(self.restarting)

    async def add_messages(self, messages: Sequence[MessageEvent]) -> list[str | None]:
        """Messages for the pairing stage; acknowledged once durable, as turns are. One
        outcome per message: None when accepted, else the digest of the copy of that user's
        message id accepted before (``""`` if unknown): a duplicate, not sent again."""
        self.disk.check()
        # Locked as turns are: a DELETE between the journal entry and its send would let a
        # message from before it reach the pairing stage behind the marker, and be kept. The
        # lock also makes a re-send racing its first copy see it in the journal.
        users = {message.user_id for message in messages}
        async with self._user_locks.hold(users), self.writes.reader:
            self.check_writable()
            earlier = await self._earlier_copies(messages)
            outcomes: list[str | None] = []
            fresh = []
            for message in messages:
                key = (message.user_id, message.message_id)
                outcomes.append(earlier.get(key))
                if key not in earlier:
                    earlier[key] = message_digest(message)  # a second copy in this call
                    fresh.append(message)
            await self.journal.append_messages(fresh)
            for message in fresh:
                await self.sink.send(MESSAGES, user_key(message.user_id), dumps(message))
        return outcomes

    async def _earlier_copies(self, messages: Sequence[MessageEvent]) -> dict[tuple[str, str], str]:
        """(user, message id) already accepted (journaled, or paired and remembered by the
        pairing stage), each with the digest of its first copy. Ids are unique per user only."""
        found: dict[tuple[str, str], str] = {}
        for user_id in {message.user_id for message in messages}:
            ids = [m.message_id for m in messages if m.user_id == user_id]
            for value in await self.journal.journaled_messages(user_id, ids):
                first = decode(MessageEvent, value)
                found[(user_id, first.message_id)] = message_digest(first)
            state = PairingState.from_dict(await self.deps.repo.load_doc(user_id, PAIRING_DOC))
            seen = set(state.recent)
            for message_id in ids:
                if message_id in seen:
                    found.setdefault((user_id, message_id), state.digests.get(message_id, ""))
        return found

    async def send_fact_edit(self, edit: FactEdit) -> None:
        """A fact edit for the persona stage, in the user's order; acknowledged once durable,
        as turns are. Refused (409) while a DELETE of the user has not completed: its marker
        would purge the edit on the way."""
        self.disk.check()
        async with self._user_locks.hold({edit.user_id}), self.writes.reader:
            self.check_writable()
            if await self.forgetting(edit.user_id):
                raise Conflict(FORGETTING)
            keyring = self.deps.keyring
            sealed = await keyring.seal(
                edit.user_id, await keyring.current(edit.user_id), dumps(edit)
            )
            if sealed is None:  # not while no DELETE is open; checked, never assumed
                raise Conflict("the user's key is being replaced by a DELETE: send it again")
            await self.journal.append_fact_edits([edit])
            await self.sink.send(PERSONA, user_key(edit.user_id), sealed)

    async def forgetting(self, user_id: str) -> bool:
        """A DELETE whose marker has not passed every stage yet: reads show nothing."""
        tombstone = await self.deps.repo.tombstone(user_id)
        return tombstone is not None and tombstone[1]

    @tracing.traced("memoryos.retrieve", tracing.of_user)
    async def retrieve(
        self,
        user_id: str,
        query: str,
        top_k: int | None = None,
        assistant_id: str | None = None,
        mode: str | None = None,
        filters: Filters | None = None,
        at: datetime | None = None,
        visit: bool = True,
    ) -> Retrieved:
        """Memory for ``query``; ``mode`` overrides ``mtm_retrieval`` for this call (the
        evaluation compares the modes on one stored memory). ``filters`` scope the pages (in
        the store's searches); ``at`` is when the question is asked (default now): relative
        time in it ("last week") favours the pages of that span. ``visit=False`` looks without
        counting the segments found as visited (their heat stays)."""
        deps, settings = self.deps, self.deps.settings
        if mode is not None and mode != settings.mtm_retrieval:
            if mode not in get_args(MtmRetrieval):
                raise InvalidEvent(f"unknown retrieval mode {mode!r}", field="mode")
            settings = settings.model_copy(update={"mtm_retrieval": mode})
        repo = deps.repo
        k = top_k or settings.retrieve_pages
        scope = self._page_scope(filters)
        asked_at = at or datetime.fromtimestamp(deps.clock.now(), UTC)
        if asked_at.tzinfo is None:
            asked_at = asked_at.replace(tzinfo=UTC)  # as the API reads a time without zone
        if assistant_id is None and filters is not None:
            assistant_id = filters.assistant_id  # agent traits of that assistant too
        if await self.forgetting(user_id):
            return Retrieved([], [], Persona(user_id=user_id), [], [])
        vector = (await deps.embedder.embed([query]))[0]
        # paper mode is the paper's end to end: its persona search is semantic only
        hybrid = settings.mtm_retrieval != "paper"
        # Structured mode ranks pages of either tier directly: it reads no segments.
        wants_segments = settings.mtm_retrieval != "structured"
        short_term, nearest, persona, knowledge, traits = await asyncio.gather(
            repo.stm_pages(user_id, with_vectors=False, where=scope),
            repo.nearest_segments(
                # every segment (at most the capacity): F over all of them, as the paper
                user_id,
                vector,
                settings.mtm_capacity + 1,
                with_vectors=False,
            )
            if wants_segments
            else _nothing(),
            self.persona(user_id, assistant_id),
            repo.search_facts(
                user_id, FactKind.USER, vector, query, settings.retrieve_lpm, lexical=hybrid
            ),
            repo.search_facts(
                user_id,
                FactKind.AGENT,
                vector,
                query,
                settings.retrieve_lpm,
                assistant_id,
                lexical=hybrid,
            ),
        )
        segment_f = rank_segments(
            [stored.candidate(score) for score, stored in nearest],
            keyword_set(query_keywords(query)),
            len(nearest),
        )
        ranked = segment_f[: settings.retrieve_segments]
        segment_ids = [segment_id for segment_id, _ in ranked]
        ranking: list[str] = []
        if settings.mtm_retrieval == "structured":
            ranking, chosen, pages, scores = await structured_pages(
                repo,
                user_id,
                vector,
                query,
                k,
                self.term_counts,
                known=short_term,
                scope=scope,
                windows=relative_windows(query, asked_at),
            )
            segment_ids = []  # the segments visited are those of the pages chosen
        else:
            chosen, pages = await self._mid_term_pages(
                user_id, vector, query, segment_ids, k, settings, scope
            )
            ranking = [c.page_id for c in chosen]
            scores = {c.page_id: c.similarity for c in chosen}
        # Every segment that contributed is "retrieved": N_visit + 1 and a fresh access time.
        visited = list(dict.fromkeys([*segment_ids, *(c.segment_id for c in chosen)]))
        # sent off the request's path: a roll's gate must not hold the retrieve
        if visited and visit:
            self.visits.send(user_id, visited, deps.clock.now())
        return Retrieved(
            short_term=short_term,
            mid_term=[(pages[c.page_id], c.segment_id, c.similarity) for c in chosen],
            persona=persona,
            user_knowledge=[ScoredFact.of(hit) for hit in knowledge],
            agent_traits=[ScoredFact.of(hit) for hit in traits],
            segment_ids=visited,
            ranking=ranking,
            scores=scores,
        )

    async def _mid_term_pages(
        self,
        user_id: str,
        vector: list[float],
        query: str,
        segment_ids: list[str],
        k: int,
        settings: Settings,
        scope: Filter,
    ) -> tuple[list[PageCandidate], dict[str, Page]]:
        """The paper's stage 2: the top k pages of the chosen segments by semantic similarity
        (``paper``); in ``fused`` mode one hybrid ranking of them fused with a lexical search
        over all MTM pages, which catches evidence in segments that F did not rank in the top m."""
        repo = self.deps.repo
        semantic = settings.mtm_retrieval == "paper"
        searches = [
            repo.search_pages(
                user_id, vector, query, segment_ids, k, semantic_only=semantic, scope=scope
            )
        ]
        if settings.mtm_retrieval == "fused":
            searches.append(
                repo.search_pages(user_id, vector, query, None, k, lexical_only=True, scope=scope)
            )
        results = await asyncio.gather(*searches)
        pages = {page.page_id: page for hits in results for _, page in hits}
        rankings = [
            [PageCandidate(p.page_id, str(h.payload["segment_id"]), h.score) for h, p in hits]
            for hits in results
        ]
        paper = rank_pages(rankings[0], set(segment_ids), k)
        chosen = paper if len(rankings) == 1 else fuse_rankings([paper, rankings[1]], k)
        if scope and len(chosen) < k:
            # The segments are chosen by the query alone; scoped, they may hold fewer than k
            # matching pages: the rest come from every segment, the filters still the store's.
            more = await repo.search_pages(user_id, vector, query, None, k, scope=scope)
            pages |= {page.page_id: page for _, page in more}
            taken = {c.page_id for c in chosen}
            chosen += [
                PageCandidate(p.page_id, str(h.payload["segment_id"]), h.score)
                for h, p in more
                if p.page_id not in taken
            ][: k - len(chosen)]
        return chosen, pages

    def _page_scope(self, filters: Filters | None) -> Filter:
        """The filters as store conditions; a meta key that is not indexed is refused (422),
        naming it, rather than searched without an index."""
        indexed = self.deps.settings.meta_filter_keys
        for key in (filters.meta or {}) if filters is not None else {}:
            if key not in indexed:
                raise InvalidEvent(
                    f"meta key {key!r} is not one a retrieve may filter on; the indexed keys "
                    f"are {', '.join(indexed) or 'none'} (MEMORYOS_FILTER_META_KEYS)",
                    field=f"filters.meta.{key}",
                )
        return page_scope(filters)

    @tracing.traced("memoryos.respond", tracing.of_user)
    async def respond(
        self,
        user_id: str,
        query: str,
        assistant_id: str | None = None,
        record: bool = True,
        filters: Filters | None = None,
        at: datetime | None = None,
        conversation_id: str | None = None,
    ) -> Responded:
        """Answer with memory; the exchange becomes a turn of the user's memory (``record``),
        of ``conversation_id`` if given; an answer that only says the assistant does not know
        is left out of it (the turn keeps the query alone)."""
        if record:
            self.disk.check()  # before the LLM's work, not after it
            self.check_writable()
        memory = await self.retrieve(
            user_id, query, assistant_id=assistant_id, filters=filters, at=at
        )
        mid_term = [page for page, _, _ in memory.mid_term]
        knowledge = [fact.text for fact in memory.user_knowledge]
        traits = [fact.text for fact in memory.agent_traits]
        style = self.deps.settings.answer_style
        system, user = build_prompt(
            query,
            memory.short_term,
            mid_term,
            memory.persona,
            knowledge,
            traits,
            # the speakers by the names their profiles give, as the paper's prompt has them
            user_name=_name(memory.persona.profile, "User"),
            assistant_name=_name(memory.persona.agent_profile, "Assistant"),
            style=style,
        )
        texts = prompt_texts(memory.short_term, mid_term, knowledge, traits)
        prompted = PromptMemory(query, texts, style, memory.persona.profile, knowledge)
        with acting_for(user_id):  # the tenant's budget pays for the answer
            answer = await self.deps.llm.respond(system, user, prompted)
        usage = {
            "prompt_tokens": answer.prompt_tokens,
            "completion_tokens": answer.completion_tokens,
        }
        remembered = record and not says_it_does_not_know(answer.text)
        if record:
            # A reply that only says it does not know is not memory; what the customer said
            # is, so the turn keeps the query with an empty response (as an unanswered message).
            kept = answer.text[:MAX_TEXT_CHARS] if remembered else ""
            turn = TurnEvent(
                user_id=user_id,
                turn_id=f"respond-{uuid4().hex}",
                query=query,
                response=kept,  # a long answer is kept whole in the reply
                timestamp=datetime.fromtimestamp(self.deps.clock.now(), UTC),
                assistant_id=assistant_id,
                conversation_id=conversation_id,
            )
            await self.write_turns([turn], client=True)
        return Responded(answer.text, memory, usage, remembered)

    async def persona(self, user_id: str, assistant_id: str | None = None) -> Persona:
        """The persona as ``assistant_id`` sees it: the API's profile over the extracted one."""
        persona, stated, agent_profile = await self.deps.repo.load_persona_view(
            user_id, assistant_id
        )
        return persona_view(persona, stated, agent_profile, assistant_id)

    async def set_profile(self, user_id: str, profile: dict[str, Any]) -> dict[str, Any]:
        """Replace the user's stated profile. Its own document, written only here: the persona
        stage writes what it extracts elsewhere, so the two never race, and this one wins.
        Flushed before the answer: no journal holds a second copy of it."""
        self.disk.check()
        await self.deps.repo.save_profile(user_id, profile)
        await self.deps.store.flush()
        return profile

    async def set_assistant_profile(
        self, assistant_id: str, profile: dict[str, Any]
    ) -> dict[str, Any]:
        self.disk.check()
        await self.deps.repo.save_assistant_profile(assistant_id, profile)
        await self.deps.store.flush()
        return profile

    async def assistant_profile(self, assistant_id: str) -> dict[str, Any]:
        return await self.deps.repo.load_assistant_profile(assistant_id)

    @tracing.traced("memoryos.forget", tracing.of_user)
    async def forget(self, user_id: str) -> dict[str, int]:
        """Delete everything of one user: the store's points now, then a forget marker.

        The marker follows the user's earlier events through every stage, and each stage
        purges what it owns when the marker reaches it, so nothing in flight brings the user
        back. Until the last stage has seen it, reads of the user show nothing.
        """
        async with self.forget_lock, self._user_locks.hold({user_id}):
            self.check_writable()  # the roll takes the forget lock too to start refusing
            at = round(self.deps.clock.now(), 3)  # milliseconds: what every store keeps exactly
            # Durable before destructive: the journal's copies of the user's turns go first, in
            # one transaction. If that fails (a full disk), nothing is removed and the 503 says
            # so; were the store emptied first, a restart would re-send those turns as live.
            await self.journal.forget_user(user_id)
            await self.deps.repo.open_forget(user_id, at)  # failing here removes nothing
            try:
                deleted = await self.deps.repo.forget_user(user_id, at)
                await self.deps.store.flush()  # no journal holds the deletion: flushed first
                self.term_counts.forget(user_id)
                self.visits.forget(user_id)
            finally:
                # With the tombstone written, the marker completes the DELETE in every stage
                # even if a step above failed: a real Kafka has no reconciler to send it later.
                marker = dumps(ForgetUser(user_id=user_id, at=at))
                await self.sink.send(TURNS, user_key(user_id), marker)
                # and down the messages path, behind the user's messages not yet paired
                await self.sink.send(MESSAGES, user_key(user_id), marker)
        return deleted

    async def history(self, user_id: str, limit: int = 20) -> dict[str, Any]:
        """Where the user's latest turns are in the pipeline, their dead letters, and their
        last DELETE: complete once its marker has passed every stage."""
        tombstone = await self.deps.repo.tombstone(user_id)
        erasure = tombstone and {"requested_at": _iso(tombstone[0]), "complete": not tombstone[1]}
        if erasure and not erasure["complete"]:
            return empty_history(user_id) | {"erasure": erasure}
        return await user_history(self.deps, self.journal, user_id, limit) | {"erasure": erasure}

    async def get_memory(self, user_id: str) -> dict[str, Any]:
        repo, now = self.deps.repo, self.deps.clock.now()
        if await self.forgetting(user_id):
            return _empty_memory(user_id)
        short_term, segments, heat_doc, persona, mtm_pages = await asyncio.gather(
            repo.stm_pages(user_id, with_vectors=False),
            repo.all_segments(user_id),
            repo.load_doc(user_id, HEAT_DOC),
            repo.load_persona(user_id),
            repo.mid_term_pages(user_id),
        )
        stated, agent_profile = await asyncio.gather(
            repo.load_profile(user_id), repo.load_assistant_profile(tenant_assistant(user_id, None))
        )
        assistants = {
            name: {
                "agent_profile": await repo.load_assistant_profile(tenant_assistant(user_id, name)),
                "agent_traits": traits,
            }
            for name, traits in persona.assistant_traits.items()
        }
        state = MidTermState.from_dict(heat_doc)
        params = self.deps.settings.heat_params
        # The heat the MTM stage decides with: recency at the latest event time it has seen,
        # not at the wall clock (for dated history the two differ by years).
        at = state.clock or now
        by_segment: dict[str, list[dict[str, Any]]] = {}
        for segment_id, page in mtm_pages:
            by_segment.setdefault(segment_id, []).append(page.public())
        mid_term = []
        for stored in sorted(segments, key=lambda s: s.segment.created_at):
            seg = stored.segment
            stats = state.segments.get(seg.segment_id)
            n_visit = stats.n_visit if stats else 0
            l_interaction = stats.l_interaction if stats else 0
            last_access = stats.last_access if stats else seg.last_access
            mid_term.append(
                {
                    "segment_id": seg.segment_id,
                    "summary": seg.summary,
                    "keywords": seg.keywords,
                    "n_visit": n_visit,
                    "l_interaction": l_interaction,
                    "last_access": _iso(last_access),
                    "heat": heat(n_visit, l_interaction, last_access, at, params),
                    "recency": recency(last_access, at, params.mu),
                    "pages": by_segment.get(seg.segment_id, []),
                }
            )
        return {
            "user_id": user_id,
            "short_term": [page.public() for page in short_term],
            "mid_term": mid_term,
            "persona": {
                "profile": persona.profile | stated,  # what the API set wins
                "stated_profile": stated,
                "traits": {k: v.model_dump() for k, v in persona.traits.items()},
                "user_knowledge": persona.user_knowledge,
                "agent_traits": persona.agent_traits,  # the default assistant's
                "agent_profile": agent_profile,
                "assistants": assistants,  # the named assistants, as seen with this user
            },
        }


def _empty_memory(user_id: str) -> dict[str, Any]:
    persona: dict[str, Any] = {
        "profile": {},
        "traits": {},
        "user_knowledge": [],
        "agent_traits": [],
        "agent_profile": {},
        "assistants": {},
    }
    return {"user_id": user_id, "short_term": [], "mid_term": [], "persona": persona}


def _iso(seconds: float) -> str:
    # a clock stored before record times were bounded may lie past the year 9999
    return datetime.fromtimestamp(min(seconds, MAX_EVENT_TIME), UTC).isoformat()


def _name(profile: Mapping[str, Any], otherwise: str) -> str:
    """A profile's ``name`` as a speaker's name in a prompt, when it is a name: letters,
    spaces, apostrophes and hyphens, at most 40, and not a role ("Assistant"). Anything else
    (an instruction, a second line) stays out of the system prompt."""
    name = profile.get("name")
    if not isinstance(name, str):
        return otherwise
    name = name.strip()
    if _A_NAME.fullmatch(name) and name.casefold() not in _ROLES:
        return name
    return otherwise


_A_NAME = re.compile(r"[^\W\d_](?:[^\W\d_]|[ '\u2019-]){0,39}")
_ROLES = frozenset({"user", "assistant", "ai", "system", "bot", "developer"})
