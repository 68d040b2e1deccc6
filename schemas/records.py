"""Internal records: pages, segments, persona, and the events between agents.

Every record carries ``user_id`` and is keyed by it on its topic, so one user's events stay in
order on one partition.
"""

from __future__ import annotations

import array
import base64
import sys
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    RootModel,
    StrictInt,
    model_validator,
)

from schemas.limits import MAX_EVENT_TIME as MAX_EVENT_TIME


def _little_endian(floats: array.array[float]) -> array.array[float]:
    if sys.byteorder != "little":
        floats.byteswap()
    return floats


def _vector_in(value: Any) -> Any:
    if isinstance(value, str):  # as it travels: float32 little-endian, base64
        return list(_little_endian(array.array("f", base64.b64decode(value, validate=True))))
    return value


def _vector_out(value: list[float]) -> str:
    return base64.b64encode(_little_endian(array.array("f", value)).tobytes()).decode()


# A page's vector in events and table changelogs: 384 float32 as base64 is 2 KB, where JSON
# floats took about 8 KB, the largest part of the broker's memory per turn. float32 is what
# the store keeps anyway.
CompactVector = Annotated[
    list[float],
    BeforeValidator(_vector_in),
    PlainSerializer(_vector_out, return_type=str, when_used="json"),
]


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
    conversation_id: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)
    chain: ChainLink
    seq: int = Field(default=0, description="the page's position in its user's history")
    keywords: list[str] = Field(default_factory=list)
    vector: CompactVector | None = Field(default=None, description="embedding of query + response")

    @property
    def text(self) -> str:
        return f"User: {self.query}\nAssistant: {self.response}"

    def public(self) -> dict[str, Any]:
        """The page as the API and `inspect` show it (no vector, no internal keywords)."""
        return self.model_dump(
            mode="json",
            include={
                "page_id",
                "turn_id",
                "query",
                "response",
                "timestamp",
                "assistant_id",
                "channel",
                "conversation_id",
                "meta",
                "chain",
            },
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
    """Long-term persona memory (LPM) of one user and the assistants as seen with that user.

    User memory (profile, traits, knowledge) is shared by every assistant of the tenant; agent
    traits are per (user, assistant): ``agent_traits`` are the default assistant's and
    ``assistant_traits`` the named ones'. ``profile`` holds what the persona stage extracted;
    the profile set through the API is a separate document, merged over it when read.
    """

    user_id: str
    profile: dict[str, Any] = Field(default_factory=dict)
    traits: dict[str, Trait] = Field(default_factory=dict)
    user_knowledge: list[str] = Field(default_factory=list)
    agent_traits: list[str] = Field(default_factory=list)
    agent_profile: dict[str, Any] = Field(default_factory=dict)
    assistant_traits: dict[str, list[str]] = Field(default_factory=dict)


# --- events between stages (all keyed by user_id, so one user's events stay in order) ---


class PageEvent(Record):
    """chain stage -> STM stage: a new page (memoryos.pages)."""

    kind: Literal["page"] = "page"
    page: Page

    @property
    def user_id(self) -> str:
        return self.page.user_id


class EvictedPage(Record):
    """STM stage -> MTM stage: the oldest page left the STM window (memoryos.mtm)."""

    kind: Literal["evicted"] = "evicted"
    page: Page

    @property
    def user_id(self) -> str:
        return self.page.user_id


MAX_VISITS_PER_RECORD = 1_000_000  # a merged record's count for one segment, at the most
# A record's time in seconds since the epoch: finite and in range, or a hostile "Infinity" or
# 1e308 would become a user's clock (and a heat document that no longer loads).
EventTime = Annotated[float, Field(allow_inf_nan=False, ge=0.0, le=MAX_EVENT_TIME)]


class RetrievalHit(Record):
    """response service -> MTM stage: segments were retrieved at ``at`` (memoryos.mtm)."""

    kind: Literal["retrieval"] = "retrieval"
    user_id: str
    segment_ids: list[str]
    at: EventTime
    # Several retrievals of one user sent as one record (service/visits.py): how many of them
    # hit each segment, where more than one did (a segment not named counts once), and when
    # the last of them was, where earlier than ``at`` (a segment not named: at ``at``).
    counts: dict[str, Annotated[StrictInt, Field(ge=1, le=MAX_VISITS_PER_RECORD)]] | None = None
    times: dict[str, EventTime] | None = None

    @model_validator(mode="after")
    def _merged_names_its_segments(self) -> RetrievalHit:
        listed = set(self.segment_ids)
        for name, merged in (("counts", self.counts), ("times", self.times)):
            stray = sorted(set(merged or ()) - listed)
            if stray:
                raise ValueError(f"{name} names segments not in segment_ids: {stray[:3]}")
        if self.times and max(self.times.values()) > self.at:
            raise ValueError("a segment's time in times is later than the record's at")
        return self


class PersonaJob(Record):
    """MTM stage -> persona stage: a hot segment's pages not yet analysed (memoryos.persona)."""

    kind: Literal["persona"] = "persona"
    user_id: str
    segment_id: str
    page_ids: list[str]
    at: EventTime


class PersonaApplied(Record):
    """persona stage -> MTM stage: these pages are in the persona now; L_interaction drops.

    Sent only after the persona is stored, so a failed update leaves the segment hot and the
    reconciler asks again, instead of the pages being counted as transferred.
    """

    kind: Literal["persona_applied"] = "persona_applied"
    user_id: str
    segment_id: str
    page_ids: list[str]


class Resume(Record):
    """reconciler -> MTM stage: jobs sent before a restart may be lost; decide them again."""

    kind: Literal["resume"] = "resume"
    user_id: str


class ForgetUser(Record):
    """DELETE -> every stage in turn: purge what you own of this user, then pass it on.

    It travels in the user's own partition of every topic, behind the user's earlier events,
    so nothing emitted before it can write after it. ``at`` must match the tombstone the
    DELETE stored, or the marker is refused: a producer cannot erase a user by writing one.
    """

    kind: Literal["forget"] = "forget"
    user_id: str
    at: EventTime


class PairingTick(Record):
    """reconciler -> pairing stage: time has come to ``at``; flush messages that waited too
    long for a reply (memoryos.messages, in the user's order like everything else)."""

    kind: Literal["tick"] = "tick"
    user_id: str
    at: EventTime


class PageInput(RootModel[Annotated[PageEvent | ForgetUser, Field(discriminator="kind")]]):
    """What memoryos.pages carries."""


class MidTermInput(
    RootModel[
        Annotated[
            EvictedPage | RetrievalHit | PersonaApplied | Resume | ForgetUser,
            Field(discriminator="kind"),
        ]
    ]
):
    """What memoryos.mtm carries: every change to a user's segments and heat, in one order."""
