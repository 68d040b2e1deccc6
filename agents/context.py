"""What every agent is handed by the app factory: its dependencies, never a global."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from memory.heat import HeatParams
from streams.metrics import Metrics
from streams.ports import LLM, Clock, Embedder, VectorStore
from streams.repository import MemoryRepository
from streams.settings import Settings

Send = Callable[..., Awaitable[Any]]


@dataclass
class Services:
    settings: Settings
    llm: LLM
    embedder: Embedder
    store: VectorStore
    repo: MemoryRepository
    clock: Clock
    metrics: Metrics

    @property
    def heat_params(self) -> HeatParams:
        return HeatParams.from_settings(self.settings)


def user_key(user_id: str) -> bytes:
    """Every topic is keyed by user, so one user's events share a partition and stay ordered."""
    return user_id.encode()
