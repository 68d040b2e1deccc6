"""Build the ports from Settings once, and close them once."""

from __future__ import annotations

import asyncio
import logging

from adapters.deps import Deps
from adapters.embedders import build_embedder
from adapters.embedders.precision import for_store, minilm_name
from adapters.instrumented import (
    InstrumentedEmbedder,
    InstrumentedLLM,
    InstrumentedStore,
    token_recorder,
)
from adapters.llm import build_llm
from adapters.metrics import Metrics
from adapters.ports import (
    AGENT_TRAITS,
    PAGES,
    SEGMENTS,
    USER_KNOWLEDGE,
    Clock,
    SystemClock,
    VectorStore,
)
from adapters.repository import MemoryRepository
from adapters.settings import Settings
from adapters.stores import build_store
from adapters.token_budget import (
    BudgetedLLM,
    TokenBudget,
)
from schemas.errors import ConfigError, StoreError, UnstorablePayload

log = logging.getLogger(__name__)


STORE_TRIES = 3  # 1 + 2 s apart: a server still starting gets a moment, a wrong URL does not


async def open_store(store: VectorStore, settings: Settings, dim: int) -> None:
    """A Qdrant server gets a few tries at start, then one clear error naming the setting; a
    local store's failure (a damaged log, a locked folder) is final at once."""
    tries = STORE_TRIES if settings.store == "qdrant" else 1
    for attempt in range(tries):
        try:
            await store.ensure_collections(dim)
            return
        except UnstorablePayload:
            raise
        except StoreError as exc:
            if attempt + 1 == tries:
                if tries == 1:
                    raise
                raise StoreError(
                    f"cannot reach the Qdrant server at {settings.qdrant_url} after {tries} "
                    f"tries ({exc}); check MEMORYOS_QDRANT_URL and MEMORYOS_QDRANT_API_KEY"
                ) from None
            await asyncio.sleep(float(attempt + 1))


async def build_deps(
    settings: Settings, metrics: Metrics | None = None, clock: Clock | None = None
) -> Deps:
    metrics = metrics or Metrics()
    inner = build_embedder(settings)
    store = InstrumentedStore(build_store(settings), metrics)
    await open_store(store, settings, inner.dim)
    repo = MemoryRepository(store)
    try:
        # auto precision follows the store's vectors: known only once the store is open
        stored = await repo.stored_embedder()
        legacy: str | None = None
        if stored is None and settings.embedder == "minilm" and await _holds_vectors(store):
            # vectors but no record: made before stores recorded their embedder, when MiniLM
            # ran fp32 only; neither auto nor int8 may claim those vectors for int8
            stored = legacy = minilm_name("fp32")
            log.info("the store names no embedder but holds vectors: taken as MiniLM fp32's")
        resolved = for_store(settings, stored)
        if resolved is not settings:
            settings, inner = resolved, build_embedder(resolved)
        if stored is None and settings.embedder == "minilm":
            # the model loads before a new store is claimed for it: one that cannot load (an
            # int8 graph that cannot be made) leaves the store free for another precision
            await inner.embed(["memoryos warm-up"])
        embedder = InstrumentedEmbedder(inner, metrics)
        await check_embedder(repo, embedder.name, legacy)
    except BaseException:
        await inner.close()  # a model the warm-up loaded, with its threads
        await store.close()  # its folder's lock goes with it
        raise
    budget = TokenBudget(settings.tokens_per_day, metrics)
    llm = build_llm(settings, embedder, on_tokens=token_recorder(metrics, budget))
    return Deps(
        settings=settings,
        llm=InstrumentedLLM(BudgetedLLM(llm, budget), metrics),
        embedder=embedder,
        store=store,
        repo=repo,
        clock=clock or SystemClock(),
        metrics=metrics,
        budget=budget,
    )


async def _holds_vectors(store: InstrumentedStore) -> bool:
    """Whether any collection holds an embedded point: pages can all be gone (evicted from
    MTM, forgotten) while facts and segments stay."""
    for collection in (PAGES, SEGMENTS, USER_KNOWLEDGE, AGENT_TRAITS):
        if await store.count(collection):
            return True
    return False


async def check_embedder(repo: MemoryRepository, name: str, inferred: str | None = None) -> None:
    """Refuse a store whose vectors another embedder made: of the same size they would be
    searched without an error, and found by chance (MiniLM's fp32 and int8 vectors differ).
    ``inferred``: the embedder of a store that names none, as far as its contents tell."""
    stored = inferred if inferred not in (None, name) else await repo.claim_embedder(name)
    if stored != name:
        # int8 exists on ONNX Runtime only: a runtime set to torch is then the cause
        runtime = " and MEMORYOS_MINILM_RUNTIME=onnx" if stored.endswith(":int8") else ""
        raise ConfigError(
            f"the store's vectors were made by the embedder {stored!r}, not by {name!r} as "
            f"configured: set MEMORYOS_EMBEDDER (and MEMORYOS_MINILM_PRECISION{runtime}) back, "
            "or point MEMORYOS_DATA_DIR (MEMORYOS_QDRANT_URL) at another store and ingest the "
            "turns again"
        )


async def close_deps(deps: Deps) -> None:
    # each may wait for its child process to answer what it was sent: at once, not in turn
    await asyncio.gather(deps.llm.close(), deps.embedder.close())
    await deps.store.close()
