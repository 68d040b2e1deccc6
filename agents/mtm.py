"""MTM stage: segment assignment and heat bookkeeping, the one writer of a user's segments.

Evicted pages, retrieval visits and persona acknowledgements reach it in one ordered stream per
user, so a merge and an eviction can never interleave (two stages that both changed segments
once let a merge re-save a segment the other had just evicted).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any

from adapters.deps import Deps, Send
from adapters.events_out import EventOut, NoEvents
from adapters.ports import Topic
from adapters.repository import HEAT_DOC, LEAVING, MTM, StoredSegment
from adapters.token_budget import acting_for
from agents.forget import check_marker
from agents.runtime import BatchRunner, Consumed, RecordStage, bind_event
from memory import ids
from memory.events import segment_created, segment_evicted
from memory.mtm import MidTermState
from memory.scoring import choose_segment
from memory.segments import centroid_update, merge_keywords, merged_segment, new_segment
from memory.text import keyword_set
from schemas.codec import dumps
from schemas.errors import InvalidEvent
from schemas.records import (
    EvictedPage,
    ForgetUser,
    MidTermInput,
    Page,
    PersonaApplied,
    PersonaJob,
    Resume,
    RetrievalHit,
    Segment,
)
from schemas.topics import user_key

log = logging.getLogger(__name__)
PERSONA_PAGES_PER_JOB = 16  # bounds the persona prompt; a bigger backlog takes several jobs

MidTermEvent = EvictedPage | RetrievalHit | PersonaApplied | Resume | ForgetUser


class MidTermAgent(RecordStage):
    stage = "mtm"

    def __init__(
        self,
        deps: Deps,
        states: MutableMapping[str, Any],
        send_persona: Send,
        runner: BatchRunner[MidTermInput],
        events: EventOut | None = None,
    ) -> None:
        self.deps = deps
        self.states = states
        self.send_persona = send_persona
        self.runner = runner
        self.events = events or NoEvents()
        self.run_max = deps.settings.llm_run_max
        # Per page and per user, for the runs in progress (users run concurrently):
        self._topics_ahead: dict[str, list[Topic]] = {}  # page id -> topics asked together
        self._deferring: set[str] = set()  # users whose merged summaries wait for the run's end
        # Per user, the persona jobs sent by attempts whose state save then failed: the job is
        # out, and a retry (which starts from the saved state) must not send it again.
        self._sent_unsaved: dict[str, set[tuple[str, tuple[str, ...]]]] = {}

    async def handle_run(
        self, items: Sequence[Consumed[MidTermInput]], done: Callable[[Consumed[Any]], None]
    ) -> None:
        """A user's queued events in order, sharing LLM calls: the evicted pages' topics in
        one call, and one summary call per segment they joined, after the last of them.

        Placement reads a segment's keywords and centroid, never its summary, so writing
        the summaries at the end places every page as one by one would. The pages a summary
        still owes are in the user's state: a crash before they are written leaves them
        owed, and the user's next run writes them.
        """
        user_id = self.runner.user_of(items[0].record)
        with acting_for(user_id):  # the shared calls are the user's tenant's, as each event's
            await self._handle_run(user_id, items, done)

    async def _handle_run(
        self,
        user_id: str,
        items: Sequence[Consumed[MidTermInput]],
        done: Callable[[Consumed[Any]], None],
    ) -> None:
        pages = [
            item.record.root.page for item in items if isinstance(item.record.root, EvictedPage)
        ]
        defer = len(pages) > 1 and self.deps.settings.segment_vector == "centroid"
        if len(pages) > 1:
            await self._ask_topics_ahead(pages)
        if defer:
            self._deferring.add(user_id)
        try:
            for group in _visit_groups(items):
                if len(group) > 1:
                    await self.runner.run_together(group, self._record_visits, self.handle)
                else:
                    await self.runner.run_one(group[0], self.handle)
        finally:
            self._deferring.discard(user_id)
            for page in pages:
                self._topics_ahead.pop(page.page_id, None)
        if pages:
            bind_event(items[-1].source)
            await self._write_owed_summaries(user_id, {page.page_id: page for page in pages})
        for item in items:
            done(item)

    async def _record_visits(self, group: Sequence[Consumed[MidTermInput]]) -> None:
        """Consecutive retrieval visits of one user: one state read and one write for all.

        One at a time, a user retrieved from often rewrote the whole heat document per
        retrieve. Visits add no segment, so nothing is evicted between them. Persona jobs are
        judged once, at the last visit's time: a segment's heat there differs from midway only
        by its recency decaying over the run's span (seconds against mu = 1e7 s).
        """
        hits = [i.record.root for i in group if isinstance(i.record.root, RetrievalHit)]
        state = await self.state(hits[0].user_id)
        changed = False
        for hit in hits:
            now = state.advance(hit.at)
            changed |= bool(state.record_visits(hit.segment_ids, now, hit.counts, hit.times))
        if changed:
            await self.settle(hits[0].user_id, state)

    async def _ask_topics_ahead(self, pages: Sequence[Page]) -> None:
        """The topics of the run's pages still to place, in one call. A failure here only
        means each page asks on its own, under the error policy."""
        try:
            tiers = await self.deps.repo.page_tiers([page.page_id for page in pages])
            todo = [page for page in pages if tiers.get(page.page_id) == LEAVING]
            if len(todo) < 2:
                return
            found = await self.deps.llm.topics_many([page.text for page in todo])
            self._topics_ahead.update(zip((p.page_id for p in todo), found, strict=True))
        except Exception as exc:
            log.warning("topics for %d pages in one call failed (%r); one by one", len(pages), exc)

    async def _write_owed_summaries(self, user_id: str, known: Mapping[str, Page]) -> None:
        """One summary call per segment whose summary misses pages that joined it."""
        deps = self.deps
        try:
            state = await self.state(user_id)
            owed = state.stale_summaries()
            if not owed:
                return
            wanted = [page for pages in owed.values() for page in pages if page not in known]
            texts = {pid: page.text for pid, page in known.items()}
            if wanted:
                found = await deps.repo.pages_by_id(user_id, wanted)
                texts.update({page.page_id: page.text for page in found})
            stored = {
                kept.segment.segment_id: kept for kept in await deps.repo.segments_by_id(list(owed))
            }

            async def rewrite(kept: StoredSegment, page_ids: list[str]) -> None:
                dialogue = "\n".join(texts[pid] for pid in page_ids if pid in texts)
                if dialogue:
                    summary = await deps.llm.segment_summary(kept.segment.summary, dialogue)
                    segment = kept.segment.model_copy(update={"summary": summary})
                    await deps.repo.save_segment(segment, kept.vector, kept.size)

            await asyncio.gather(*(rewrite(kept, owed[sid]) for sid, kept in stored.items()))
            state.summaries_written(owed)
            data = state.to_dict()
            await deps.repo.save_doc(user_id, HEAT_DOC, data)
            self.states[user_id] = data
        except Exception as exc:
            # Still owed in the state: the user's next run tries again.
            log.warning("summaries of %s's segments not written (%r); owed", user_id, exc)

    async def apply(self, event: MidTermEvent) -> None:
        if isinstance(event, ForgetUser):
            await self.forget(event)
            return
        state = await self.state(event.user_id)
        if isinstance(event, EvictedPage):
            await self.place(state, event.page)
            return
        if isinstance(event, RetrievalHit):
            now = state.advance(event.at)
            changed = bool(state.record_visits(event.segment_ids, now, event.counts, event.times))
        elif isinstance(event, PersonaApplied):
            changed = state.persona_applied(event.segment_id, event.page_ids)
        else:
            state.resume()
            await self.repair(event.user_id, state)
            changed = True
        if changed:
            await self.settle(event.user_id, state)

    async def repair(self, user_id: str, state: MidTermState) -> None:
        """After a restart, make the state, the segments and the pages agree again. Each
        collection of the store has its own log: one damaged after a crash falls back to its
        last flush while the others do not, and a segment may then be gone while its pages
        and the state still name it. The state forgets such segments, and their pages go back
        to ``leaving`` (a crash now leaves them to the reconciler) and are placed again."""
        stored = {kept.segment.segment_id for kept in await self.deps.repo.all_segments(user_id)}
        lost = [segment_id for segment_id in list(state.segments) if segment_id not in stored]
        for segment_id in lost:
            state.remove(segment_id)
        orphans = await self.deps.repo.unplace_orphans(user_id, stored)
        if lost or orphans:
            log.warning(
                "%s: %d segments the store no longer holds, %d pages to place again",
                user_id,
                len(lost),
                len(orphans),
            )
        for page in orphans:
            await self.place(state, page)

    async def place(self, state: MidTermState, page: Page) -> None:
        """Put an evicted page into its best segment (F > theta) or a new one.

        Write order: the segment, then the state (``settle``), then the page as MTM last.
        Until that last write the page stays ``leaving``, and the reconciler hands it over
        again; the state then already owns it, and only the last write is repeated.
        """
        deps = self.deps
        if page.vector is None:
            raise InvalidEvent(f"evicted page {page.page_id} carries no vector", field="page")
        tier = (await deps.repo.page_tiers([page.page_id])).get(page.page_id)
        if tier != LEAVING:
            # Placed already, or gone (its segment evicted, its user deleted): this is a
            # duplicate or a stale copy, and placing it would resurrect the page. Placed, its
            # chain's summary is spread again (a retry after the spread failed).
            if tier == MTM:
                await deps.repo.follow_chain_summary(page)
            return
        owner = state.owner_of(page.page_id)
        if owner is None:
            keywords = await self.assign(state, page)
            await self.settle(page.user_id, state)
            owner = state.owner_of(page.page_id)
            page = page.model_copy(update={"keywords": keywords})
        if owner is None:
            await deps.repo.delete_pages([page.page_id])  # its segment was evicted at once
        else:
            await deps.repo.update_pages([page], MTM, owner)
            # the newest page of its chain to leave STM: the earlier ones take its summary
            await deps.repo.follow_chain_summary(page)

    async def assign(self, state: MidTermState, page: Page) -> list[str]:
        """Choose or open the page's segment, save it, and count the page; its keywords."""
        deps, settings = self.deps, self.deps.settings
        assert page.vector is not None
        deferring = page.user_id in self._deferring
        nearest = [
            (score, stored)
            for score, stored in await deps.repo.nearest_segments(
                # every segment of the user (eviction keeps them within the capacity): F is
                # the paper's over all of them, not over a cosine pre-cut that can miss the
                # segment whose keywords match
                page.user_id,
                page.vector,
                settings.mtm_capacity + 1,
                with_vectors=False,
            )
            if stored.segment.segment_id in state  # only live segments: no zombies
        ]
        holder = next((s for _, s in nearest if page.page_id in s.segment.page_ids), None)
        topics = self._topics_ahead.pop(page.page_id, None)
        summary_with: tuple[str, str] | None = None  # (segment, its summary with this page)
        if topics is None and nearest and holder is None and not deferring and settings.llm_combine:
            # The likeliest segment is the nearest: ask its merged summary with the topics.
            likeliest = nearest[0][1].segment
            topics, merged = await deps.llm.topics_summary(page.text, likeliest.summary)
            summary_with = (likeliest.segment_id, merged)
        elif topics is None:
            topics = await deps.llm.topics(page.text)
        keywords = merge_keywords([], [kw for topic in topics for kw in topic.keywords])
        now = state.advance(page.timestamp.timestamp())
        if holder is not None:
            # A merge saved before the state was (a retry, a crash): adopt it, never merge twice.
            if holder.segment.segment_id == ids.segment_id(page.user_id, page.page_id):
                # opened by this page: its announcement may be what the crash cut off
                await self._announce_created(holder.segment, page)
            state.add_page(holder.segment.segment_id, page.page_id, now, created=False)
            if deferring:
                state.summary_owed(holder.segment.segment_id, page.page_id)
            return keywords
        chosen, _ = choose_segment(
            [stored.candidate(score) for score, stored in nearest],
            keyword_set(keywords),
            settings.theta,
        )
        if chosen is None:
            summary = " ".join(t.content for t in topics if t.content)
            segment_id = ids.segment_id(page.user_id, page.page_id)
            segment = new_segment(segment_id, page, summary, keywords, now)
            vector, size = list(page.vector), 1
        else:
            # F needs no vectors; the chosen segment's is read alone, for its centroid
            (match,) = await deps.repo.segments_by_id([chosen])
            summary = match.segment.summary
            if summary_with is not None and summary_with[0] == chosen:
                summary = summary_with[1]
            elif not deferring:
                summary = await deps.llm.segment_summary(summary, page.text)
            segment = merged_segment(match.segment, page, summary, keywords)
            vector = centroid_update(match.vector, match.size, page.vector)
            size = match.size + 1
        if settings.segment_vector == "summary":
            vector = (await deps.embedder.embed([segment.summary]))[0]
        if chosen is None:
            await self._announce_created(segment, page)
        await deps.repo.save_segment(segment, vector, size)
        state.add_page(segment.segment_id, page.page_id, now, chosen is None)
        if chosen is not None and deferring:
            state.summary_owed(segment.segment_id, page.page_id)
        transition = "segment_created" if chosen is None else "segment_merged"
        deps.metrics.transitions.labels(transition=transition).inc()
        return keywords

    async def _announce_created(self, segment: Segment, page: Page) -> None:
        user_id, at = page.user_id, self.deps.clock.now()
        epoch = await self.deps.repo.last_delete(user_id)
        event = segment_created(
            user_id, segment.segment_id, page.page_id, segment.summary, at, epoch
        )
        await self.events.emit([event])

    async def settle(self, user_id: str, state: MidTermState) -> None:
        """Evict over capacity, send persona jobs for hot segments, then save the state.

        Every effect goes first and the state last, so whatever fails before the save leaves
        the saved state as it was, and a retry of the event applies it once (a failure after
        the save would count a retried visit twice). A crash in between replays the event
        against the old state, which evicts the same segments again (heat is computed at event
        time, so the choice repeats) and may send a job again: its pages are counted once
        (``persona_applied``), and a fact worded the same is stored once (``append_facts``).
        A failed save does not resend on retry: the jobs already out are remembered until a
        save succeeds. A job sent but lost in a crash is re-sent after ``Resume``.
        """
        deps, settings = self.deps, self.deps.settings
        params, now = settings.heat_params, state.clock
        evicted = state.evict_over_capacity(settings.mtm_capacity, now, params)
        if evicted:
            at, epoch = deps.clock.now(), await deps.repo.last_delete(user_id)
            await self.events.emit(
                [
                    segment_evicted(
                        user_id, s.segment_id, len(s.page_ids), s.heat(now, params), at, epoch
                    )
                    for s in evicted
                ]
            )
        await deps.repo.delete_pages([page for stats in evicted for page in stats.page_ids])
        await deps.repo.delete_segments([stats.segment_id for stats in evicted])
        jobs = state.take_persona_jobs(settings.heat_tau, now, params, PERSONA_PAGES_PER_JOB)
        for segment_id, page_ids in jobs:
            out = (segment_id, tuple(page_ids))
            if out in self._sent_unsaved.get(user_id, ()):
                continue
            job = PersonaJob(user_id=user_id, segment_id=segment_id, page_ids=page_ids, at=now)
            await self.send_persona(key=user_key(user_id), value=dumps(job))
            self._sent_unsaved.setdefault(user_id, set()).add(out)
        data = state.to_dict()
        await deps.repo.save_doc(user_id, HEAT_DOC, data)
        self.states[user_id] = data
        self._sent_unsaved.pop(user_id, None)
        deps.metrics.transitions.labels(transition="segment_evicted").inc(len(evicted))

    async def forget(self, marker: ForgetUser) -> None:
        if not await check_marker(self.deps.repo, marker):
            return
        self.states.pop(marker.user_id, None)
        self._sent_unsaved.pop(marker.user_id, None)
        self.deps.keyring.forget(marker.user_id)
        await self.deps.repo.purge_mid_term(marker.user_id)
        await self.send_persona(key=user_key(marker.user_id), value=dumps(marker))

    async def state(self, user_id: str) -> MidTermState:
        cached = self.states.get(user_id)
        if cached is None:
            cached = await self.deps.repo.load_doc(user_id, HEAT_DOC)
        return MidTermState.from_dict(cached)


def _visit_groups(items: Sequence[Consumed[MidTermInput]]) -> list[list[Consumed[MidTermInput]]]:
    """The run split where retrieval visits start or stop: each run of visits one group, each
    other event a group of its own (order kept)."""
    groups: list[list[Consumed[MidTermInput]]] = []
    for item in items:
        visit = isinstance(item.record.root, RetrievalHit)
        if visit and groups and isinstance(groups[-1][-1].record.root, RetrievalHit):
            groups[-1].append(item)
        else:
            groups.append([item])
    return groups
