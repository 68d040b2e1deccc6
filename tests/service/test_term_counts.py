"""TermCounts: a user's term counts are reused for a while, recounted after, dropped on DELETE."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, cast

from adapters.repository import MemoryRepository
from service.term_counts import TermCounts


class CountingRepo:
    """The two counts a ranking asks the store for; every call recorded."""

    def __init__(self) -> None:
        self.pages = {"alice": 40, "bob": 3}
        self.holding = {("alice", "trip"): 12, ("alice", "paris"): 2}
        self.calls: list[tuple[Any, ...]] = []

    async def count_pages(self, user_id: str) -> int:
        self.calls.append(("count", user_id))
        return self.pages.get(user_id, 0)

    async def pages_with_token(
        self, user_id: str, vector: Sequence[float], token: str, limit: int
    ) -> int:
        self.calls.append(("token", user_id, token, limit))
        return min(self.holding.get((user_id, token), 0), limit)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def counts_with(ttl_s: float) -> tuple[TermCounts, CountingRepo, Clock]:
    repo, clock = CountingRepo(), Clock()
    return TermCounts(cast(MemoryRepository, repo), ttl_s, clock), repo, clock


async def test_counts_are_reused_within_the_ttl_and_recounted_after() -> None:
    counts, repo, clock = counts_with(30.0)
    assert await counts.count_pages("alice") == 40
    assert await counts.pages_with_token("alice", [], "trip", 9) == 9
    repo.pages["alice"] = 41
    clock.now = 29.0
    assert await counts.count_pages("alice") == 40
    assert await counts.pages_with_token("alice", [], "trip", 9) == 9
    assert len(repo.calls) == 2
    clock.now = 30.0
    assert await counts.count_pages("alice") == 41
    assert len(repo.calls) == 3


async def test_a_count_cut_at_a_lower_limit_is_recounted_for_a_higher_one() -> None:
    counts, repo, _ = counts_with(30.0)
    assert await counts.pages_with_token("alice", [], "trip", 9) == 9  # at least 9
    assert await counts.pages_with_token("alice", [], "trip", 5) == 5  # known: no call
    assert await counts.pages_with_token("alice", [], "trip", 20) == 12  # must count again
    assert await counts.pages_with_token("alice", [], "paris", 9) == 2  # exact below its limit
    assert await counts.pages_with_token("alice", [], "paris", 50) == 2
    tokens = [call for call in repo.calls if call[0] == "token"]
    assert tokens == [
        ("token", "alice", "trip", 9),
        ("token", "alice", "trip", 20),
        ("token", "alice", "paris", 9),
    ]


async def test_ttl_zero_counts_every_time() -> None:
    counts, repo, _ = counts_with(0.0)
    await counts.count_pages("alice")
    await counts.count_pages("alice")
    assert repo.calls == [("count", "alice"), ("count", "alice")]


async def test_forget_drops_only_that_users_counts() -> None:
    counts, repo, _ = counts_with(30.0)
    await counts.count_pages("alice")
    await counts.count_pages("bob")
    counts.forget("alice")
    await counts.count_pages("alice")
    await counts.count_pages("bob")
    assert repo.calls == [("count", "alice"), ("count", "bob"), ("count", "alice")]


async def test_the_oldest_counts_go_first_past_the_bound() -> None:
    repo, clock = CountingRepo(), Clock()
    counts = TermCounts(cast(MemoryRepository, repo), 30.0, clock, max_entries=1)
    await counts.count_pages("alice")
    await counts.count_pages("bob")  # alice's count is dropped
    await counts.count_pages("bob")
    await counts.count_pages("alice")
    assert repo.calls == [("count", "alice"), ("count", "bob"), ("count", "alice")]


async def test_a_count_that_started_before_a_delete_is_not_kept_after_it() -> None:
    """A retrieve counting while the user's DELETE runs must not leave pre-DELETE counts."""
    counts, repo, _ = counts_with(30.0)
    release = asyncio.Event()
    count = repo.count_pages

    async def slow_count(user_id: str) -> int:
        value = await count(user_id)
        await release.wait()  # the DELETE happens here
        return value

    repo.count_pages = slow_count  # type: ignore[method-assign]
    counting = asyncio.create_task(counts.count_pages("alice"))
    await asyncio.sleep(0)
    counts.forget("alice")
    release.set()
    assert await counting == 40  # that retrieve still gets its answer
    repo.count_pages = count  # type: ignore[method-assign]
    repo.pages["alice"] = 2  # the user's new life
    assert await counts.count_pages("alice") == 2
