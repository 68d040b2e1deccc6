"""The small ports the agents and the service talk to.

Each port has real adapters (wired from Settings by the app factory) and a fake for unit
tests; one contract test suite runs against every adapter of a port.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from memory.chain import ContinuityVerdict
from schemas.records import Page, Trait

Payload = dict[str, Any]


@dataclass(frozen=True)
class Between:
    """A numeric field in [gte, lt): either end may be open."""

    gte: float | None = None
    lt: float | None = None


FilterValue = str | int | list[str] | Between  # no bool: see common.match_pairs
Filter = Mapping[str, FilterValue]  # a list value means "any of these"
SparseVector = dict[int, float]


@runtime_checkable
class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch."""
        ...


class SystemClock:
    def now(self) -> float:
        return time.time()


# --- embedder ---


class Embedder(Protocol):
    name: str
    dim: int

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit-length vector per text, in order; identical texts are embedded once."""
        ...

    async def close(self) -> None: ...


# --- vector store ---

PAGES = "pages"
SEGMENTS = "segments"
USER_KNOWLEDGE = "user_knowledge"
AGENT_TRAITS = "agent_traits"
PERSONAS = "personas"
COLLECTIONS = (PAGES, SEGMENTS, USER_KNOWLEDGE, AGENT_TRAITS, PERSONAS)
PERSONA_DIM = 1  # personas hold one payload-only point per user; the vector is a placeholder


@dataclass(frozen=True)
class Point:
    id: str
    vector: list[float]
    payload: Payload
    sparse: SparseVector | None = None


@dataclass(slots=True)  # not frozen: a retrieve makes hundreds, and frozen ones cost more
class Hit:
    id: str
    score: float
    payload: Payload
    vector: list[float] | None = field(default=None, compare=False)


class VectorStore(Protocol):
    """Qdrant collections, every read filtered on ``user_id``.

    Point ids are strings (uuid5 of user and natural key), so replays overwrite.
    """

    name: str

    async def ensure_collections(self, dim: int) -> None: ...

    async def upsert(self, collection: str, points: Sequence[Point]) -> None: ...

    async def set_fields(self, collection: str, ids: Sequence[str], fields: Payload) -> None:
        """Set these payload fields on the stored points among ``ids``, keeping the rest of
        each payload and its vectors; a field set to None is removed (every engine merges so).
        An id not stored is passed over: a change of where a point is never brings back a
        point that was deleted meanwhile."""
        ...

    async def search(
        self,
        collection: str,
        user_id: str,
        vector: Sequence[float],
        limit: int,
        where: Filter | None = None,
        sparse: SparseVector | None = None,
        with_vectors: bool = False,
        lexical_only: bool = False,
        fields: Sequence[str] | None = None,
    ) -> list[Hit]:
        """Nearest points of one user; with ``sparse`` the dense and lexical lists are fused
        (``lexical_only``: ranked by the sparse vector alone). ``fields``: only these payload
        fields (``[]``: none), for a ranking that reads a few fields of many points."""
        ...

    async def retrieve(
        self, collection: str, ids: Sequence[str], with_vectors: bool = False
    ) -> list[Point]: ...

    async def scroll(
        self,
        collection: str,
        user_id: str | None,
        where: Filter | None = None,
        with_vectors: bool = False,
    ) -> list[Point]: ...

    async def count(
        self, collection: str, user_id: str | None = None, where: Filter | None = None
    ) -> int: ...

    async def delete(self, collection: str, ids: Sequence[str]) -> None: ...

    async def delete_user(self, collection: str, user_id: str) -> int:
        """Delete every point of one user; return how many there were."""
        ...

    async def flush(self) -> None:
        """Make every write applied so far durable on disk (a journal entry may then go).
        A store whose writes are durable once acknowledged (a Qdrant server) returns."""
        ...

    async def vacuum(self) -> int:
        """Reclaim the space of deleted points; return how many collections were rewritten.
        A store that does this by itself (a Qdrant server) returns 0."""
        ...

    async def close(self) -> None: ...


# --- LLM ---


@dataclass(frozen=True)
class Topic:
    theme: str
    keywords: list[str]
    content: str


@dataclass(frozen=True)
class PersonaFacts:
    """The persona stage's three analyses of one dialogue."""

    traits: dict[str, Trait]  # the known traits, updated
    user_knowledge: list[str]
    agent_traits: list[str]
    # per user fact, the numbers (1-based) of the known facts it updates or contradicts
    user_updates: list[tuple[int, ...]] = field(default_factory=list)


@dataclass(frozen=True)
class PromptMemory:
    """What went into a response prompt, kept structured for the offline backend."""

    query: str
    texts: list[str]
    style: str = "chat"  # the prompt's answer style (memory.prompt): "chat" or "locomo"
    profile: Mapping[str, Any] = field(default_factory=dict)  # the user's, as prompted
    facts: Sequence[str] = ()  # the user knowledge prompted, best first


@dataclass(frozen=True)
class Answer:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


class LLM(Protocol):
    """The MemoryOS tasks. Never returns error text as content: it raises LLMError."""

    backend: str

    async def continuity(self, previous: Page | None, current: Page) -> ContinuityVerdict:
        """Does ``current`` continue ``previous``'s chain? Plus the chain's new meta summary."""
        ...

    async def topics(self, dialogue: str) -> list[Topic]:
        """At most two themes with keywords and a summary each."""
        ...

    async def topics_many(self, dialogues: Sequence[str]) -> list[list[Topic]]:
        """``topics`` of each dialogue, in order, asked together (one call where it can)."""
        ...

    async def topics_summary(self, dialogue: str, previous_summary: str) -> tuple[list[Topic], str]:
        """``topics(dialogue)`` and ``segment_summary(previous_summary, dialogue)`` together
        (one call where it can)."""
        ...

    async def segment_summary(self, previous_summary: str, dialogue: str) -> str: ...

    async def user_traits(self, known: Mapping[str, Trait], dialogue: str) -> dict[str, Trait]:
        """The paper's 90-dimension analysis, updated from ``known``."""
        ...

    async def user_knowledge(self, dialogue: str) -> list[str]:
        """Facts about the user, first person, with time where given."""
        ...

    async def agent_traits(self, dialogue: str) -> list[str]:
        """Facts about the assistant's identity or knowledge."""
        ...

    async def persona(
        self,
        known: Mapping[str, Trait],
        dialogue: str,
        facts: Sequence[str] = (),
        summary: str = "",
    ) -> PersonaFacts:
        """``user_traits``, ``user_knowledge`` and ``agent_traits`` of one dialogue together
        (one call where it can); ``facts``, the user's current facts, are what a new fact may
        update (``PersonaFacts.user_updates``); ``summary``: the segment the pages are of
        (paper: the persona reads "segments and their dialogue pages")."""
        ...

    async def respond(self, system: str, user: str, memory: PromptMemory) -> Answer: ...

    async def close(self) -> None: ...
