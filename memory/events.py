"""The CloudEvents each change makes, with ids made from the change itself.

An id is a UUID5 of the user, the type and what changed (a page, a segment, a fact and the job
or edit that changed it, a DELETE's time), so a stage that applies an event again after a crash,
a retry or a replay makes the same id, and a consumer de-duplicating on ``id`` sees it once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from memory import ids
from schemas.events import (
    DeadLettered,
    EventData,
    EventType,
    FactAdded,
    FactDeleted,
    FactEdited,
    FactSuperseded,
    MemoryEvent,
    PageStored,
    PersonaUpdated,
    SegmentCreated,
    SegmentEvicted,
    UserForgotten,
)
from schemas.facts import Fact, FactChange
from schemas.records import Page

FactChanges = Sequence[tuple[Fact, FactChange]]
EVENT = "event"
SOURCE = "/memoryos/"


def event_id(user_id: str, kind: EventType, *key: str, epoch: int = 0) -> str:
    """``epoch``: the user's last DELETE (its time in ms; 0: never deleted). A turn id sent
    again after a DELETE makes the same page id, and is a new change all the same."""
    parts = [kind.value, *key, *([f"epoch:{epoch}"] if epoch else [])]
    return ids.point_id(user_id, EVENT, json.dumps(parts, ensure_ascii=False))


def make(
    stage: str,
    user_id: str,
    kind: EventType,
    key: Sequence[str],
    data: EventData,
    at: float,
    epoch: int = 0,
) -> MemoryEvent:
    return MemoryEvent(
        id=event_id(user_id, kind, *key, epoch=epoch),
        source=SOURCE + stage,
        type=kind,
        subject=user_id,
        time=datetime.fromtimestamp(at, UTC),
        data=data,
    )


def page_stored(page: Page, at: float, epoch: int = 0) -> MemoryEvent:
    data = PageStored(
        page_id=page.page_id,
        turn_id=page.turn_id,
        chain_id=page.chain.chain_id,
        seq=page.seq,
        timestamp=page.timestamp,
        assistant_id=page.assistant_id,
        channel=page.channel,
        conversation_id=page.conversation_id,
        query=page.query,
        response=page.response,
    )
    return make("stm", page.user_id, EventType.PAGE_STORED, [page.page_id], data, at, epoch)


def segment_created(
    user_id: str, segment_id: str, page_id: str, summary: str, at: float, epoch: int = 0
) -> MemoryEvent:
    data = SegmentCreated(segment_id=segment_id, page_id=page_id, summary=summary)
    return make("mtm", user_id, EventType.SEGMENT_CREATED, [segment_id], data, at, epoch)


def segment_evicted(
    user_id: str, segment_id: str, pages: int, heat: float, at: float, epoch: int = 0
) -> MemoryEvent:
    data = SegmentEvicted(segment_id=segment_id, pages=pages, heat=heat)
    return make("mtm", user_id, EventType.SEGMENT_EVICTED, [segment_id], data, at, epoch)


def job_key(segment_id: str, page_ids: Iterable[str]) -> str:
    """A persona job by what it reads: its segment and pages."""
    pages = hashlib.sha256("\n".join(sorted(page_ids)).encode()).hexdigest()[:32]
    return f"{segment_id}/{pages}"


def persona_updated(
    user_id: str,
    segment_id: str,
    page_ids: Sequence[str],
    changes: FactChanges,
    at: float,
    epoch: int = 0,
) -> MemoryEvent:
    data = PersonaUpdated(
        segment_id=segment_id,
        pages=len(page_ids),
        facts_added=sum(1 for _, change in changes if change.change == "extracted"),
        facts_superseded=sum(1 for _, change in changes if change.change == "superseded"),
    )
    key = [job_key(segment_id, page_ids)]
    return make("persona", user_id, EventType.PERSONA_UPDATED, key, data, at, epoch)


def fact_events(
    user_id: str, changes: FactChanges, cause: str, at: float, epoch: int = 0
) -> list[MemoryEvent]:
    """One event per change of a fact made by one job or edit (``cause``), in order. A fact
    changed twice the same way by one cause (not done today) would get two ids by position."""
    events, seen = [], dict[tuple[str, str], int]()
    for fact, change in changes:
        found = _fact_event(fact, change)
        if found is None:
            continue
        kind, data = found
        nth = seen[(fact.fact_id, kind.value)] = seen.get((fact.fact_id, kind.value), -1) + 1
        key = [fact.fact_id, cause, str(nth)]
        events.append(make("persona", user_id, kind, key, data, at, epoch))
    return events


def _fact_event(fact: Fact, change: FactChange) -> tuple[EventType, EventData] | None:
    kind = fact.kind
    if change.change in ("extracted", "added"):
        pages = [] if change.source == "api" else list(change.source.page_ids)
        origin = "api" if change.change == "added" else "extracted"
        data: EventData = FactAdded(
            fact_id=fact.fact_id,
            kind=kind,
            assistant_id=fact.assistant_id,
            origin=origin,
            page_ids=pages,
            text=change.text or fact.text,
        )
        return EventType.FACT_ADDED, data
    if change.change == "superseded":
        data = FactSuperseded(fact_id=fact.fact_id, kind=kind, superseded_by=change.superseded_by)
        return EventType.FACT_SUPERSEDED, data
    if change.change in ("edited", "pinned", "unpinned"):
        data = FactEdited(fact_id=fact.fact_id, kind=kind, change=change.change, text=change.text)
        return EventType.FACT_EDITED, data
    if change.change == "deleted":
        reason = "api" if change.source == "api" else "capacity"
        return EventType.FACT_DELETED, FactDeleted(fact_id=fact.fact_id, kind=kind, reason=reason)
    return None


def user_forgotten(user_id: str, deleted_at: float, at: float) -> MemoryEvent:
    data = UserForgotten(deleted_at=deleted_at)
    key = [str(round(deleted_at * 1000))]  # DELETE times are in milliseconds
    return make("persona", user_id, EventType.USER_FORGOTTEN, key, data, at)


def dead_lettered(
    user_id: str,
    stage: str,
    error: str,
    source_topic: str,
    raw: bytes,
    reason: str,
    at: float,
    epoch: int = 0,
) -> MemoryEvent:
    """Keyed by the record's bytes, not its offset: the embedded broker starts its offsets
    again after a restart, and the same record failing again is the same event."""
    data = DeadLettered(stage=stage, error=error, source_topic=source_topic, message=reason[:500])
    key = [stage, source_topic, hashlib.sha256(raw).hexdigest()]
    return make(stage, user_id, EventType.DEAD_LETTERED, key, data, at, epoch)
