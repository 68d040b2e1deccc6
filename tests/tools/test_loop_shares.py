"""tools.loop_shares on py-spy's raw lines."""

from __future__ import annotations

from tools.loop_shares import shares

LINES = [
    "thread (1): MainThread;run (adapters/event_loop.py:9);place (agents/mtm.py:3);"
    "upsert (adapters/stores/edge.py:5);validate (pydantic/main.py:7) 6",
    "thread (1): MainThread;run (adapters/event_loop.py:9);post (openai/_base_client.py:1) 3",
    "thread (1): MainThread;run (adapters/event_loop.py:9);_run_once (asyncio/base_events.py:2) 1",
    "thread (2): Thread-1;work (threading.py:3) 50",
    "not a sample line",
]


def test_own_time_goes_to_the_innermost_frame_and_calls_out_count_inclusively() -> None:
    found = shares(LINES, "MainThread")
    assert found["samples"] == 10
    assert found["own"] == {"pydantic": 0.6, "llm client": 0.3, "event loop": 0.1}
    assert found["inclusive"] == {"store": 0.6, "llm client": 0.3}


def test_without_a_thread_every_sample_counts() -> None:
    found = shares(LINES, None)
    assert found["samples"] == 60
    assert found["own"]["other"] == round(50 / 60, 3)


def test_no_samples_is_said_plainly() -> None:
    assert shares(["junk"], None) == {"samples": 0}
