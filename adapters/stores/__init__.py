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
        )
    from adapters.stores.qdrant import QdrantStore

    return QdrantStore(settings.qdrant_url, api_key=settings.qdrant_key)
