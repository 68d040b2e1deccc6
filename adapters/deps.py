"""The dependencies the app factory hands every agent and the response service: no globals."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from adapters.keyring import Keyring
from adapters.metrics import Metrics
from adapters.ports import LLM, Clock, Embedder, VectorStore
from adapters.repository import MemoryRepository
from adapters.settings import Settings
from adapters.token_budget import TokenBudget

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
    budget: TokenBudget | None = None  # LLM tokens per tenant per day (wiring builds it)
    keyring: Keyring = field(init=False)  # the users' data keys: crypto-shredding

    def __post_init__(self) -> None:
        self.keyring = Keyring(self.repo)
