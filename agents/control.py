"""Control agent: a deleted user's entries leave every table (as changelog tombstones)."""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence
from typing import Any

from agents.runtime import BatchRunner
from schemas.records import UserForgotten


class ControlAgent:
    stage = "control"

    def __init__(
        self, tables: Sequence[MutableMapping[str, Any]], runner: BatchRunner[UserForgotten]
    ) -> None:
        self.tables = tables
        self.runner = runner

    async def process(self, events: Sequence[Any]) -> None:
        await self.runner.process(
            events, lambda event: event.user_id, lambda e: self.forget(e.user_id)
        )

    async def forget(self, user_id: str) -> None:
        for table in self.tables:
            if user_id in table:
                # Faust turns a deletion into a changelog tombstone, so recovery forgets too.
                del table[user_id]
