"""One contract for every LLM adapter: the shapes the pipeline relies on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from adapters.llm import build_llm
from adapters.ports import LLM, Answer, PromptMemory, Topic
from adapters.settings import Settings
from memory.chain import ContinuityVerdict
from schemas.records import Page, Trait
from tests.support.builders import page
from tests.support.fixtures import settings_for

DIALOGUE = """User: I am planning a business trip to Berlin next week.
Assistant: Berlin is lovely in autumn. I recommend the Pergamon museum.
Time: 2023-10-01T10:00:00
User: I also caught a cold, so I feel sick.
Assistant: Rest well and drink plenty of tea.
Time: 2023-10-02T10:00:00"""


@pytest.fixture(params=["offline", "openai"])
async def llm(request: pytest.FixtureRequest) -> AsyncIterator[LLM]:
    if request.param == "openai":
        settings = settings_for(request.getfixturevalue("fake_openai"))
    else:
        settings = Settings(llm="offline")
    adapter = build_llm(settings)
    assert adapter.backend == request.param
    yield adapter
    await adapter.close()


def exchange(query: str, response: str) -> Page:
    """Page ``p`` of user ``u``, of 1 October 2023, in chain ``c``."""
    return page(
        query=query,
        response=response,
        page_id="p",
        user_id="u",
        turn_id="t",
        timestamp=datetime(2023, 10, 1, tzinfo=UTC),
        chain_id="c",
    )


async def test_continuity_returns_a_verdict_with_a_summary(llm: LLM) -> None:
    previous = exchange("I am planning a trip to Berlin.", "Berlin is lovely.")
    for before in (None, previous):
        verdict = await llm.continuity(before, exchange("Which Berlin museum?", "The Pergamon."))
        assert isinstance(verdict, ContinuityVerdict)
        assert isinstance(verdict.continuous, bool)
        assert verdict.summary.strip()
    first = await llm.continuity(None, exchange("Hi", "Hello"))
    assert first.continuous is False


async def test_topics_at_most_two_with_keywords(llm: LLM) -> None:
    topics = await llm.topics(DIALOGUE)
    assert 1 <= len(topics) <= 2
    for topic in topics:
        assert isinstance(topic, Topic)
        assert topic.theme
        assert topic.content
        assert topic.keywords
        assert all(isinstance(keyword, str) and keyword for keyword in topic.keywords)


async def test_segment_summary_is_text(llm: LLM) -> None:
    summary = await llm.segment_summary("The user plans a trip.", DIALOGUE)
    assert isinstance(summary, str)
    assert summary.strip()


async def test_user_traits_keep_known_and_use_appendix_levels(llm: LLM) -> None:
    known = {"Openness": Trait(level="Medium", reason="earlier")}
    traits = await llm.user_traits(known, DIALOGUE)
    assert "Openness" in traits
    assert all(isinstance(trait, Trait) for trait in traits.values())
    assert all(trait.level in ("High", "Medium", "Low") for trait in traits.values())


async def test_facts_are_lists_of_strings(llm: LLM) -> None:
    for facts in (await llm.user_knowledge(DIALOGUE), await llm.agent_traits(DIALOGUE)):
        assert isinstance(facts, list)
        assert facts
        assert all(isinstance(fact, str) and fact.strip() for fact in facts)


async def test_respond_returns_an_answer(llm: LLM) -> None:
    memory = PromptMemory("Where is the trip?", [DIALOGUE])
    answer = await llm.respond("You are role-playing as Assistant.", "Where is the trip?", memory)
    assert isinstance(answer, Answer)
    assert answer.text.strip()
    assert answer.prompt_tokens >= 0
    assert answer.completion_tokens >= 0


async def test_persona_gives_the_three_analyses_as_apart(llm: LLM) -> None:
    known = {"Openness": Trait(level="Medium", reason="earlier")}
    together = await llm.persona(known, DIALOGUE)
    assert together.traits == await llm.user_traits(known, DIALOGUE)
    assert together.user_knowledge == await llm.user_knowledge(DIALOGUE)
    assert together.agent_traits == await llm.agent_traits(DIALOGUE)
