"""MiniLMEmbedder with the real all-MiniLM-L6-v2 (loaded once for the module)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest

from adapters.embedders import build_embedder
from adapters.embedders.minilm import MiniLMEmbedder
from adapters.settings import Settings
from schemas.errors import ConfigError


class EncodeSpy:
    """Wraps the model's ``encode`` and records every batch it is given."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.encode = model.encode
        self.batches: list[list[str]] = []

    def __call__(self, batch: list[str], **kwargs: Any) -> Any:
        self.batches.append(list(batch))
        return self.encode(batch, **kwargs)


THREAD = {"minilm_host": "thread"}  # these tests share one model loaded in this process


@pytest.fixture(scope="module")
def loaded_model() -> Any:
    embedder = MiniLMEmbedder(Settings(**THREAD))
    return embedder._host._load()  # type: ignore[attr-defined]


@pytest.fixture
def spy(loaded_model: Any) -> Iterator[EncodeSpy]:
    spy = EncodeSpy(loaded_model)
    loaded_model.encode = spy
    yield spy
    del loaded_model.encode  # back to the class's method


def embedder_with(model: Any, **settings: Any) -> MiniLMEmbedder:
    embedder = MiniLMEmbedder(Settings(**THREAD, **settings))
    embedder._host._model = model  # type: ignore[attr-defined]  # one loaded model for all
    return embedder


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


async def test_vectors_are_384_dimensional_unit_vectors(loaded_model: Any) -> None:
    embedder = embedder_with(loaded_model)
    vectors = await embedder.embed(["I booked a flight to Paris.", ""])
    assert embedder.dim == 384
    assert [len(vector) for vector in vectors] == [384, 384]
    for vector in vectors:
        assert math.sqrt(sum(x * x for x in vector)) == pytest.approx(1.0, abs=1e-5)
    assert await embedder.embed([]) == []


async def test_similar_sentences_are_closer_than_unrelated_ones(loaded_model: Any) -> None:
    embedder = embedder_with(loaded_model)
    cat, kitten, tax = await embedder.embed(
        [
            "The cat is sleeping on the sofa.",
            "A kitten naps on the couch.",
            "Quarterly tax returns are due in April.",
        ]
    )
    assert cosine(cat, kitten) > cosine(cat, tax) + 0.3


async def test_duplicates_are_encoded_once_and_identical(loaded_model: Any, spy: EncodeSpy) -> None:
    embedder = embedder_with(loaded_model)
    first, second, again = await embedder.embed(["hello there", "goodbye", "hello there"])
    assert first == again
    assert first != second
    assert spy.batches == [["hello there", "goodbye"]]


async def test_cache_skips_the_model_for_texts_seen_before(
    loaded_model: Any, spy: EncodeSpy
) -> None:
    embedder = embedder_with(loaded_model)
    (before,) = await embedder.embed(["order 1234 is late"])
    after, _new = await embedder.embed(["order 1234 is late", "where is my parcel"])
    assert after == before
    assert spy.batches == [["order 1234 is late"], ["where is my parcel"]]


async def test_cache_is_bounded(loaded_model: Any, spy: EncodeSpy) -> None:
    embedder = MiniLMEmbedder(Settings(**THREAD), cache_size=2)
    embedder._host._model = loaded_model  # type: ignore[attr-defined]
    await embedder.embed(["one", "two", "three"])  # "one" is evicted
    await embedder.embed(["three", "one"])
    assert spy.batches == [["one", "two", "three"], ["one"]]


async def test_texts_are_encoded_in_batches(loaded_model: Any, spy: EncodeSpy) -> None:
    embedder = embedder_with(loaded_model, embedding_batch_size=2)
    texts = ["alpha", "beta", "gamma", "delta", "epsilon", "beta"]
    vectors = await embedder.embed(texts)
    assert spy.batches == [["alpha", "beta"], ["gamma", "delta"], ["epsilon"]]
    assert vectors[1] == vectors[5]
    alone = embedder_with(loaded_model)
    (gamma,) = await alone.embed(["gamma"])  # batching does not change a text's vector
    assert cosine(gamma, vectors[2]) == pytest.approx(1.0, abs=1e-5)


def test_a_wrong_dimension_setting_is_refused() -> None:
    with pytest.raises(ConfigError, match="MEMORYOS_EMBEDDING_DIM"):
        MiniLMEmbedder(Settings(embedding_dim=768))


def test_build_embedder_picks_minilm() -> None:
    assert isinstance(build_embedder(Settings(embedder="minilm")), MiniLMEmbedder)


async def test_close_waits_for_an_encode_in_flight_and_lets_the_model_go() -> None:
    """A stop's close must not pull the model from under an encode still in its thread."""
    import asyncio
    import threading

    class Model:
        def __init__(self) -> None:
            self.closed = False
            self.inside = threading.Event()
            self.release = threading.Event()

        def encode(self, batch: list[str]) -> Any:
            import numpy as np

            self.inside.set()
            assert self.release.wait(10)
            assert not self.closed, "closed while encoding"
            return np.ones((len(batch), 384), dtype=np.float32)

        def close(self) -> None:
            self.closed = True

    embedder = MiniLMEmbedder(Settings(**THREAD))
    model = Model()
    embedder._host._model = model  # type: ignore[attr-defined]
    encoding = asyncio.create_task(embedder.embed(["hello"]))
    await asyncio.to_thread(model.inside.wait, 10)
    closing = asyncio.create_task(embedder.close())
    await asyncio.sleep(0.1)
    assert not model.closed, "close waited for the encode"
    model.release.set()
    await encoding
    await closing
    assert model.closed
    assert embedder._host._model is None  # type: ignore[attr-defined]
