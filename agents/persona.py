"""Persona stage: a hot segment's new pages -> user traits, knowledge and stated profile
attributes (shared by the tenant's assistants), and agent traits per assistant (LPM).

It owns the user's facts (``FactBook``): extraction, supersession and the API's edits (a
``FactEdit`` in the same ordered stream) are applied here only, one at a time per user.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime

from adapters import history
from adapters.deps import Deps, Send
from adapters.events_out import EventOut, NoEvents
from adapters.journal import Journal, NoJournal
from adapters.keyring import generation
from adapters.llm.prompts import dialogue_text
from agents.forget import SAME_DELETE_S, check_marker
from agents.runtime import BatchRunner, Consumed, RecordStage
from memory.events import fact_events, job_key, persona_updated, user_forgotten
from memory.fact_book import Delta, current, fit
from memory.facts import Found, PageText, book_from_persona, edited, extracted
from memory.persona import FactKind, assistant_of, merge_traits, with_agent_traits
from memory.profile import PATTERNS, profile_from_facts
from schemas.codec import dumps
from schemas.errors import InvalidEvent
from schemas.events import MemoryEvent
from schemas.facts import Fact, FactBook, FactChange, FactEdit, FactSource, PersonaInput
from schemas.records import ForgetUser, Page, Persona, PersonaApplied, PersonaJob, Trait
from schemas.topics import user_key

KNOWN_FACTS_SHOWN = 50  # the newest current facts the LLM sees, to name those a fact updates


class PersonaAgent(RecordStage):
    stage = "persona"

    def __init__(
        self,
        deps: Deps,
        send_mid_term: Send,
        runner: BatchRunner[PersonaInput],
        journal: Journal | None = None,
        events: EventOut | None = None,
    ) -> None:
        self.deps = deps
        self.send_mid_term = send_mid_term
        self.runner = runner
        self.journal: Journal = journal or NoJournal()
        self.events = events or NoEvents()

    async def handle(self, item: Consumed[PersonaInput]) -> None:
        """A fact edit comes from the API sealed with the user's key: a plain one was written
        to the topic by someone else, and changes nothing."""
        if isinstance(item.record.root, FactEdit) and item.gen is None:
            raise InvalidEvent("a fact edit must be sealed with the user's key", field="body")
        await self.apply(item.record.root)

    async def apply(self, event: PersonaJob | FactEdit | ForgetUser) -> None:
        if isinstance(event, ForgetUser):
            await self.forget(event)
        elif isinstance(event, FactEdit):
            await self.edit(event)
        else:
            await self.update(event)

    async def update(self, job: PersonaJob) -> None:
        deps, settings = self.deps, self.deps.settings
        pages = await deps.repo.pages_by_id(job.user_id, job.page_ids)
        if pages:
            # User memory is shared by the tenant's assistants; agent traits are per assistant.
            by_assistant: dict[str, list[Page]] = {}
            for page in pages:
                by_assistant.setdefault(assistant_of(page.assistant_id), []).append(page)
            dialogue = dialogue_text(pages)
            persona = await deps.repo.load_persona(job.user_id)
            book = await self._book(persona)
            known = current(book, FactKind.USER)[-KNOWN_FACTS_SHOWN:]
            # LLMError propagates: the runner retries and dead-letters; nothing half-done is
            # stored, and no acknowledgement goes back, so the segment stays hot.
            segments = await deps.repo.segments_by_id([job.segment_id])
            summary = segments[0].segment.summary if segments else ""
            traits, user_facts, updates, agent_found = await self._analyse(
                persona, dialogue, by_assistant, [fact.text for fact in known], summary
            )
            at = self._now()
            user_found = [
                Found(text, tuple(known[n - 1].fact_id for n in numbers))
                for text, numbers in zip(user_facts, updates, strict=True)
            ]
            book, delta = extracted(
                book, FactKind.USER, user_found, None, _texts(pages), at, settings.user_kb_capacity
            )
            deltas = [delta]
            for assistant, found in zip(by_assistant, agent_found, strict=True):
                book, delta = extracted(
                    book,
                    FactKind.AGENT,
                    [Found(text) for text in found],
                    assistant,
                    _texts(by_assistant[assistant]),
                    at,
                    settings.agent_traits_capacity,
                )
                deltas.append(delta)
            updated = persona.model_copy(
                update={
                    "traits": merge_traits(persona.traits, traits),
                    # stated attributes; the API's profile is another document and wins on read
                    "profile": persona.profile | profile_from_facts(_texts_of(book)),
                }
            )
            await self._store(book, updated, deltas, job)
            deps.metrics.transitions.labels(transition="persona_update").inc()
        applied = PersonaApplied(
            user_id=job.user_id, segment_id=job.segment_id, page_ids=job.page_ids
        )
        await self.send_mid_term(key=user_key(job.user_id), value=dumps(applied))

    async def edit(self, change: FactEdit) -> None:
        """An API edit, applied in the user's order; a re-sent one changes nothing."""
        settings = self.deps.settings
        persona = await self.deps.repo.load_persona(change.user_id)
        book = await self._book(persona)
        agent = change.fact_kind == "agent_trait" or any(
            f.fact_id == change.fact_id and f.kind == "agent_trait" for f in book.facts
        )
        capacity = settings.agent_traits_capacity if agent else settings.user_kb_capacity
        after, delta = edited(book, change, self._now(), capacity)
        if after is not book:
            # An attribute that only the changed fact stated is no longer known.
            profile = {
                key: value
                for key, value in persona.profile.items()
                if key not in _attributes(delta.unstored)
            } | profile_from_facts(_texts_of(after))
            try:
                persona = persona.model_copy(update={"profile": profile})
                await self._store(after, persona, [delta], change)
            except InvalidEvent:
                # it can never be stored: dead-lettered once, not re-sent by every pass
                await self.journal.settle_fact_edits(change.user_id, [change.edit_id])
                raise
        await self.journal.settle_fact_edits(change.user_id, [change.edit_id])

    async def _book(self, persona: Persona) -> FactBook:
        """The user's facts; a persona from before facts were records gets a book made of
        its fact lists."""
        book = await self.deps.repo.load_fact_book(persona.user_id)
        return book if book is not None else book_from_persona(persona, self._now())

    async def _store(
        self,
        book: FactBook,
        persona: Persona,
        deltas: Sequence[Delta],
        cause: PersonaJob | FactEdit,
    ) -> None:
        """Events, then points, the book and the persona last: a crash in between leaves the
        job (or the edit) unacknowledged, and applying it again writes the same (and makes
        the same event ids)."""
        book, dropped = fit(book)  # within what the store takes, before any point is written
        epoch = await self.deps.repo.last_delete(book.user_id)
        await self.events.emit(self._announced(book.user_id, deltas, dropped, cause, epoch))
        gone = {fact.fact_id for fact in dropped}
        stored = [fact for delta in deltas for fact in delta.stored if fact.fact_id not in gone]
        unstored = [fact for delta in deltas for fact in delta.unstored] + dropped
        repo = self.deps.repo
        await repo.delete_fact_points(book.user_id, unstored)
        if stored:
            vectors = await self.deps.embedder.embed([fact.text for fact in stored])
            await repo.save_fact_points(book.user_id, stored, vectors)
        await repo.save_fact_book(book)
        # The persona's fact lists are the book's current facts, in their FIFO order.
        persona = persona.model_copy(
            update={"user_knowledge": [f.text for f in current(book, FactKind.USER)]}
        )
        assistants = {f.assistant_id or "" for f in book.facts if f.kind == "agent_trait"}
        assistants |= set(persona.assistant_traits) | {""}
        for assistant in assistants:
            texts = [f.text for f in current(book, FactKind.AGENT, assistant or None)]
            persona = with_agent_traits(persona, assistant or None, texts)
        await repo.save_persona(persona)

    def _announced(
        self,
        user_id: str,
        deltas: Sequence[Delta],
        dropped: Sequence[Fact],
        cause: PersonaJob | FactEdit,
        epoch: int,
    ) -> list[MemoryEvent]:
        room = [
            (fact, FactChange(change="deleted", at=fact.created_at, source=FactSource()))
            for fact in dropped
        ]
        changes = [change for delta in deltas for change in delta.changes] + room
        at = self.deps.clock.now()
        if isinstance(cause, FactEdit):
            return fact_events(user_id, changes, cause.edit_id, at, epoch)
        key = job_key(cause.segment_id, cause.page_ids)
        updated = persona_updated(user_id, cause.segment_id, cause.page_ids, changes, at, epoch)
        return [*fact_events(user_id, changes, key, at, epoch), updated]

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self.deps.clock.now(), UTC)

    async def _analyse(
        self,
        persona: Persona,
        dialogue: str,
        by_assistant: dict[str, list[Page]],
        known: Sequence[str],
        summary: str = "",
    ) -> tuple[dict[str, Trait], list[str], list[tuple[int, ...]], list[list[str]]]:
        """Traits and user facts of the whole dialogue, agent facts of each assistant's part:
        one call when a single assistant took part and calls may be combined."""
        llm = self.deps.llm
        if self.deps.settings.llm_combine and len(by_assistant) == 1:
            found = await llm.persona(persona.traits, dialogue, known, summary)
            facts = found.user_knowledge
            updates = [*found.user_updates, *([()] * len(facts))][: len(facts)]
            return found.traits, facts, updates, [found.agent_traits]
        (traits, user_facts), agent_facts = await asyncio.gather(
            asyncio.gather(llm.user_traits(persona.traits, dialogue), llm.user_knowledge(dialogue)),
            asyncio.gather(
                *(llm.agent_traits(dialogue_text(pages)) for pages in by_assistant.values())
            ),
        )
        return traits, user_facts, [()] * len(user_facts), list(agent_facts)

    async def forget(self, marker: ForgetUser) -> None:
        """The last stage: purge the persona and close the tombstone; reads resume. Only
        then is ``memory.user.forgotten`` sent (kept in the outbox before, so a crash cannot
        lose it); a marker of a DELETE already complete sends it again, with its id."""
        repo = self.deps.repo
        event = user_forgotten(marker.user_id, marker.at, self.deps.clock.now())
        if not await check_marker(repo, marker):
            stone = await repo.tombstone(marker.user_id)
            if stone is not None and not stone[1] and abs(stone[0] - marker.at) <= SAME_DELETE_S:
                await self.events.publish([event])
            return
        await self.events.keep([event])
        await repo.purge_persona(marker.user_id)
        await history.purge(repo, marker.user_id)  # dead letters noted in flight
        await self.deps.keyring.destroy_before(marker.user_id, generation(marker.at))
        await repo.mark_forgotten(marker.user_id, marker.at)
        await self.events.publish([event])


def _texts(pages: Sequence[Page]) -> list[PageText]:
    return [PageText(page.page_id, page.turn_id, page.text) for page in pages]


def _texts_of(book: FactBook) -> list[str]:
    return [fact.text for fact in current(book, FactKind.USER)]


def _attributes(facts: Sequence[Fact]) -> set[str]:
    texts = [fact.text for fact in facts]
    return {attribute for attribute, pattern in PATTERNS if any(pattern.search(t) for t in texts)}
