"""Build the ports from Settings once, and close them once."""

from __future__ import annotations

from agents.context import Services
from streams.embedders import build_embedder
from streams.instrumented import (
    InstrumentedEmbedder,
    InstrumentedLLM,
    InstrumentedStore,
    token_recorder,
)
from streams.llm import build_llm
from streams.metrics import Metrics
from streams.ports import Clock, SystemClock
from streams.repository import MemoryRepository
from streams.settings import Settings
from streams.stores import build_store


async def build_services(
    settings: Settings, metrics: Metrics | None = None, clock: Clock | None = None
) -> Services:
    metrics = metrics or Metrics()
    embedder = InstrumentedEmbedder(build_embedder(settings), metrics)
    store = InstrumentedStore(build_store(settings), metrics)
    await store.ensure_collections(embedder.dim)
    llm = build_llm(settings, embedder, on_tokens=token_recorder(metrics))
    return Services(
        settings=settings,
        llm=InstrumentedLLM(llm, metrics),
        embedder=embedder,
        store=store,
        repo=MemoryRepository(store),
        clock=clock or SystemClock(),
        metrics=metrics,
    )


async def close_services(services: Services) -> None:
    await services.llm.close()
    await services.embedder.close()
    await services.store.close()
