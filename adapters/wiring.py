"""Build the ports from Settings once, and close them once."""

from __future__ import annotations

from adapters.deps import Deps
from adapters.embedders import build_embedder
from adapters.instrumented import (
    InstrumentedEmbedder,
    InstrumentedLLM,
    InstrumentedStore,
    token_recorder,
)
from adapters.llm import build_llm
from adapters.metrics import Metrics
from adapters.ports import Clock, SystemClock
from adapters.repository import MemoryRepository
from adapters.settings import Settings
from adapters.stores import build_store


async def build_deps(
    settings: Settings, metrics: Metrics | None = None, clock: Clock | None = None
) -> Deps:
    metrics = metrics or Metrics()
    embedder = InstrumentedEmbedder(build_embedder(settings), metrics)
    store = InstrumentedStore(build_store(settings), metrics)
    await store.ensure_collections(embedder.dim)
    llm = build_llm(settings, embedder, on_tokens=token_recorder(metrics))
    return Deps(
        settings=settings,
        llm=InstrumentedLLM(llm, metrics),
        embedder=embedder,
        store=store,
        repo=MemoryRepository(store),
        clock=clock or SystemClock(),
        metrics=metrics,
    )


async def close_deps(deps: Deps) -> None:
    await deps.llm.close()
    await deps.embedder.close()
    await deps.store.close()
