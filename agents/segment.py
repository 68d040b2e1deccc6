"""Segment agent: pages evicted from STM -> a mid-term segment (match by F, or a new one)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from adapters.deps import Deps, Send
from adapters.repository import MTM
from agents.runtime import BatchRunner
from memory import ids
from memory.scoring import SegmentCandidate, choose_segment
from memory.segments import centroid_update, merge_keywords
from memory.text import keyword_set
from schemas.codec import dumps
from schemas.records import EvictedPage, Page, Segment, SegmentChange
from schemas.topics import user_key

CANDIDATE_SEGMENTS = 16  # nearest segments by cosine whose F is computed exactly


class SegmentAgent:
    stage = "segment"

    def __init__(self, deps: Deps, send_change: Send, runner: BatchRunner[EvictedPage]) -> None:
        self.deps = deps
        self.send_change = send_change
        self.runner = runner

    async def process(self, events: Sequence[Any]) -> None:
        await self.runner.process(
            events, lambda event: event.page.user_id, lambda e: self.assign(e.page)
        )

    async def assign(self, page: Page) -> None:
        deps = self.deps
        if page.vector is None:
            raise ValueError(f"evicted page {page.page_id} carries no vector")
        stored = await deps.repo.page_tiers([page.page_id])
        if stored.get(page.page_id) == MTM:
            return  # a replay: the page already lives in a segment
        topics = await deps.llm.topics(page.text)
        keywords = merge_keywords([], [kw for topic in topics for kw in topic.keywords])
        nearest = await deps.repo.nearest_segments(page.user_id, page.vector, CANDIDATE_SEGMENTS)
        candidates = [
            SegmentCandidate(
                s.segment.segment_id, score, frozenset(keyword_set(s.segment.keywords))
            )
            for score, s in nearest
        ]
        chosen, _score = choose_segment(candidates, keyword_set(keywords), deps.settings.theta)
        now = deps.clock.now()
        if chosen is None:
            summary = " ".join(t.content for t in topics if t.content) or page.text
            segment = Segment(
                segment_id=ids.segment_id(page.user_id, page.page_id),
                user_id=page.user_id,
                summary=summary,
                keywords=keywords,
                page_ids=[page.page_id],
                last_access=now,
                created_at=now,
            )
            vector, size = list(page.vector), 1
        else:
            match = next(s for _, s in nearest if s.segment.segment_id == chosen)
            summary = await deps.llm.segment_summary(match.segment.summary, page.text)
            segment = match.segment.model_copy(
                update={
                    "summary": summary,
                    "keywords": merge_keywords(match.segment.keywords, keywords),
                    "page_ids": [*match.segment.page_ids, page.page_id],
                }
            )
            vector = centroid_update(match.vector, match.size, page.vector)
            size = match.size + 1
        if deps.settings.segment_vector == "summary":
            vector = (await deps.embedder.embed([segment.summary]))[0]
        change = SegmentChange(
            user_id=page.user_id,
            segment_id=segment.segment_id,
            page_id=page.page_id,
            created=chosen is None,
            at=now,
        )
        # Announce first, then mark the page as placed: a crash in between replays the
        # placement (same ids), whereas the reverse order would hide the page from heat.
        await self.send_change(key=user_key(page.user_id), value=dumps(change))
        await deps.repo.save_segment(segment, vector, size)
        await deps.repo.save_pages(
            [page.model_copy(update={"keywords": keywords})], MTM, segment.segment_id
        )
        transition = "segment_created" if chosen is None else "segment_merged"
        deps.metrics.transitions.labels(transition=transition).inc()
