"""Heat agent: segment changes and retrieval hits -> heat counters, eviction, persona jobs."""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence
from typing import Annotated, Any

from pydantic import Field, RootModel

from adapters.deps import Deps, Send
from adapters.repository import HEAT_DOC
from agents.runtime import BatchRunner
from memory.mtm import AddOutcome, MidTermState
from schemas.codec import dumps
from schemas.records import PersonaJob, RetrievalHit, SegmentChange
from schemas.topics import user_key


class HeatEvent(RootModel[Annotated[SegmentChange | RetrievalHit, Field(discriminator="kind")]]):
    """The two inputs of the heat agent, told apart by ``kind``."""


class HeatAgent:
    stage = "heat"

    def __init__(
        self,
        deps: Deps,
        states: MutableMapping[str, Any],
        send_job: Send,
        runner: BatchRunner[HeatEvent],
    ) -> None:
        self.deps = deps
        self.states = states
        self.send_job = send_job
        self.runner = runner

    async def process(self, events: Sequence[Any]) -> None:
        await self.runner.process(
            events, lambda event: event.root.user_id, lambda e: self.apply(e.root)
        )

    async def apply(self, event: SegmentChange | RetrievalHit) -> None:
        deps, settings = self.deps, self.deps.settings
        user_id = event.user_id
        state = await self.state(user_id)
        now = deps.clock.now()
        late_pages: list[str] = []
        if isinstance(event, SegmentChange):
            added = state.add_page(event.segment_id, event.page_id, now, event.created)
            if added.outcome is AddOutcome.DUPLICATE:
                return
            if added.outcome is AddOutcome.EVICTED:
                late_pages.append(event.page_id)  # placed after its segment was evicted
        elif not state.record_visits(event.segment_ids, now):
            return
        params = deps.settings.heat_params
        evicted = state.evict_over_capacity(settings.mtm_capacity, now, params)
        hot = state.hot_segments(settings.heat_tau, now, params)
        # Jobs go out before the reset is recorded: a crash replays the event and re-sends
        # the job, which the persona agent absorbs (facts are de-duplicated).
        for segment_id in hot:
            job = PersonaJob(user_id=user_id, segment_id=segment_id, at=now)
            await self.send_job(key=user_key(user_id), value=dumps(job))
            state.reset_interaction(segment_id)
        # One store call for all the pages that leave: the evicted segments' and late ones.
        await deps.repo.delete_pages(
            [page for stats in evicted for page in stats.page_ids] + late_pages
        )
        await deps.repo.delete_segments([stats.segment_id for stats in evicted])
        await self.save(user_id, state)
        deps.metrics.transitions.labels(transition="segment_evicted").inc(len(evicted))

    async def state(self, user_id: str) -> MidTermState:
        cached = self.states.get(user_id)
        if cached is None:
            cached = await self.deps.repo.load_doc(user_id, HEAT_DOC)
        return MidTermState.from_dict(cached)

    async def save(self, user_id: str, state: MidTermState) -> None:
        data = state.to_dict()
        await self.deps.repo.save_doc(user_id, HEAT_DOC, data)
        self.states[user_id] = data
