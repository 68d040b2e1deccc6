"""One contract for every Embedder adapter: MiniLM (real model) and OpenAI (real client, local
OpenAI-compatible server)."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from adapters.embedders.minilm import MiniLMEmbedder
from adapters.embedders.openai_embed import OpenAIEmbedder
from adapters.ports import Embedder
from adapters.settings import load_settings
from evaluation.fake_openai import FakeOpenAI
from tests.support.fixtures import settings_for

TEXTS = ["I walk my dog Miso every morning.", "Quarterly tax filing is due.", "I walk my dog."]


@pytest_asyncio.fixture(params=["minilm", "openai"])
async def embedder(
    request: pytest.FixtureRequest, fake_openai: FakeOpenAI
) -> AsyncIterator[Embedder]:
    adapter: Embedder
    if request.param == "minilm":
        adapter = MiniLMEmbedder(load_settings())
    else:
        adapter = OpenAIEmbedder(settings_for(fake_openai, embedding_dim=64))
    yield adapter
    await adapter.close()


async def test_one_unit_vector_per_text_in_order(embedder: Embedder) -> None:
    vectors = await embedder.embed(TEXTS)
    assert len(vectors) == len(TEXTS)
    for vector in vectors:
        assert len(vector) == embedder.dim
        assert math.isclose(math.sqrt(sum(x * x for x in vector)), 1.0, rel_tol=1e-3)


async def test_identical_texts_get_identical_vectors(embedder: Embedder) -> None:
    first, second, third = await embedder.embed([TEXTS[0], TEXTS[1], TEXTS[0]])
    assert first == third
    assert first != second


async def test_empty_input_gives_no_vectors(embedder: Embedder) -> None:
    assert await embedder.embed([]) == []
