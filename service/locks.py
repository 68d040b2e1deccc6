"""Per-user asyncio locks, created on demand and dropped when nobody holds or waits."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager


class UserLocks:
    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}
        self._users: dict[str, int] = {}  # holders and waiters per user

    @asynccontextmanager
    async def hold(self, user_ids: Iterable[str]) -> AsyncIterator[None]:
        """Every lock of ``user_ids``, taken in sorted order so two callers never deadlock."""
        wanted = sorted(set(user_ids))
        for user in wanted:
            self._users[user] = self._users.get(user, 0) + 1
            self._locks.setdefault(user, asyncio.Lock())
        taken: list[str] = []
        try:
            for user in wanted:
                await self._locks[user].acquire()
                taken.append(user)
            yield
        finally:
            for user in taken:
                self._locks[user].release()
            for user in wanted:
                self._users[user] -= 1
                if not self._users[user]:
                    del self._users[user], self._locks[user]

    def __len__(self) -> int:
        return len(self._locks)
