"""OpenAIEmbedder: the Embedder port on an OpenAI-compatible embeddings endpoint.

Texts are deduplicated inside each call (a burst of identical turns costs one embedding),
sent in batches of ``embedding_batch_size``, retried with the same policy as the LLM
(``adapters.llm.retry``), and returned L2-normalised, because the store scores by dot product.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Sequence

from openai import AsyncOpenAI
from openai.types import CreateEmbeddingResponse

from adapters.llm.retry import (
    RetryPolicy,
    Sleep,
    TaskUsage,
    call_with_retries,
    openai_client,
    whole_answer_within,
)
from adapters.settings import Settings
from schemas.errors import EmbedderError

# The API rejects empty strings; a space embeds to a neutral vector instead of failing the batch.
EMPTY_TEXT_STANDIN = " "


class OpenAIEmbedder:
    def __init__(
        self,
        settings: Settings,
        *,
        client: AsyncOpenAI | None = None,
        sleep: Sleep = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self.name = f"openai:{settings.embedding_model}"
        self.dim = settings.embedding_dim
        self._model = settings.embedding_model
        self._batch_size = settings.embedding_batch_size
        self._client = client or openai_client(settings)
        self._policy = RetryPolicy.from_settings(settings)
        self._timeout_s = settings.llm_timeout_s
        self._in_flight = asyncio.Semaphore(settings.llm_max_in_flight)
        self._sleep = sleep
        self._rng = rng or random.Random()
        self.usage = TaskUsage()

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        unique = list(dict.fromkeys(texts))
        batches = [
            unique[start : start + self._batch_size]
            for start in range(0, len(unique), self._batch_size)
        ]
        results = await asyncio.gather(*(self._embed_batch(batch) for batch in batches))
        vectors = {text: vector for batch in results for text, vector in batch}
        return [vectors[text] for text in texts]

    async def _embed_batch(self, batch: list[str]) -> list[tuple[str, list[float]]]:
        inputs = [text or EMPTY_TEXT_STANDIN for text in batch]

        async def attempt() -> CreateEmbeddingResponse:
            async with self._in_flight:
                self.usage.calls += 1
                # dimensions: text-embedding-3 models shorten to the store's vector size.
                async with whole_answer_within(self._timeout_s):
                    return await self._client.embeddings.create(
                        model=self._model,
                        input=inputs,
                        dimensions=self.dim,
                        encoding_format="float",
                    )

        def failed(_: BaseException) -> None:
            self.usage.failures += 1

        response = await call_with_retries(
            attempt,
            self._policy,
            what=f"embeddings ({len(batch)} texts)",
            error=EmbedderError,
            quota_error=EmbedderError,
            sleep=self._sleep,
            rng=self._rng,
            on_failure=failed,
        )
        self.usage.prompt_tokens += response.usage.prompt_tokens if response.usage else 0
        ordered = sorted(response.data, key=lambda item: item.index)
        if len(ordered) != len(batch):
            raise EmbedderError(f"asked for {len(batch)} embeddings, got {len(ordered)}")
        return [
            (text, _unit(item.embedding, self.dim))
            for text, item in zip(batch, ordered, strict=True)
        ]

    async def close(self) -> None:
        await self._client.close()


def _unit(vector: Sequence[float], dim: int) -> list[float]:
    if len(vector) != dim:
        raise EmbedderError(
            f"the embedding model returned {len(vector)} dimensions, MEMORYOS_EMBEDDING_DIM is "
            f"{dim}; set it to the model's size"
        )
    norm = math.sqrt(sum(value * value for value in vector))
    if norm == 0.0 or not math.isfinite(norm):
        raise EmbedderError("the embedding model returned a zero or non-finite vector")
    return [value / norm for value in vector]
