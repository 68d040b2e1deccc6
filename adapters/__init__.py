"""Ports and adapters: the LLM, embedders, vector stores, the repository, settings, metrics."""
