"""OpenAIEmbedder against the fake server."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator

import pytest

from adapters.embedders.openai_embed import OpenAIEmbedder
from evaluation.fake_openai import FakeOpenAI, Fault, pseudo_embedding
from schemas.errors import EmbedderError
from tests.support.fixtures import settings_for


class RecordingSleep:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        await asyncio.sleep(0)


@pytest.fixture
def sleeps() -> RecordingSleep:
    return RecordingSleep()


@pytest.fixture
async def embedder(
    fake_openai: FakeOpenAI, sleeps: RecordingSleep
) -> AsyncIterator[OpenAIEmbedder]:
    adapter = OpenAIEmbedder(
        settings_for(fake_openai, embedding_dim=16, embedding_batch_size=4), sleep=sleeps
    )
    yield adapter
    await adapter.close()


async def test_vectors_are_unit_length_ordered_and_deterministic(
    embedder: OpenAIEmbedder, fake_openai: FakeOpenAI
) -> None:
    vectors = await embedder.embed(["alpha", "beta"])
    assert [len(vector) for vector in vectors] == [16, 16]
    assert all(math.isclose(math.fsum(v * v for v in vector), 1.0) for vector in vectors)
    raw = pseudo_embedding("beta", 16)
    norm = math.sqrt(math.fsum(v * v for v in raw))
    assert vectors[1] == pytest.approx([v / norm for v in raw])
    assert await embedder.embed(["alpha"]) == vectors[:1]
    assert embedder.name == "openai:fake-embedding"
    assert embedder.dim == 16


async def test_duplicates_embedded_once_and_batched(
    embedder: OpenAIEmbedder, fake_openai: FakeOpenAI
) -> None:
    texts = [f"text {i % 6}" for i in range(20)]  # 6 distinct texts
    vectors = await embedder.embed(texts)
    assert len(vectors) == 20
    assert vectors[0] == vectors[6] == vectors[12]
    sizes = sorted(len(record.body["input"]) for record in fake_openai.calls("embeddings"))
    assert sizes == [2, 4]  # batch size 4
    assert embedder.usage.calls == 2
    assert embedder.usage.prompt_tokens == 12


async def test_empty_input_and_empty_text(
    embedder: OpenAIEmbedder, fake_openai: FakeOpenAI
) -> None:
    assert await embedder.embed([]) == []
    assert fake_openai.requests == []
    (vector,) = await embedder.embed([""])
    assert len(vector) == 16


async def test_retries_with_retry_after(
    embedder: OpenAIEmbedder, fake_openai: FakeOpenAI, sleeps: RecordingSleep
) -> None:
    fake_openai.inject(Fault.rate_limit(retry_after=1), Fault.server_error())
    assert len(await embedder.embed(["x"])) == 1
    assert len(sleeps.delays) == 2
    assert sleeps.delays[0] >= 1
    assert embedder.usage.failures == 2


async def test_quota_and_exhaustion_raise_embedder_error(
    embedder: OpenAIEmbedder, fake_openai: FakeOpenAI
) -> None:
    fake_openai.inject(Fault.quota())
    with pytest.raises(EmbedderError, match="quota"):
        await embedder.embed(["x"])
    assert len(fake_openai.requests) == 1
    fake_openai.inject(*[Fault.unavailable()] * 4)
    with pytest.raises(EmbedderError, match="gave up"):
        await embedder.embed(["y"])


async def test_a_trickled_answer_is_cut_at_the_timeout_and_retried(
    fake_openai: FakeOpenAI, sleeps: RecordingSleep
) -> None:
    adapter = OpenAIEmbedder(settings_for(fake_openai, llm_timeout_s=1.0), sleep=sleeps)
    fake_openai.inject(Fault.trickle(0.05))
    try:
        assert len(await adapter.embed(["x"])) == 1
    finally:
        await adapter.close()
    assert len(sleeps.delays) == 1
    assert adapter.usage.failures == 1
    assert len(fake_openai.calls("embeddings")) == 2


async def test_dimension_mismatch_is_a_clear_error(
    embedder: OpenAIEmbedder, fake_openai: FakeOpenAI
) -> None:
    fake_openai.embedding_dim = 32  # a model that ignores the `dimensions` parameter
    with pytest.raises(EmbedderError, match="MEMORYOS_EMBEDDING_DIM"):
        await embedder.embed(["x"])
