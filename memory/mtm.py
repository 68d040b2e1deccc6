"""Per-user mid-term memory bookkeeping: which segments live, their heat counters, evictions.

The heat agent keeps one ``MidTermState`` per user in a Faust table (as ``to_dict()``) and
calls these operations; the segment texts and vectors live in Qdrant. Every operation is
idempotent where a replayed event could repeat it, and reports what it did so the caller
can act on it (delete evicted points, emit persona jobs).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from enum import StrEnum
from typing import Any

from memory.heat import HeatParams, heat
from schemas.limits import MAX_EVENT_TIME

EVICTED_MEMORY = 1000  # evicted segment ids remembered per user, to recognise late pages


@dataclass
class SegmentStats:
    """One live segment's heat counters and the pages it holds (paper: N_visit, L_interaction)."""

    segment_id: str
    _: KW_ONLY
    last_access: float
    created_at: float
    n_visit: int = 0
    l_interaction: int = 0
    page_ids: list[str] = field(default_factory=list)
    transferred: list[str] = field(default_factory=list)  # pages already in the persona
    persona_pending: bool = False  # a persona job is out; no second one until it is applied
    unsummarized: list[str] = field(default_factory=list)  # joined, not yet in the summary

    def heat(self, now: float, params: HeatParams) -> float:
        return heat(self.n_visit, self.l_interaction, self.last_access, now, params)

    def to_dict(self) -> dict[str, Any]:
        # spelled out: dataclasses.asdict deep-copies field by field, and this runs for every
        # segment of the user on every MTM event. Tuples, not lists: every user's state stays
        # in the MTM table, and a dict of strings, numbers and tuples of strings is one that
        # Python's full collections stop tracking, so they (and the event loop they pause) do
        # not walk every segment of every user (docs/benchmarks.md, Garbage collection).
        return {
            "segment_id": self.segment_id,
            "last_access": self.last_access,
            "created_at": self.created_at,
            "n_visit": self.n_visit,
            "l_interaction": self.l_interaction,
            "page_ids": tuple(self.page_ids),
            "transferred": tuple(self.transferred),
            "persona_pending": self.persona_pending,
            "unsummarized": tuple(self.unsummarized),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SegmentStats:
        try:
            return cls(
                str(data["segment_id"]),
                last_access=float(data["last_access"]),
                created_at=float(data["created_at"]),
                n_visit=int(data.get("n_visit", 0)),
                l_interaction=int(data.get("l_interaction", 0)),
                page_ids=[str(page) for page in data.get("page_ids", [])],
                transferred=[str(page) for page in data.get("transferred", [])],
                persona_pending=bool(data.get("persona_pending", False)),
                unsummarized=[str(page) for page in data.get("unsummarized", [])],
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a segment stats record ({exc!r}): {dict(data)!r}") from exc


class AddOutcome(StrEnum):
    CREATED = "created"  # a new segment, announced as new
    ADOPTED = "adopted"  # a segment this state did not know: tracked from now on
    JOINED = "joined"  # the page joined a live segment
    DUPLICATE = "duplicate"  # the page is already tracked: nothing changed
    EVICTED = "evicted"  # the segment was evicted: the caller should delete the page's point


@dataclass(frozen=True)
class PageAdded:
    outcome: AddOutcome
    segment_id: str  # where the page lives; for DUPLICATE possibly another segment


@dataclass
class MidTermState:
    """The segments of one user's MTM, plus recently evicted ids (oldest first, bounded)."""

    segments: dict[str, SegmentStats] = field(default_factory=dict)
    evicted: list[str] = field(default_factory=list)
    clock: float = 0.0  # the latest event time seen: heat is computed at event time, not wall time

    def __len__(self) -> int:
        return len(self.segments)

    def __contains__(self, segment_id: object) -> bool:
        return segment_id in self.segments

    def to_dict(self) -> dict[str, Any]:
        return {
            "segments": {sid: stats.to_dict() for sid, stats in self.segments.items()},
            "evicted": tuple(self.evicted),
            "clock": self.clock,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> MidTermState:
        """The state a table holds; ``None`` (a user never seen) is an empty state."""
        if data is None:
            return cls()
        segments = [SegmentStats.from_dict(item) for item in data.get("segments", {}).values()]
        return cls(
            segments={stats.segment_id: stats for stats in segments},
            evicted=[str(sid) for sid in data.get("evicted", [])],
            clock=float(data.get("clock", 0.0)),
        )

    def advance(self, event_time: float) -> float:
        """The time an event is applied at: its own, but never before an earlier event's, so
        a replay computes the same heat and an old page cannot make recency exceed 1."""
        # within a record's range: a page stored before the range was checked cannot carry
        # the clock past what the MTM stage's own records may say
        self.clock = min(max(self.clock, event_time), MAX_EVENT_TIME)
        return self.clock

    def owner_of(self, page_id: str) -> str | None:
        """The live segment holding ``page_id``, if any."""
        for stats in self.segments.values():
            if page_id in stats.page_ids:
                return stats.segment_id
        return None

    def add_page(self, segment_id: str, page_id: str, now: float, created: bool) -> PageAdded:
        """Count a page into its segment: L_interaction + 1 and a fresh access time.

        A page already tracked (in this or any segment: a page belongs to one segment) changes
        nothing, so a replayed event is harmless. A page for a recently evicted segment is not
        resurrected: the caller gets EVICTED and should delete the page's point. A page for a
        segment this state does not know starts tracking it even if ``created`` is False,
        because a segment nobody tracks would never be evicted.
        """
        owner = self.owner_of(page_id)
        if owner is not None:
            return PageAdded(AddOutcome.DUPLICATE, owner)
        if segment_id in self.evicted:
            return PageAdded(AddOutcome.EVICTED, segment_id)
        stats = self.segments.get(segment_id)
        if stats is None:
            stats = SegmentStats(segment_id, last_access=now, created_at=now)
            self.segments[segment_id] = stats
            outcome = AddOutcome.CREATED if created else AddOutcome.ADOPTED
        else:
            outcome = AddOutcome.JOINED
        stats.page_ids.append(page_id)
        stats.l_interaction += 1
        stats.last_access = max(stats.last_access, now)
        return PageAdded(outcome, segment_id)

    def record_visits(
        self,
        segment_ids: Iterable[str],
        now: float,
        counts: Mapping[str, int] | None = None,
        times: Mapping[str, float] | None = None,
    ) -> list[str]:
        """A retrieval hit these segments: N_visit + 1 and a fresh access time for each;
        ``counts`` names the segments that several retrievals hit (a merged record), and how
        many; ``times`` those whose last retrieval was before ``now``, and when.

        Unknown ids (evicted since) are ignored; an id listed twice counts once. The access
        time never moves backwards, so a late retrieval event cannot make a segment look older.
        Returns the ids that were counted.
        """
        counted: list[str] = []
        for segment_id in dict.fromkeys(segment_ids):
            stats = self.segments.get(segment_id)
            if stats is None:
                continue
            stats.n_visit += counts.get(segment_id, 1) if counts else 1
            at = min(times.get(segment_id, now), now) if times else now
            stats.last_access = max(stats.last_access, at)
            counted.append(segment_id)
        return counted

    def summary_owed(self, segment_id: str, page_id: str) -> None:
        """The page joined ``segment_id`` and its summary does not cover it yet."""
        stats = self.segments.get(segment_id)
        if stats is not None and page_id not in stats.unsummarized:
            stats.unsummarized.append(page_id)

    def stale_summaries(self) -> dict[str, list[str]]:
        """Live segments whose summary misses pages that joined them: segment -> those pages."""
        return {sid: list(s.unsummarized) for sid, s in self.segments.items() if s.unsummarized}

    def summaries_written(self, written: Mapping[str, Iterable[str]]) -> None:
        """These pages are in their segments' summaries now."""
        for segment_id, page_ids in written.items():
            stats = self.segments.get(segment_id)
            if stats is not None:
                done = set(page_ids)
                stats.unsummarized = [page for page in stats.unsummarized if page not in done]

    def heat_of(self, segment_id: str, now: float, params: HeatParams) -> float | None:
        stats = self.segments.get(segment_id)
        return None if stats is None else stats.heat(now, params)

    def evict_over_capacity(
        self, capacity: int, now: float, params: HeatParams
    ) -> list[SegmentStats]:
        """Remove the lowest-heat segments until at most ``capacity`` remain (paper: MTM cap).

        Ties go out in a fixed order: older last access first, then the smaller id. The
        removed stats, coldest first, carry every page id so the caller can delete the points.
        """
        if capacity < 0:
            raise ValueError(f"capacity must be >= 0, got {capacity}")
        excess = len(self.segments) - capacity
        if excess <= 0:
            return []
        coldest = sorted(
            self.segments.values(),
            key=lambda stats: (stats.heat(now, params), stats.last_access, stats.segment_id),
        )[:excess]
        for stats in coldest:
            self._forget(stats.segment_id)
        return coldest

    def hot_segments(self, tau: float, now: float, params: HeatParams) -> list[str]:
        """Segments whose heat is strictly above ``tau`` (paper: they update the persona).

        Only segments with pages not yet transferred (L_interaction > 0) qualify: after a
        transfer L_interaction is 0, and a segment kept hot by its visits alone would otherwise
        re-send the same pages to the persona on every event, learning nothing new.
        Hottest first, ties by id.
        """
        heats = {
            sid: stats.heat(now, params)
            for sid, stats in self.segments.items()
            if stats.l_interaction > 0
        }
        hot = [sid for sid, value in heats.items() if value > tau]
        return sorted(hot, key=lambda sid: (-heats[sid], sid))

    def take_persona_jobs(
        self, tau: float, now: float, params: HeatParams, max_pages: int
    ) -> list[tuple[str, list[str]]]:
        """Hot segments without a job out: (segment, its pages not yet in the persona, at most
        ``max_pages`` so the prompt stays bounded). Marks each as pending."""
        jobs = []
        for segment_id in self.hot_segments(tau, now, params):
            stats = self.segments[segment_id]
            if stats.persona_pending:
                continue
            done = set(stats.transferred)
            pages = [page for page in stats.page_ids if page not in done][:max_pages]
            if not pages:
                stats.l_interaction = 0  # nothing left to learn from
                continue
            stats.persona_pending = True
            jobs.append((segment_id, pages))
        return jobs

    def persona_applied(self, segment_id: str, page_ids: Iterable[str]) -> bool:
        """The persona stored these pages: L_interaction drops by their number (the paper's
        reset to 0 when all were sent). Unknown segments (evicted since) change nothing."""
        stats = self.segments.get(segment_id)
        if stats is None:
            return False
        fresh = [page for page in dict.fromkeys(page_ids) if page not in stats.transferred]
        stats.transferred.extend(fresh)
        stats.l_interaction = max(0, stats.l_interaction - len(fresh))
        stats.persona_pending = False
        return True

    def resume(self) -> None:
        """After a restart a job may have been lost: allow every segment a new one."""
        for stats in self.segments.values():
            stats.persona_pending = False

    def reset_interaction(self, segment_id: str) -> bool:
        """After a persona update: L_interaction = 0 (paper), N_visit kept.

        The reference code also zeroes N_visit; the paper resets only L_interaction.
        Returns whether the segment was known.
        """
        stats = self.segments.get(segment_id)
        if stats is None:
            return False
        stats.l_interaction = 0
        return True

    def remove(self, segment_id: str) -> SegmentStats | None:
        """Stop tracking a segment (its points are being deleted); late pages become EVICTED."""
        if segment_id not in self.segments:
            return None
        return self._forget(segment_id)

    def _forget(self, segment_id: str) -> SegmentStats:
        stats = self.segments.pop(segment_id)
        if segment_id in self.evicted:
            self.evicted.remove(segment_id)
        self.evicted.append(segment_id)
        del self.evicted[:-EVICTED_MEMORY]
        return stats
