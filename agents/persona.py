"""Persona agent: a hot segment's pages -> user traits, user knowledge, agent traits (LPM)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from adapters.deps import Deps
from adapters.llm.prompts import dialogue_text
from agents.runtime import BatchRunner
from memory.persona import append_facts, merge_traits
from schemas.records import Persona, PersonaJob


class PersonaAgent:
    stage = "persona"

    def __init__(self, deps: Deps, runner: BatchRunner[PersonaJob]) -> None:
        self.deps = deps
        self.runner = runner

    async def process(self, events: Sequence[Any]) -> None:
        await self.runner.process(events, lambda job: job.user_id, self.update)

    async def update(self, job: PersonaJob) -> None:
        deps, settings = self.deps, self.deps.settings
        pages = await deps.repo.pages_of_segment(job.user_id, job.segment_id)
        if not pages:
            return  # evicted before its turn came: nothing left to learn from
        dialogue = dialogue_text(pages)
        persona = await deps.repo.load_persona(job.user_id)
        # LLMError propagates: the runner retries and dead-letters; nothing half-done is stored.
        traits, user_facts, agent_facts = await asyncio.gather(
            deps.llm.user_traits(persona.traits, dialogue),
            deps.llm.user_knowledge(dialogue),
            deps.llm.agent_traits(dialogue),
        )
        knowledge, dropped_knowledge = append_facts(
            persona.user_knowledge, user_facts, settings.user_kb_capacity
        )
        agent_traits, dropped_traits = append_facts(
            persona.agent_traits, agent_facts, settings.agent_traits_capacity
        )
        await self._store_facts(
            job.user_id, "user_knowledge", persona.user_knowledge, knowledge, dropped_knowledge
        )
        await self._store_facts(
            job.user_id, "agent_traits", persona.agent_traits, agent_traits, dropped_traits
        )
        updated = Persona(
            user_id=job.user_id,
            profile=persona.profile,
            agent_profile=persona.agent_profile,
            traits=merge_traits(persona.traits, traits),
            user_knowledge=knowledge,
            agent_traits=agent_traits,
        )
        await deps.repo.save_persona(updated)
        deps.metrics.transitions.labels(transition="persona_update").inc()

    async def _store_facts(
        self,
        user_id: str,
        kind: str,
        before: Sequence[str],
        after: Sequence[str],
        dropped: Sequence[str],
    ) -> None:
        known = set(before)
        fresh = [fact for fact in after if fact not in known]
        if fresh:
            vectors = await self.deps.embedder.embed(fresh)
            await self.deps.repo.save_facts(user_id, kind, fresh, vectors)
        await self.deps.repo.delete_facts(user_id, kind, dropped)
