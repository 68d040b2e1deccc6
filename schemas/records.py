"""Internal records: pages, segments, persona, and the events between agents.

Every record carries ``user_id`` and is keyed by it on its topic, so one user's events stay in
order on one partition.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ChainLink(Record):
    """A page's place in its dialogue chain (paper: meta^chain)."""

    chain_id: str
    prev: str | None = None
    next: str | None = None
    summary: str = ""


class Page(Record):
    """A dialogue page {Q, R, T, meta^chain} plus where it came from."""

    page_id: str
    user_id: str
    turn_id: str
    query: str
    response: str
    timestamp: datetime
    assistant_id: str | None = None
    channel: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)
    chain: ChainLink
    seq: int = Field(default=0, description="the page's position in its user's history")
    keywords: list[str] = Field(default_factory=list)
    vector: list[float] | None = Field(default=None, description="embedding of query + response")

    @property
    def text(self) -> str:
        return f"User: {self.query}\nAssistant: {self.response}"

    def public(self) -> dict[str, Any]:
        """The page as the API and `inspect` show it (no vector, no internal keywords)."""
        return self.model_dump(
            mode="json",
            include={"page_id", "turn_id", "query", "response", "timestamp", "meta", "chain"},
        ) | {
            "chain": {
                "prev": self.chain.prev,
                "next": self.chain.next,
                "summary": self.chain.summary,
            }
        }


class Segment(Record):
    """A mid-term segment: pages of one topic, with its heat counters."""

    segment_id: str
    user_id: str
    summary: str
    keywords: list[str]
    page_ids: list[str] = Field(default_factory=list)
    n_visit: int = 0
    l_interaction: int = 0
    last_access: float = Field(description="seconds since the epoch of the last access")
    created_at: float


class Trait(Record):
    level: Literal["High", "Medium", "Low"]
    reason: str = ""


class Persona(Record):
    """Long-term persona memory (LPM) of one user and the assistant as seen with that user."""

    user_id: str
    profile: dict[str, Any] = Field(default_factory=dict)
    traits: dict[str, Trait] = Field(default_factory=dict)
    user_knowledge: list[str] = Field(default_factory=list)
    agent_traits: list[str] = Field(default_factory=list)
    agent_profile: dict[str, Any] = Field(default_factory=dict)


# --- events between agents (all keyed by user_id) ---


class PageEvent(Record):
    """chain agent -> STM agent: a new page (memoryos.pages)."""

    kind: Literal["page"] = "page"
    page: Page


class EvictedPage(Record):
    """STM agent -> segment agent: the oldest page left the STM window (memoryos.stm-evicted)."""

    kind: Literal["evicted"] = "evicted"
    page: Page


class SegmentChange(Record):
    """segment agent -> heat agent: a page joined a segment (memoryos.segments)."""

    kind: Literal["segment"] = "segment"
    user_id: str
    segment_id: str
    page_id: str
    created: bool
    at: float


class RetrievalHit(Record):
    """response service -> heat agent: segments were retrieved (memoryos.retrievals)."""

    kind: Literal["retrieval"] = "retrieval"
    user_id: str
    segment_ids: list[str]
    at: float


class PersonaJob(Record):
    """heat agent -> persona agent: a hot segment should update the persona (memoryos.persona)."""

    kind: Literal["persona"] = "persona"
    user_id: str
    segment_id: str
    at: float


class UserForgotten(Record):
    """response service -> control agent: a user was deleted; drop their table entries."""

    kind: Literal["forget"] = "forget"
    user_id: str
    at: float
