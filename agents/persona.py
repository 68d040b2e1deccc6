"""Persona stage: a hot segment's new pages -> user traits, knowledge and stated profile
attributes (shared by the tenant's assistants), and agent traits per assistant (LPM)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from adapters import history
from adapters.deps import Deps, Send
from adapters.keyring import generation
from adapters.llm.prompts import dialogue_text
from agents.forget import check_marker
from agents.runtime import BatchRunner, RecordStage
from memory.persona import (
    FactKind,
    agent_traits_of,
    append_facts,
    assistant_of,
    merge_traits,
    with_agent_traits,
)
from memory.profile import profile_from_facts
from schemas.codec import dumps
from schemas.records import (
    ForgetUser,
    Page,
    Persona,
    PersonaApplied,
    PersonaInput,
    PersonaJob,
    Trait,
)
from schemas.topics import user_key


class PersonaAgent(RecordStage):
    stage = "persona"

    def __init__(self, deps: Deps, send_mid_term: Send, runner: BatchRunner[PersonaInput]) -> None:
        self.deps = deps
        self.send_mid_term = send_mid_term
        self.runner = runner

    async def apply(self, event: PersonaJob | ForgetUser) -> None:
        if isinstance(event, ForgetUser):
            await self.forget(event)
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
            # LLMError propagates: the runner retries and dead-letters; nothing half-done is
            # stored, and no acknowledgement goes back, so the segment stays hot.
            traits, user_facts, agent_facts = await self._analyse(persona, dialogue, by_assistant)
            knowledge, dropped_knowledge = append_facts(
                persona.user_knowledge, user_facts, settings.user_kb_capacity
            )
            await self._store_facts(
                job.user_id, FactKind.USER, persona.user_knowledge, knowledge, dropped_knowledge
            )
            updated = persona.model_copy(
                update={
                    "traits": merge_traits(persona.traits, traits),
                    "user_knowledge": knowledge,
                    # stated attributes; the API's profile is another document and wins on read
                    "profile": persona.profile | profile_from_facts(user_facts),
                }
            )
            for assistant, facts in zip(by_assistant, agent_facts, strict=True):
                before = agent_traits_of(persona, assistant)
                after, dropped = append_facts(before, facts, settings.agent_traits_capacity)
                await self._store_facts(
                    job.user_id, FactKind.AGENT, before, after, dropped, assistant
                )
                updated = with_agent_traits(updated, assistant, after)
            await deps.repo.save_persona(updated)
            deps.metrics.transitions.labels(transition="persona_update").inc()
        applied = PersonaApplied(
            user_id=job.user_id, segment_id=job.segment_id, page_ids=job.page_ids
        )
        await self.send_mid_term(key=user_key(job.user_id), value=dumps(applied))

    async def _analyse(
        self, persona: Persona, dialogue: str, by_assistant: dict[str, list[Page]]
    ) -> tuple[dict[str, Trait], list[str], list[list[str]]]:
        """Traits and user facts of the whole dialogue, agent facts of each assistant's part:
        one call when a single assistant took part and calls may be combined."""
        llm = self.deps.llm
        if self.deps.settings.llm_combine and len(by_assistant) == 1:
            found = await llm.persona(persona.traits, dialogue)
            return found.traits, found.user_knowledge, [found.agent_traits]
        (traits, user_facts), agent_facts = await asyncio.gather(
            asyncio.gather(llm.user_traits(persona.traits, dialogue), llm.user_knowledge(dialogue)),
            asyncio.gather(
                *(llm.agent_traits(dialogue_text(pages)) for pages in by_assistant.values())
            ),
        )
        return traits, user_facts, list(agent_facts)

    async def forget(self, marker: ForgetUser) -> None:
        """The last stage: purge the persona and close the tombstone; reads resume."""
        if not await check_marker(self.deps.repo, marker):
            return
        await self.deps.repo.purge_persona(marker.user_id)
        await history.purge(self.deps.repo, marker.user_id)  # dead letters noted in flight
        await self.deps.keyring.destroy_before(marker.user_id, generation(marker.at))
        await self.deps.repo.mark_forgotten(marker.user_id, marker.at)

    async def _store_facts(
        self,
        user_id: str,
        kind: FactKind,
        before: Sequence[str],
        after: Sequence[str],
        dropped: Sequence[str],
        assistant_id: str | None = None,
    ) -> None:
        known = set(before)
        fresh = [fact for fact in after if fact not in known]
        if fresh:
            vectors = await self.deps.embedder.embed(fresh)
            await self.deps.repo.save_facts(user_id, kind, fresh, vectors, assistant_id)
        await self.deps.repo.delete_facts(user_id, kind, dropped, assistant_id)
