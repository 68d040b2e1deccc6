"""Port wrappers that time every call into Prometheus; the adapters stay metric-free.

The app factory wraps whatever adapters Settings chose, so every backend is measured alike.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

from adapters.metrics import Metrics
from adapters.ports import (
    LLM,
    Answer,
    Embedder,
    Filter,
    Hit,
    Payload,
    PersonaFacts,
    Point,
    PromptMemory,
    SparseVector,
    Topic,
    VectorStore,
)
from adapters.token_budget import TokenBudget
from memory.chain import ContinuityVerdict
from schemas.records import Page, Trait

TokenCallback = Callable[[str, int, int], None]


class InstrumentedLLM:
    def __init__(self, inner: LLM, metrics: Metrics) -> None:
        self.inner = inner
        self.backend = inner.backend
        self._metrics = metrics

    @asynccontextmanager
    async def _timed(self, task: str) -> AsyncIterator[None]:
        started = time.perf_counter()
        outcome = "error"
        try:
            yield
            outcome = "ok"
        finally:
            self._metrics.llm_requests.labels(task=task, outcome=outcome).inc()
            self._metrics.llm_seconds.labels(task=task).observe(time.perf_counter() - started)

    async def continuity(self, previous: Page | None, current: Page) -> ContinuityVerdict:
        async with self._timed("continuity"):
            return await self.inner.continuity(previous, current)

    async def topics(self, dialogue: str) -> list[Topic]:
        async with self._timed("topics"):
            return await self.inner.topics(dialogue)

    async def topics_many(self, dialogues: Sequence[str]) -> list[list[Topic]]:
        async with self._timed("topics_batch"):
            return await self.inner.topics_many(dialogues)

    async def topics_summary(self, dialogue: str, previous_summary: str) -> tuple[list[Topic], str]:
        async with self._timed("topics_summary"):
            return await self.inner.topics_summary(dialogue, previous_summary)

    async def segment_summary(self, previous_summary: str, dialogue: str) -> str:
        async with self._timed("segment_summary"):
            return await self.inner.segment_summary(previous_summary, dialogue)

    async def user_traits(self, known: Mapping[str, Trait], dialogue: str) -> dict[str, Trait]:
        async with self._timed("user_traits"):
            return await self.inner.user_traits(known, dialogue)

    async def user_knowledge(self, dialogue: str) -> list[str]:
        async with self._timed("user_knowledge"):
            return await self.inner.user_knowledge(dialogue)

    async def agent_traits(self, dialogue: str) -> list[str]:
        async with self._timed("agent_traits"):
            return await self.inner.agent_traits(dialogue)

    async def persona(
        self,
        known: Mapping[str, Trait],
        dialogue: str,
        facts: Sequence[str] = (),
        summary: str = "",
    ) -> PersonaFacts:
        async with self._timed("persona"):
            return await self.inner.persona(known, dialogue, facts, summary)

    async def respond(self, system: str, user: str, memory: PromptMemory) -> Answer:
        async with self._timed("respond"):
            return await self.inner.respond(system, user, memory)

    async def close(self) -> None:
        await self.inner.close()


class InstrumentedEmbedder:
    def __init__(self, inner: Embedder, metrics: Metrics) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self._metrics = metrics

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        started = time.perf_counter()
        vectors = await self.inner.embed(texts)
        self._metrics.embed_seconds.observe(time.perf_counter() - started)
        self._metrics.embed_batch.observe(len(texts))
        return vectors

    async def close(self) -> None:
        await self.inner.close()


class InstrumentedStore:
    def __init__(self, inner: VectorStore, metrics: Metrics) -> None:
        self.inner = inner
        self.name = inner.name
        self._seconds = metrics.store_seconds
        self._timers: dict[str, Any] = {}  # a retrieve makes a dozen store calls: labels once

    @asynccontextmanager
    async def _timed(self, operation: str) -> AsyncIterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            timer = self._timers.get(operation)
            if timer is None:
                timer = self._timers[operation] = self._seconds.labels(operation=operation)
            timer.observe(time.perf_counter() - started)

    async def ensure_collections(self, dim: int) -> None:
        await self.inner.ensure_collections(dim)

    async def flush(self) -> None:
        async with self._timed("flush"):
            await self.inner.flush()

    async def upsert(self, collection: str, points: Sequence[Point]) -> None:
        async with self._timed("upsert"):
            await self.inner.upsert(collection, points)

    async def set_fields(self, collection: str, ids: Sequence[str], fields: Payload) -> None:
        async with self._timed("set_fields"):
            await self.inner.set_fields(collection, ids, fields)

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
        async with self._timed("search"):
            return await self.inner.search(
                collection,
                user_id,
                vector,
                limit,
                where,
                sparse,
                with_vectors,
                lexical_only,
                fields,
            )

    async def retrieve(
        self, collection: str, ids: Sequence[str], with_vectors: bool = False
    ) -> list[Point]:
        async with self._timed("retrieve"):
            return await self.inner.retrieve(collection, ids, with_vectors)

    async def scroll(
        self,
        collection: str,
        user_id: str | None,
        where: Filter | None = None,
        with_vectors: bool = False,
    ) -> list[Point]:
        async with self._timed("scroll"):
            return await self.inner.scroll(collection, user_id, where, with_vectors)

    async def count(
        self, collection: str, user_id: str | None = None, where: Filter | None = None
    ) -> int:
        async with self._timed("count"):
            return await self.inner.count(collection, user_id, where)

    async def delete(self, collection: str, ids: Sequence[str]) -> None:
        async with self._timed("delete"):
            await self.inner.delete(collection, ids)

    async def delete_user(self, collection: str, user_id: str) -> int:
        async with self._timed("delete_user"):
            return await self.inner.delete_user(collection, user_id)

    async def vacuum(self) -> int:
        async with self._timed("vacuum"):
            return await self.inner.vacuum()

    async def close(self) -> None:
        await self.inner.close()


def token_recorder(metrics: Metrics, budget: TokenBudget | None = None) -> TokenCallback:
    """A callback for the OpenAI backend: tokens spent per task, and charged to the tenant the
    call was for (offline spends none)."""

    def record(task: str, prompt_tokens: int, completion_tokens: int) -> None:
        metrics.llm_tokens.labels(task=task, kind="prompt").inc(prompt_tokens)
        metrics.llm_tokens.labels(task=task, kind="completion").inc(completion_tokens)
        if budget is not None:
            budget.charge(prompt_tokens + completion_tokens)

    return record
