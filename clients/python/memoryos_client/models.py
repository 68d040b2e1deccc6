"""Response bodies of the HTTP API, so the OpenAPI spec describes every reply exactly.

One definition for the server and its Python client: the service validates its replies with
these models and the client returns them; this package needs nothing but pydantic.

The routes return plain dicts built by ResponseService; FastAPI validates them against these
models on the way out, so a field added to the service without a field here is dropped, and
a field of the wrong type is a server error caught by the schema tests, never a silent change
of the published contract.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

TENANT_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
Scope = Literal["read", "write", "forget", "admin"]  # what a key may do (docs/api.md)


class Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class FieldError(Body):
    field: str
    error: str


class ErrorBody(Body):
    """Every 4xx (and 5xx) reply: what went wrong and, for bad input, which field."""

    error: str = Field(description="a readable message (every problem, for a bad body)")
    field: str | None = Field(None, description="the offending field (e.g. query, user_id)")
    errors: list[FieldError] | None = Field(
        None, description="a 422 for a bad body: every problem, each with its field"
    )


class ChainOut(Body):
    prev: str | None = Field(description="page id of the previous page in the dialogue chain")
    next: str | None = Field(description="page id of the next page in the dialogue chain")
    summary: str = Field(description="the chain's running summary (paper: meta^chain)")


class PageOut(Body):
    """A dialogue page {Q, R, T, meta^chain}."""

    page_id: str
    turn_id: str
    query: str
    response: str
    timestamp: datetime
    assistant_id: str | None = Field(None, description="the assistant that answered")
    channel: str | None = Field(None, description="where the turn came from")
    conversation_id: str | None = Field(None, description="the conversation it belongs to")
    meta: dict[str, Any] = Field(description="the turn's meta, as ingested")
    chain: ChainOut


class MidTermPage(PageOut):
    segment_id: str = Field(description="the mid-term segment the page was found in")
    score: float = Field(description="semantic similarity of the page to the query")


class TraitOut(Body):
    level: Literal["High", "Medium", "Low"]
    reason: str = ""


class Scored(Body):
    text: str
    score: float
    fact_id: str = Field(description="the fact's id: GET, PATCH or DELETE it under /facts")


class TurnAccepted(Body):
    turn_id: str = Field(description="the turn's id (generated when not given)")


class BatchItem(Body):
    index: int = Field(description="position of the item in the request")
    turn_id: str | None = Field(None, description="set when the item was accepted")
    error: str | None = Field(None, description="set when the item was rejected: why")


class BatchAccepted(Body):
    accepted: int = Field(description="how many items went to memoryos.turns")
    results: list[BatchItem] = Field(description="one result per item, in request order")


class MessageItem(Body):
    index: int = Field(description="position of the message in the request")
    message_id: str | None = Field(None, description="set when the message was accepted")
    error: str | None = Field(None, description="set when the message was rejected: why")
    duplicate: bool | None = Field(
        None, description="true: this message id was accepted before; not sent again"
    )
    conflict: str | None = Field(
        None, description="set on a duplicate whose role or text differs from the first copy"
    )


class MessagesAccepted(Body):
    accepted: int = Field(
        description="how many messages went to memoryos.messages (duplicates not counted)"
    )
    results: list[MessageItem] = Field(description="one result per message, in request order")


class RetrieveResponse(Body):
    short_term: list[PageOut] = Field(description="every STM page, oldest first")
    mid_term: list[MidTermPage] = Field(description="top pages of the best-matching segments")
    user_profile: dict[str, Any] = Field(
        description="stated attributes: set through the API, or extracted from the dialogue"
    )
    agent_profile: dict[str, Any] = Field(
        default_factory=dict, description="the profile of the assistant asked about"
    )
    user_traits: dict[str, TraitOut]
    user_knowledge: list[Scored]
    agent_traits: list[Scored]
    context: list[str] = Field(
        default_factory=list,
        description="page ids in context order: the ranked pages of either tier, best first, "
        "then the rest of the STM window",
    )
    scores: dict[str, float] = Field(
        default_factory=dict,
        description="the score each ranked page had, by page id, either tier (in structured "
        "mode, the ranking's; otherwise a mid-term page's similarity); the rest of the STM "
        "window has none: it is in every prompt",
    )


class Usage(Body):
    prompt_tokens: int
    completion_tokens: int


class RespondResponse(Body):
    response: str = Field(description="the assistant's answer")
    memory: RetrieveResponse = Field(description="the memory the answer was built from")
    usage: Usage
    remembered: bool = Field(
        description="whether the answer became memory: false when remember was false (nothing "
        "stored) or the reply only says the assistant does not know (the query alone stored)"
    )


class SegmentOut(Body):
    segment_id: str
    summary: str
    keywords: list[str]
    n_visit: int
    l_interaction: int
    last_access: datetime
    heat: float = Field(description="alpha N_visit + beta L_interaction + gamma recency")
    recency: float = Field(
        description="R_recency = exp(-dt / mu): 1 just accessed, falling with the time since"
    )
    pages: list[PageOut]


class AssistantPersonaOut(Body):
    agent_profile: dict[str, Any]
    agent_traits: list[str]


class PersonaOut(Body):
    profile: dict[str, Any] = Field(description="the API's profile over the extracted one")
    stated_profile: dict[str, Any] = Field(
        default_factory=dict,
        description="the profile set through the API alone (what PUT .../profile replaces)",
    )
    traits: dict[str, TraitOut]
    user_knowledge: list[str]
    agent_traits: list[str] = Field(description="the default assistant's traits")
    agent_profile: dict[str, Any] = Field(
        default_factory=dict, description="the default assistant's profile"
    )
    assistants: dict[str, AssistantPersonaOut] = Field(
        default_factory=dict, description="named assistants: profile and traits with this user"
    )


class MemoryResponse(Body):
    user_id: str
    short_term: list[PageOut]
    mid_term: list[SegmentOut]
    persona: PersonaOut


class TurnPlace(Body):
    """Where one of the user's turns is in the pipeline (derived from the store)."""

    turn_id: str | None
    page_id: str | None
    seq: int | None = Field(description="the page's position in the user's history")
    timestamp: datetime | None
    place: Literal["accepted", "stm", "leaving", "mtm", "persona_pending", "persona"] = Field(
        description="accepted: journaled, no page yet; stm: in the window; leaving: evicted, "
        "waiting for the MTM stage; mtm: in a segment; persona_pending: its persona job is "
        "out; persona: applied to the persona"
    )
    segment_id: str | None
    stages: list[str] = Field(description="the stages that have handled it, in order")


class DeadLetterOut(Body):
    at: datetime = Field(description="when it was dead-lettered")
    stage: str
    error: str = Field(description="invalid, permanent, bug, exhausted or too_large")
    reason: str = Field(description="the error message (first 300 characters)")
    topic: str
    partition: int
    offset: int
    attempts: int
    trace_id: str | None = Field(description="the trace of the event, when traced")


class Erasure(Body):
    requested_at: datetime = Field(description="when the user's last DELETE was made")
    complete: bool = Field(
        description="every stage has purged the user; until then reads show nothing"
    )


class HistoryResponse(Body):
    user_id: str
    turns: list[TurnPlace] = Field(description="the latest turns, newest first")
    dead_letters: list[DeadLetterOut] = Field(description="recent dead letters, oldest first")
    erasure: Erasure | None = Field(
        None, description="the user's last DELETE and whether it is complete; null: none"
    )


class DeadLettersReplayed(Body):
    replayed: int = Field(description="dead letters sent back to the topic they came from")
    skipped: int = Field(
        description="found but not replayed: too large, kept without its text, or dead-lettered "
        "before the user's last DELETE"
    )
    missing: int = Field(description="named but no longer on the dead-letter topic")


class DeletedCounts(Body):
    short_term: int
    mid_term_pages: int
    segments: int
    user_knowledge: int
    agent_traits: int


class UserProfile(Body):
    user_id: str
    profile: dict[str, Any] = Field(description="the stated profile, as now stored")


class AssistantProfile(Body):
    assistant_id: str
    profile: dict[str, Any]


class Deleted(Body):
    deleted: DeletedCounts = Field(description="how many records of each kind were removed")


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses=`` entries for error statuses, all with the ErrorBody shape."""
    described = {
        400: "malformed JSON",
        401: "missing, invalid or revoked bearer token",
        403: "the key lacks the scope this route needs",
        404: "no such route",
        413: "body larger than MEMORYOS_MAX_BODY_BYTES",
        422: "invalid input; `field` names it",
        429: "the key is over its rate limit; Retry-After says when to retry",
        503: "a backend (LLM, embedder, store or broker) failed; retry later",
    }
    return {
        status: {"model": ErrorBody, "description": described.get(status, "error")}
        for status in statuses
    }


# --- tenants: keys and users ---


class KeyIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tenant: str | None = Field(
        None, pattern=TENANT_PATTERN, description="the key's tenant; default: the caller's"
    )
    scopes: list[Scope] = Field(min_length=1, description="read, write, forget, admin")
    name: str = Field("", max_length=100, description="a label for people")
    rate_limit: str | None = Field(
        None,
        max_length=32,
        description="RATE or RATE/BURST requests per second for this key; default "
        "MEMORYOS_RATE_LIMIT",
    )


class KeyOut(BaseModel):
    key_id: str
    tenant: str
    scopes: list[Scope]
    name: str
    created_at: float
    revoked_at: float | None = None
    rate_limit: str | None = None


class KeyCreated(KeyOut):
    key: str = Field(description="the key itself: shown this once, never again")


class KeyList(BaseModel):
    keys: list[KeyOut]


class WhoAmI(BaseModel):
    tenant: str
    scopes: list[Scope]
    key_id: str | None = Field(description="null: an operator key (MEMORYOS_API_KEYS) or no auth")


class UserList(BaseModel):
    users: list[str] = Field(description="user ids, in order")
    next_cursor: str | None = Field(description="the cursor of the next page; null: the last")


class Imported(BaseModel):
    tenant: str
    imported: dict[str, int] = Field(description="points upserted, per collection")


# --- facts ---

FactKindName = Literal["user_knowledge", "agent_trait"]


class FactSourceOut(BaseModel):
    turn_ids: list[str] = Field(description="the turns the fact was extracted from")
    page_ids: list[str] = Field(description="their pages")


class FactOut(BaseModel):
    fact_id: str = Field(description="stable: the same fact keeps it through edits and replays")
    kind: FactKindName
    text: str
    created_at: datetime
    source: FactSourceOut | Literal["api"] = Field(
        description='the turns and pages it was extracted from, or "api"'
    )
    assistant_id: str | None = Field(description="the assistant of an agent trait")
    pinned: bool = Field(description="never superseded automatically, never ages out")
    superseded_by: str | None = Field(description="the fact that updated it; null: current")
    superseded_at: datetime | None


class FactList(BaseModel):
    facts: list[FactOut] = Field(description="newest first")
    next_cursor: str | None = Field(description="the cursor of the next page; null: the last")


class FactAccepted(BaseModel):
    fact_id: str = Field(description="applied in the user's order within moments (202)")


class FactChangeOut(BaseModel):
    change: Literal["extracted", "added", "edited", "pinned", "unpinned", "superseded", "deleted"]
    at: datetime
    source: FactSourceOut | Literal["api"]
    text: str | None = Field(None, description="the text the change set, where it set one")
    superseded_by: str | None = None


class FactHistory(BaseModel):
    fact_id: str
    changes: list[FactChangeOut] = Field(description="oldest first")
