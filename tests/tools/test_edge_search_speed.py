"""edge_search_speed: every way it times runs on the same store, each twice where reopened."""

from __future__ import annotations

import pytest

from tools.edge_search_speed import POOL_WAYS, run


@pytest.mark.asyncio
async def test_each_way_is_timed_on_the_same_store() -> None:
    timings = await run(users=2, pages=20, searches=8)
    for label in POOL_WAYS:
        assert len(timings[f"{label}_ms_per_search"]) == 2, "reopened twice, A B C C B A"
    assert len(timings["user_only_ms_per_search"]) == 2
    assert all(value > 0 for values in timings.values() for value in values)


@pytest.mark.asyncio
async def test_the_gil_check_has_its_control_and_the_batches_each_size() -> None:
    timings = await run(users=2, pages=20, searches=12)
    for key in ("python_loop_alone_s", "python_loop_beside_a_hashing_thread_s",
                "python_loop_beside_a_searching_thread_s", "query_one_at_a_time_ms_per_search",
                "query_batch_of_3_ms_per_search", "query_batch_of_10_ms_per_search"):  # fmt: skip
        assert len(timings[key]) == 1, key
        assert timings[key][0] > 0, key
