"""Concurrent query embeddings share calls; each caller gets its own vectors back."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from adapters.embedders.batching import MicroBatchingEmbedder
from schemas.errors import EmbedderError


class CountingEmbedder:
    name = "counting"
    dim = 2

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[list[str]] = []
        self.fail = fail

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        await asyncio.sleep(0.01)  # an encode takes time: callers arriving meanwhile wait
        if self.fail:
            raise EmbedderError("model down")
        return [[float(len(text)), 1.0] for text in texts]

    async def close(self) -> None:
        return None


async def test_sixteen_concurrent_queries_take_far_fewer_calls_and_get_their_own_vectors() -> None:
    inner = CountingEmbedder()
    batching = MicroBatchingEmbedder(inner, window_s=0.002, max_batch=8)
    texts = [f"q{'x' * i}" for i in range(16)]
    results = await asyncio.gather(*(batching.embed([text]) for text in texts))
    assert [vectors[0][0] for vectors in results] == [float(len(t)) for t in texts]
    assert len(inner.calls) == 2  # two full batches of 8
    assert all(len(call) <= 8 for call in inner.calls)


async def test_a_lone_call_goes_alone_and_a_big_one_is_not_split() -> None:
    inner = CountingEmbedder()
    batching = MicroBatchingEmbedder(inner, window_s=0.0, max_batch=4)
    assert await batching.embed(["a"]) == [[1.0, 1.0]]
    many = [f"t{i}" for i in range(10)]
    assert len(await batching.embed(many)) == 10
    assert inner.calls == [["a"], many]
    assert await batching.embed([]) == []


async def test_a_failure_reaches_every_caller_of_its_batch() -> None:
    batching = MicroBatchingEmbedder(CountingEmbedder(fail=True), window_s=0.002)
    results = await asyncio.gather(
        batching.embed(["a"]), batching.embed(["b"]), return_exceptions=True
    )
    assert all(isinstance(result, EmbedderError) for result in results)
    with pytest.raises(EmbedderError):
        await batching.embed(["c"])
