"""Vector-store adapters: Qdrant Edge in-process (embedded) and Qdrant via qdrant-client."""

from __future__ import annotations

from streams.ports import VectorStore
from streams.settings import Settings


def build_store(settings: Settings) -> VectorStore:
    """The store ``settings.store`` names; collections are created by ``ensure_collections``."""
    if settings.store == "edge":
        from streams.stores.edge import EdgeStore

        return EdgeStore(settings.data_dir / "qdrant")
    from streams.stores.qdrant import QdrantStore

    return QdrantStore(settings.qdrant_url, api_key=settings.qdrant_api_key)
