"""Embedding adapters (the Embedder port): local MiniLM and OpenAI-compatible."""

from __future__ import annotations

from streams.ports import Embedder
from streams.settings import Settings


def build_embedder(settings: Settings) -> Embedder:
    """The embedder ``settings.embedder`` names; each backend is imported only when chosen."""
    if settings.embedder == "openai":
        from streams.embedders.openai_embed import OpenAIEmbedder

        return OpenAIEmbedder(settings)
    from streams.embedders.minilm import MiniLMEmbedder

    return MiniLMEmbedder(settings)
