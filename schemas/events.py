"""What goes out on ``memoryos.events``: one CloudEvents 1.0 record per change of a user's memory.

Structured JSON mode (the whole record is the event), keyed by the user, ``subject`` = the user
id. ``id`` is made from what changed, never from when or where it was processed, so a replay or a
restart sends the same id again and a consumer that de-duplicates on ``id`` sees each change once.
``data`` carries ids, kinds, times and counts; the user's words only with
``MEMORYOS_EVENTS_INCLUDE_TEXT=true``. ``schemas/event.schema.json`` is made from these models.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field, model_validator

from schemas.records import Record

SPECVERSION: Literal["1.0"] = "1.0"


class EventType(StrEnum):
    PAGE_STORED = "memory.page.stored"
    SEGMENT_CREATED = "memory.segment.created"
    SEGMENT_EVICTED = "memory.segment.evicted"
    PERSONA_UPDATED = "memory.persona.updated"
    FACT_ADDED = "memory.fact.added"
    FACT_SUPERSEDED = "memory.fact.superseded"
    FACT_EDITED = "memory.fact.edited"
    FACT_DELETED = "memory.fact.deleted"
    USER_FORGOTTEN = "memory.user.forgotten"
    DEAD_LETTERED = "memory.dead_lettered"


EVENT_TYPES = tuple(kind.value for kind in EventType)


class PageStored(Record):
    """A turn is in memory as a page of the user's short-term window."""

    page_id: str
    turn_id: str
    chain_id: str
    seq: int = Field(description="the page's position in the user's history")
    timestamp: datetime = Field(description="when the turn was said")
    assistant_id: str | None = None
    channel: str | None = None
    conversation_id: str | None = None
    query: str | None = Field(None, description="with MEMORYOS_EVENTS_INCLUDE_TEXT only")
    response: str | None = Field(None, description="with MEMORYOS_EVENTS_INCLUDE_TEXT only")


class SegmentCreated(Record):
    """A page left short-term memory and opened a new mid-term segment."""

    segment_id: str
    page_id: str = Field(description="the page that opened it")
    summary: str | None = Field(None, description="with MEMORYOS_EVENTS_INCLUDE_TEXT only")


class SegmentEvicted(Record):
    """The coldest segment left mid-term memory (over capacity), with its pages."""

    segment_id: str
    pages: int
    heat: float


class PersonaUpdated(Record):
    """A hot segment's pages were read into the persona (traits, knowledge, agent traits)."""

    segment_id: str
    pages: int
    facts_added: int
    facts_superseded: int


class FactAdded(Record):
    fact_id: str
    kind: Literal["user_knowledge", "agent_trait"]
    assistant_id: str | None = None
    origin: Literal["extracted", "api"]
    page_ids: list[str] = Field(default_factory=list, description="pages it was extracted from")
    text: str | None = Field(None, description="with MEMORYOS_EVENTS_INCLUDE_TEXT only")


class FactSuperseded(Record):
    fact_id: str
    kind: Literal["user_knowledge", "agent_trait"]
    superseded_by: str | None = None


class FactEdited(Record):
    fact_id: str
    kind: Literal["user_knowledge", "agent_trait"]
    change: Literal["edited", "pinned", "unpinned"]
    text: str | None = Field(None, description="with MEMORYOS_EVENTS_INCLUDE_TEXT only")


class FactDeleted(Record):
    fact_id: str
    kind: Literal["user_knowledge", "agent_trait"]
    reason: Literal["api", "capacity"] = Field(
        description="deleted through the API, or the oldest unpinned fact past the capacity"
    )


class UserForgotten(Record):
    """Every stage and the store are done with a DELETE: nothing said before it is kept."""

    deleted_at: float = Field(description="the DELETE's time, epoch seconds")


class DeadLettered(Record):
    """A record of the user's went to ``memoryos.dlq`` instead of memory."""

    stage: str
    error: str = Field(description="invalid, permanent, bug, exhausted, too_large or forgotten")
    source_topic: str
    message: str | None = Field(
        None, description="what failed (it may quote the record): MEMORYOS_EVENTS_INCLUDE_TEXT only"
    )


EventData = (
    PageStored
    | SegmentCreated
    | SegmentEvicted
    | PersonaUpdated
    | FactAdded
    | FactSuperseded
    | FactEdited
    | FactDeleted
    | UserForgotten
    | DeadLettered
)

DATA_OF: dict[EventType, type[Record]] = {
    EventType.PAGE_STORED: PageStored,
    EventType.SEGMENT_CREATED: SegmentCreated,
    EventType.SEGMENT_EVICTED: SegmentEvicted,
    EventType.PERSONA_UPDATED: PersonaUpdated,
    EventType.FACT_ADDED: FactAdded,
    EventType.FACT_SUPERSEDED: FactSuperseded,
    EventType.FACT_EDITED: FactEdited,
    EventType.FACT_DELETED: FactDeleted,
    EventType.USER_FORGOTTEN: UserForgotten,
    EventType.DEAD_LETTERED: DeadLettered,
}


class MemoryEvent(Record):
    """A CloudEvents 1.0 event in structured JSON mode."""

    specversion: Literal["1.0"] = SPECVERSION
    id: Annotated[str, Field(min_length=1, description="stable across replays: de-duplicate on it")]
    source: str = Field(description="the stage that made the change: /memoryos/<stage>")
    type: EventType
    subject: str = Field(description="the user id")
    time: datetime = Field(description="when the stage made the change (UTC)")
    datacontenttype: Literal["application/json"] = "application/json"
    data: EventData

    @model_validator(mode="after")
    def _data_of_its_type(self) -> MemoryEvent:
        if not isinstance(self.data, DATA_OF[self.type]):
            raise ValueError(f"data is not a {DATA_OF[self.type].__name__} ({self.type})")
        return self

    def without_text(self) -> MemoryEvent:
        """The event with every text field of its data emptied."""
        text_fields = {"query", "response", "summary", "text", "message"}
        cleared = {name: None for name in text_fields if name in type(self.data).model_fields}
        return self.model_copy(update={"data": self.data.model_copy(update=cleared)})
