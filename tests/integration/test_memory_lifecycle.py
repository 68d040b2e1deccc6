"""MTM -> LPM and MTM eviction on the embedded stack (real broker, agents and store)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from adapters.ports import PAGES, SEGMENTS
from streams.stack import Stack
from tests.support.builders import make_turns
from tests.support.stacks import running_stack

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

RUNNER = [
    ("I live in Lisbon and I run trail races every month.", "Trail racing in Lisbon sounds fun."),
    ("My trail running shoes are worn out after the last trail race.", "Time for new shoes."),
    ("I train for trail races on the hills near Lisbon.", "Hill training helps trail racing."),
    ("My dog Miso joins my trail running on the hills.", "Miso must love trail running."),
    ("I want new trail running shoes for my next trail race.", "Try the Kestrel trail shoes."),
    ("I prefer trail running shoes with a wide toe box.", "The Kestrel has a wide toe box."),
]
TOPICS = [
    ("I bake sourdough bread every weekend with rye flour.", "Rye sourdough is tasty."),
    ("My car needs new winter tyres before December.", "Winter tyres are wise."),
    ("I am learning Japanese grammar with flashcards.", "Flashcards help with grammar."),
    ("Our roof leaks when heavy rain hits the attic.", "Call a roofer about the leak."),
    ("I collect vintage vinyl records of jazz pianists.", "Jazz vinyl is a great hobby."),
    ("My tomato plants on the balcony got aphids.", "Soapy water helps with aphids."),
]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    async with running_stack(
        tmp_path_factory.mktemp("lifecycle"), stm_capacity=1, mtm_capacity=2, heat_tau=3.0
    ) as running:
        yield running


async def test_a_hot_segment_updates_the_persona_and_resets_l_interaction(stack: Stack) -> None:
    assert stack.service is not None
    await stack.service.add_turns(make_turns("runner", RUNNER))
    assert await stack.wait_idle(120)
    memory = await stack.service.get_memory("runner")
    persona = memory["persona"]
    assert persona["user_knowledge"], "facts about the user were extracted"
    assert any("Lisbon" in fact or "trail" in fact for fact in persona["user_knowledge"])
    assert persona["traits"], "user traits were derived"
    hot = max(memory["mid_term"], key=lambda s: len(s["pages"]))
    assert len(hot["pages"]) >= 3
    # After the persona update L_interaction restarted from 0: it counts only later pages.
    assert hot["l_interaction"] < len(hot["pages"])


async def test_the_coldest_segment_is_evicted_with_its_pages(stack: Stack) -> None:
    assert stack.service is not None
    assert stack.deps is not None
    await stack.service.add_turns(make_turns("hobbyist", TOPICS))
    assert await stack.wait_idle(120)
    store = stack.deps.store
    memory = await stack.service.get_memory("hobbyist")
    assert len(memory["mid_term"]) <= 2
    assert await store.count(SEGMENTS, "hobbyist") == len(memory["mid_term"])
    live_pages = len(memory["short_term"]) + sum(len(s["pages"]) for s in memory["mid_term"])
    assert await store.count(PAGES, "hobbyist") == live_pages
    assert live_pages < len(TOPICS), "the evicted segments' pages left the store"
    registry = stack.deps.metrics.registry
    evicted = registry.get_sample_value(
        "memoryos_memory_transitions_total", {"transition": "segment_evicted"}
    )
    assert evicted is not None
    assert evicted >= 1
