"""Vector-store adapters: Qdrant Edge in-process (embedded) and Qdrant via qdrant-client."""

from __future__ import annotations

from adapters.ports import VectorStore
from adapters.settings import Settings


def build_store(settings: Settings) -> VectorStore:
    """The store ``settings.store`` names; collections are created by ``ensure_collections``."""
    if settings.store == "edge":
        from adapters.stores.edge import EdgeStore

        return EdgeStore(
            settings.data_dir / "qdrant",
            search_threads=settings.edge_search_threads,
            field_cache_points=settings.edge_field_cache_points,
            page_payloads=settings.edge_page_payloads,
            meta_keys=settings.meta_filter_keys,
        )
    from adapters.stores.qdrant import QdrantStore

    return QdrantStore(
        settings.qdrant_url, api_key=settings.qdrant_key, meta_keys=settings.meta_filter_keys
    )


def unshared_store(settings: Settings) -> str | None:
    """Why the configured store cannot be shared by separate processes (a worker and service
    replicas each start their own), or None. Each would write and read a store of its own: the
    service accepts turns that its ``GET memory`` never shows."""
    if settings.store == "edge":
        where = f"its own folder ({settings.data_dir / 'qdrant'})"
    elif not settings.qdrant_url.startswith(("http://", "https://")):
        where = f"its own {settings.qdrant_url!r}"
    else:
        return None
    return (
        f"the store is local to each process (MEMORYOS_STORE={settings.store}, in {where}), "
        "so workers and service replicas would each see only their own: set "
        "MEMORYOS_STORE=qdrant and MEMORYOS_QDRANT_URL=http://HOST:6333 (a Qdrant server), "
        "or run everything in one process with `memoryos up`"
    )
