"""LLM adapters for the MemoryOS tasks: OpenAI-compatible and offline (model-free)."""

from __future__ import annotations

from collections.abc import Callable

from adapters.ports import LLM, Embedder
from adapters.settings import Settings


def build_llm(
    settings: Settings,
    embedder: Embedder | None = None,
    on_tokens: Callable[[str, int, int], None] | None = None,
) -> LLM:
    """The backend ``settings.llm`` names.

    ``embedder`` lets the offline backend (and the OpenAI backend's offline fallback) compare
    pages that arrive without vectors; it is optional.
    """
    if settings.llm == "openai":
        from adapters.llm.openai_llm import OpenAILLM  # the openai client is slow to import

        return OpenAILLM(settings, embedder=embedder, on_tokens=on_tokens)
    from adapters.llm.offline_llm import OfflineLLM
    from adapters.llm.text_process import TextHost

    return OfflineLLM(embedder, keyword_mode=settings.offline_keywords, text=TextHost())
