"""Where MiniLM runs: in a process of its own (the default) or in a thread of this one.

The model's Python work (tokenizing, filling the input arrays, pooling) needs the GIL, and
int8 runs each text as a call of its own, so one query batch takes and gives back the GIL a
dozen times. Each time the busy event loop has to stop and wait for it: with many concurrent
callers the loop thread sat off the CPU while it had work, and retrieves stopped growing with
the callers (docs/benchmarks.md, "Throughput and latency"). In a process of its own the model
shares no GIL with the loop; the loop only writes a request to a pipe and reads the answer
when it is ready (``model_process``).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Protocol

from adapters.embedders.minilm_models import Matrix, SentenceModel, load_model
from adapters.native_memory import release_freed_memory
from adapters.settings import Settings
from schemas.errors import EmbedderError


class ModelHost(Protocol):
    """Runs the model; each batch is answered once, to its own caller."""

    async def encode(self, batch: list[str]) -> Matrix: ...

    async def close(self) -> None: ...


def build_host(settings: Settings, precision: str) -> ModelHost:
    if settings.minilm_host == "thread":
        return ThreadHost(
            lambda: load_model(
                settings.minilm_runtime,
                settings.model_cache_path,
                threads=settings.minilm_threads,
                precision=precision,
            )
        )
    from adapters.embedders.model_process import ProcessHost

    return ProcessHost(
        settings.minilm_runtime, settings.model_cache_path, settings.minilm_threads, precision
    )


def encode_and_trim(model: SentenceModel, batch: list[str]) -> Matrix:
    """One batch; glibc's freed pages are handed back after it, whatever happened.

    Each batch has its own shape (texts x tokens), so the model allocates and frees buffers of
    ever new sizes; glibc keeps the freed pieces in its arenas, and without a trim the process
    grew far beyond its start before levelling off. Trimming after each batch keeps it close to
    where it started.
    """
    try:
        return model.encode(batch)
    except Exception as exc:
        raise EmbedderError(f"MiniLM could not embed {len(batch)} texts: {exc}") from exc
    finally:
        release_freed_memory()


class ThreadHost:
    """The model in this process, loaded on first use; each batch in a worker thread."""

    def __init__(self, load: Callable[[], SentenceModel]) -> None:
        self._load_model = load
        self._model: SentenceModel | None = None
        # one encode at a time: two concurrent model calls on two cores only thrash
        self._model_lock = threading.Lock()

    async def encode(self, batch: list[str]) -> Matrix:
        return await asyncio.to_thread(self._encode, batch)

    def _encode(self, batch: list[str]) -> Matrix:
        with self._model_lock:
            return encode_and_trim(self._load(), batch)

    def _load(self) -> SentenceModel:
        """The model, loaded once (called with the model lock held)."""
        if self._model is None:
            try:
                self._model = self._load_model()
            except EmbedderError:
                raise
            except Exception as exc:
                raise EmbedderError(f"cannot load all-MiniLM-L6-v2: {exc}") from exc
        return self._model

    async def close(self) -> None:
        # under the model lock: an encode still running in its thread (a stop's bounded wait)
        # finishes on the model it started with
        await asyncio.to_thread(self._release_model)

    def _release_model(self) -> None:
        with self._model_lock:
            model, self._model = self._model, None
        close = getattr(model, "close", None)  # ONNX Runtime's lanes; torch has none
        if close is not None:
            close()
