"""The dependencies the app factory hands every agent and the response service: no globals."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from adapters.metrics import Metrics
from adapters.ports import LLM, Clock, Embedder, VectorStore
from adapters.repository import MemoryRepository
from adapters.settings import Settings

Send = Callable[..., Awaitable[Any]]


@dataclass
class Deps:
    settings: Settings
    llm: LLM
    embedder: Embedder
    store: VectorStore
    repo: MemoryRepository
    clock: Clock
    metrics: Metrics
