"""The soak bench's pieces: endless per-user conversations and the summary of its series."""

from __future__ import annotations

import itertools

from evaluation.bench_soak import SoakPlan, SoakRun, summary, user_turns


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
