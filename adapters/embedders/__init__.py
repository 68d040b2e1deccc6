"""Embedding adapters (the Embedder port): local MiniLM and OpenAI-compatible."""

from __future__ import annotations

from adapters.ports import Embedder
from adapters.settings import Settings


def build_embedder(settings: Settings) -> Embedder:
    """The embedder ``settings.embedder`` names; each backend is imported only when chosen."""
    if settings.embedder == "openai":
        from adapters.embedders.openai_embed import OpenAIEmbedder

        return OpenAIEmbedder(settings)
    from adapters.embedders.minilm import MiniLMEmbedder

    return MiniLMEmbedder(settings)
