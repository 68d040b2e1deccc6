"""The soak bench's pieces: endless per-user conversations and the summary of its series."""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any

import pytest

from adapters.settings import Settings
from evaluation import bench_soak
from evaluation.bench_soak import SoakPlan, SoakRun, summary, user_turns, verify_histories


def test_a_users_endless_conversation_has_unique_ids_and_ordered_times() -> None:
    turns = list(itertools.islice(user_turns("u1", seed=7), 60))  # spans three blocks
    assert len({t.turn_id for t in turns}) == 60
    assert [t.timestamp for t in turns] == sorted(t.timestamp for t in turns)
    assert [t.turn_id for t in itertools.islice(user_turns("u1", seed=7), 60)] == [
        t.turn_id for t in turns
    ]


def sample(t_s: float, turns: int, rss: float, broker: float, rolls: int) -> dict[str, float]:
    return {"t_s": t_s, "turns_sent": turns, "process_rss_mb": rss, "broker_rss_mb": broker,
            "store_mb": turns / 100, "consumer_lag": 3, "broker_rolls": rolls}  # fmt: skip


def test_the_summary_reports_peaks_and_the_second_half_slope() -> None:
    run = SoakRun(SoakPlan(minutes=1, turns_per_s=10, users=2, retrieves_per_s=0))
    run.sent = {"a": 300, "b": 300}
    run.samples = [sample(0, 0, 500, 20, 0), sample(20, 200, 800, 390, 0),
                   sample(40, 400, 800, 20, 1), sample(60, 600, 802, 210, 1)]  # fmt: skip
    result = summary(run)
    assert result["turns"] == 600
    assert result["broker_rss_mb_peak"] == 390
    assert result["broker_rolls"] == 1
    assert result["process_rss_mb_peak"] == 802
    assert result["process_rss_mb_per_1000_turns_second_half"] == 10.0  # 2 MB over 200 turns


class StubRepo:
    """One user's STM window (turn ids with their chain seq) and tier counts."""

    def __init__(self, window: list[tuple[str, int]], mid_term: int, segments: int) -> None:
        self.window, self.mid_term, self.segments = window, mid_term, segments

    async def stm_pages(self, user_id: str, with_vectors: bool = True) -> list[Any]:
        return [SimpleNamespace(turn_id=t, seq=seq) for t, seq in self.window]

    async def count_user(self, user_id: str) -> dict[str, int]:
        return {"short_term": len(self.window), "mid_term_pages": self.mid_term,
                "segments": self.segments}  # fmt: skip


async def check(window_from: int, newest: int, mid_term: int, segments: int) -> list[str]:
    ids = [t.turn_id for t in itertools.islice(user_turns("u", seed=7), 20)]
    window = [(ids[i], newest - (19 - i)) for i in range(window_from, 20)]
    points = [
        SimpleNamespace(payload={"turn_id": t, "seq": seq, "tier": "stm"}) for t, seq in window
    ]

    async def scroll(collection: str, user_id: str) -> list[Any]:
        return points

    deps = SimpleNamespace(
        repo=StubRepo(window, mid_term, segments), store=SimpleNamespace(scroll=scroll)
    )
    settings = Settings(stm_capacity=7, mtm_capacity=5)
    return await verify_histories(deps, {"u": 20}, settings, seed=7)  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_the_history_check_tells_eviction_from_loss() -> None:
    assert await check(13, newest=20, mid_term=13, segments=4) == []  # all there
    assert await check(13, newest=20, mid_term=9, segments=5) == []  # MTM full: evicted
    assert await check(13, newest=20, mid_term=9, segments=4), "fewer pages, MTM not full"
    assert await check(13, newest=19, mid_term=13, segments=4), "a turn never linked"
    assert await check(13, newest=21, mid_term=13, segments=4), "a turn linked twice"
    assert await check(12, newest=20, mid_term=12, segments=4), "the window is not the newest 7"


def test_the_chain_shift_names_where_a_turn_was_lost() -> None:
    ids = [f"t{n}" for n in range(1, 11)]
    rows = [(1, "mtm"), (2, "mtm"), (5, "mtm"), (6, "mtm")] + [(n, "stm") for n in range(8, 11)]

    def point(turn: int, seq: int, tier: str) -> Any:
        return SimpleNamespace(payload={"turn_id": f"t{turn}", "seq": seq, "tier": tier})

    # turn 6 never linked: the turns after it are numbered one lower
    lost = [point(n, n if n < 6 else n - 1, tier) for n, tier in rows if n != 6]
    found = bench_soak.chain_shifts(ids, lost)
    assert "last in step: turn 5 (mtm)" in found
    assert "first out of step: turn 8 as seq 7 (stm)" in found
    assert "3 of 6 stored pages out of step" in found
    assert "in step over 7" in bench_soak.chain_shifts(ids, [point(n, n, t) for n, t in rows])


@pytest.mark.asyncio
async def test_the_drain_waits_for_the_journal_not_only_for_lag(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Lag 0 while a turn is still journaled (in the producer's buffer, on no partition yet)
    is not drained: the run's history check would find that turn missing."""
    monkeypatch.setattr(bench_soak.asyncio, "sleep", _no_wait)
    unplaced = [["turn"], ["turn"], [], [], []]

    async def lag() -> dict[tuple[str, int], int]:
        return {("memoryos.turns", 0): 0}

    async def pending(limit: int = 10_000, after: int = 0) -> list[str]:
        return unplaced.pop(0)

    stack = SimpleNamespace(lag=SimpleNamespace(lag=lag), journal=SimpleNamespace(pending=pending))
    assert await bench_soak.wait_drained(stack, 60.0)  # type: ignore[arg-type]
    assert unplaced == [[]], "two quiet reads after the journal emptied, and no more"


async def _no_wait(_: float) -> None:
    return None


def test_the_soak_samples_the_visits_lost_over_every_reason() -> None:
    from adapters.metrics import Metrics

    metrics = Metrics()
    stack = SimpleNamespace(deps=SimpleNamespace(metrics=metrics))
    assert bench_soak._visits_lost(stack) == 0  # type: ignore[arg-type]
    metrics.visits_lost.labels(reason="send").inc(2)
    metrics.visits_lost.labels(reason="stopped").inc()
    assert bench_soak._visits_lost(stack) == 3  # type: ignore[arg-type]
