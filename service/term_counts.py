"""How many of a user's pages hold each query term, remembered for a few seconds.

The structured ranking leaves out query terms found in more than a share of the user's pages.
Counting them is one store search per term and a count per retrieve, a large part of a
retrieve's time on the event loop, while a user's vocabulary barely moves between two
retrieves. A count is used for ``TTL_S``; a DELETE drops the user's.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from adapters.repository import MemoryRepository

MAX_ENTRIES = 100_000  # (user, term) pairs; the oldest go first
TTL_S = 30.0  # how long a count is reused


@dataclass(frozen=True, slots=True)  # no __dict__: one object per count for the collector
class _Count:
    value: int
    limit: int  # counted up to this many: exact only below it
    at: float


class TermCounts:
    def __init__(
        self,
        repo: MemoryRepository,
        ttl_s: float = TTL_S,
        clock: Callable[[], float] = time.monotonic,
        max_entries: int = MAX_ENTRIES,
    ) -> None:
        self.repo = repo
        self.ttl_s = ttl_s
        self.clock = clock
        self.max_entries = max_entries
        self._counts: OrderedDict[tuple[str, str], _Count] = OrderedDict()
        # bumped by a DELETE: a count that started before it is not kept after it
        self._forgets: dict[str, int] = {}

    async def count_pages(self, user_id: str) -> int:
        key = (user_id, "")
        cached = self._fresh(key)
        if cached is not None:
            return cached.value
        before = self._forgets.get(user_id, 0)
        value = await self.repo.count_pages(user_id)
        self._keep(key, _Count(value, 0, self.clock()), before)
        return value

    async def pages_with_token(
        self, user_id: str, vector: Sequence[float], token: str, limit: int
    ) -> int:
        key = (user_id, f"t:{token}")
        cached = self._fresh(key)
        if cached is not None and (cached.value < cached.limit or cached.limit >= limit):
            return min(cached.value, limit)
        before = self._forgets.get(user_id, 0)
        value = await self.repo.pages_with_token(user_id, vector, token, limit)
        self._keep(key, _Count(value, limit, self.clock()), before)
        return value

    def __len__(self) -> int:
        """(user, term) pairs counted now (the soak samples it: bounded by ``max_entries``)."""
        return len(self._counts)

    def forget(self, user_id: str) -> None:
        self._forgets[user_id] = self._forgets.get(user_id, 0) + 1
        for key in [key for key in self._counts if key[0] == user_id]:
            del self._counts[key]

    def _fresh(self, key: tuple[str, str]) -> _Count | None:
        cached = self._counts.get(key)
        if cached is None or self.clock() - cached.at >= self.ttl_s:  # ttl 0: never cached
            return None
        return cached

    def _keep(self, key: tuple[str, str], count: _Count, forgets_before: int) -> None:
        if self._forgets.get(key[0], 0) != forgets_before:
            return  # the user was deleted while this was counted
        self._counts[key] = count
        self._counts.move_to_end(key)
        while len(self._counts) > self.max_entries:
            self._counts.popitem(last=False)
