"""Stopping the embedded stack while a stage is stuck on a call that never returns.

Faust's own wait for every event in flight has no bound and cannot be cancelled (its consumer
runs on a thread), so a stage stuck on a slow LLM call once held `memoryos eval` after its
last question, and the process, forever. The stop is bounded by the drain; what was in flight
is left to the reconciler (tests/integration/test_crash_recovery.py shows it redone).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from adapters.settings import load_settings
from streams.broker import free_port
from streams.stack import Stack
from tests.support.builders import make_turns
from tests.support.stacks import FAST_GROUP

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]

TALK = [(f"I keep planning hiking trip {i} in the Alps.", "Enjoy the hike!") for i in range(4)]


async def test_a_stage_stuck_on_a_call_does_not_hold_the_stop(tmp_path: Path) -> None:
    settings = load_settings(
        data_dir=tmp_path, broker_port=free_port(), port=0, stm_capacity=1, drain_timeout_s=1.0,
        **FAST_GROUP,
    )  # fmt: skip
    stack = Stack(settings, serve_http=False)
    await stack.start()
    assert stack.deps is not None
    assert stack.service is not None
    entered, cancelled = asyncio.Event(), asyncio.Event()

    async def never(*_: Any) -> Any:
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    llm: Any = stack.deps.llm
    llm.topics = llm.topics_summary = llm.topics_many = never  # the MTM stage's calls
    await stack.service.add_turns(make_turns("hiker", TALK))
    await asyncio.wait_for(entered.wait(), 60)  # an evicted page is stuck in the MTM stage
    # Before the fix this never returned (pytest-timeout failed the test after 300 s).
    await asyncio.wait_for(stack.stop(), 120)
    assert cancelled.is_set(), "the stuck call outlived the stop"


async def test_the_start_up_heap_is_frozen_while_up_and_handed_back_at_stop(
    tmp_path: Path,
) -> None:
    import gc

    settings = load_settings(data_dir=tmp_path, broker_port=free_port(), port=0, **FAST_GROUP)
    stack = Stack(settings, serve_http=False)
    await stack.start()
    try:
        # the modules, the model's bindings, Faust's services: outside full collections
        assert gc.get_freeze_count() > 10_000
    finally:
        await stack.stop(drain_timeout_s=1.0)
    assert gc.get_freeze_count() == 0
