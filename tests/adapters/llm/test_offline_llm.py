from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from adapters.llm import build_llm
from adapters.llm.offline_answers import I_DONT_KNOW, NOTHING_REMEMBERED
from adapters.llm.offline_llm import OfflineLLM
from adapters.llm.offline_traits import TRAIT_CUES, detect_traits, merge_traits
from adapters.llm.traits import TRAIT_DIMENSIONS, TRAIT_GROUPS, canonical_dimension
from adapters.ports import PromptMemory
from adapters.settings import Settings
from schemas.records import Page, Trait
from tests.support.builders import page

DIALOGUE = """User: I am planning a business trip to Berlin next week. My flight leaves Monday.
Assistant: Great, Berlin has many museums. I recommend the Pergamon museum.
Time: 2023-10-01T10:00:00
User: What should I pack for Berlin museums?
Assistant: Comfortable shoes. Berlin museums involve a lot of walking.
Time: 2023-10-01T10:05:00
User: Unrelated, but I caught a cold and feel sick today.
Assistant: I'm sorry to hear that. Rest, drink tea and sleep well.
Time: 2023-10-02T09:00:00
User: Should I take medicine for the cold or just sleep?
Assistant: For a mild cold, rest and fluids usually suffice.
Time: 2023-10-02T09:10:00"""


def exchange(
    query: str, response: str, vector: list[float] | None = None, summary: str = ""
) -> Page:
    """A page of 1 October 2023 in chain ``c1``, its id its query's."""
    return page(
        1,
        query,
        response,
        page_id=f"p-{abs(hash(query))}",
        turn_id="t1",
        timestamp=datetime(2023, 10, 1, tzinfo=UTC),
        chain_id="c1",
        summary=summary,
        vector=vector,
    )


@pytest.fixture
def llm() -> OfflineLLM:
    return OfflineLLM()


def test_construction_logs_that_offline_backend_is_used(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        OfflineLLM()
    assert "offline LLM backend" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        OfflineLLM(announce=False)
    assert caplog.text == ""


def test_build_llm_chooses_offline_by_default() -> None:
    assert build_llm(Settings()).backend == "offline"


async def test_continuity_lexical(llm: OfflineLLM) -> None:
    previous = exchange("I want to plan a trip to Berlin", "Berlin is great in spring.")
    same = exchange("Which Berlin museums should I visit on my trip?", "The Pergamon museum.")
    other = exchange("How do I bake sourdough bread?", "Start with an active starter.")
    assert (await llm.continuity(previous, same)).continuous is True
    verdict = await llm.continuity(previous, other)
    assert verdict.continuous is False
    assert "sourdough" in verdict.summary


async def test_continuity_first_page_and_contentless_follow_up(llm: OfflineLLM) -> None:
    first = await llm.continuity(None, exchange("Hello, I like jazz.", "Jazz is wonderful."))
    assert first.continuous is False
    assert first.summary
    previous = exchange("Tell me about jazz history", "Jazz began in New Orleans.")
    assert (await llm.continuity(previous, exchange("Why?", "Because of its ports."))).continuous


async def test_continuity_uses_vectors_when_both_pages_carry_them(llm: OfflineLLM) -> None:
    previous = exchange("alpha beta", "gamma", vector=[1.0, 0.0])
    near = exchange("delta epsilon", "zeta", vector=[0.9, 0.1])
    far = exchange("delta epsilon", "zeta", vector=[0.0, 1.0])
    assert (await llm.continuity(previous, near)).continuous is True
    assert (await llm.continuity(previous, far)).continuous is False


class TableEmbedder:
    name = "table"
    dim = 2

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.table.get(text, [0.0, 1.0]) for text in texts]

    async def close(self) -> None:
        return None


async def test_continuity_embeds_pages_without_vectors_when_given_an_embedder() -> None:
    previous = exchange("alpha beta", "gamma")
    current = exchange("delta epsilon", "zeta")
    embedder = TableEmbedder({previous.text: [1.0, 0.0], current.text: [1.0, 0.0]})
    assert (await OfflineLLM(embedder).continuity(previous, current)).continuous is True


async def test_continuity_summary_carries_the_chain(llm: OfflineLLM) -> None:
    previous = exchange("Plan my Berlin trip", "Sure.", summary="User plans a Berlin trip.")
    current = exchange("Book a Berlin hotel for the trip", "Hotel Adlon is central.")
    verdict = await llm.continuity(previous, current)
    assert verdict.continuous
    assert verdict.summary


async def test_topics_split_two_themes_with_keywords(llm: OfflineLLM) -> None:
    topics = await llm.topics(DIALOGUE)
    assert len(topics) == 2
    assert all(topic.keywords and topic.content and topic.theme for topic in topics)
    assert "Berlin" in topics[0].content
    assert "cold" in topics[1].content
    assert all(len(topic.keywords) <= 5 for topic in topics)
    assert not any(k.lower() in ("user", "assistant") for t in topics for k in t.keywords)


async def test_topics_one_theme_and_empty(llm: OfflineLLM) -> None:
    one = await llm.topics("User: I love jazz music.\nAssistant: Jazz music is great.")
    assert len(one) == 1
    assert await llm.topics("   ") == []


async def test_topics_are_deterministic(llm: OfflineLLM) -> None:
    assert await llm.topics(DIALOGUE) == await OfflineLLM(announce=False).topics(DIALOGUE)


async def test_segment_summary_is_extractive(llm: OfflineLLM) -> None:
    summary = await llm.segment_summary("User plans a Berlin trip.", DIALOGUE)
    assert summary
    assert len(summary) < len(DIALOGUE)
    assert await llm.segment_summary("kept", "") == "kept"


async def test_user_knowledge_first_person_with_dates(llm: OfflineLLM) -> None:
    facts = await llm.user_knowledge(DIALOGUE)
    assert "I am planning a business trip to Berlin next week (on 2023-10-01)." in facts
    assert any("caught a cold" in fact and "2023-10-02" in fact for fact in facts)
    assert not any(fact.endswith("?") for fact in facts)
    assert not any("Pergamon" in fact for fact in facts)  # the assistant said that


async def test_agent_traits_skip_politeness(llm: OfflineLLM) -> None:
    facts = await llm.agent_traits(DIALOGUE)
    assert facts == ["I recommend the Pergamon museum (on 2023-10-01)."]
    polite = "User: That's interesting.\nAssistant: I'm glad you find it interesting!"
    assert await llm.agent_traits(polite) == []


async def test_user_traits_heuristic_and_merge(llm: OfflineLLM) -> None:
    traits = await llm.user_traits({}, DIALOGUE)
    assert traits["Travel Interest"].level == "Medium"
    assert traits["Health Focus"].level == "High"  # sick, medicine, sleep
    known = {
        "Travel Interest": Trait(level="High", reason="earlier"),
        "Openness": Trait(level="Low"),
    }
    merged = await llm.user_traits(known, DIALOGUE)
    assert merged["Travel Interest"].reason == "earlier"  # never lowered by the heuristic
    assert merged["Openness"].level == "Low"
    assert "Art Interest" not in await llm.user_traits({}, "User: I read an article.")


async def test_respond_extractive_in_the_locomo_style(llm: OfflineLLM) -> None:
    memory = PromptMemory("When does my flight leave?", [DIALOGUE], "locomo")
    assert (await llm.respond("sys", "user", memory)).text == "My flight leaves Monday."
    assert (
        await llm.respond("s", "u", PromptMemory("quantum chromodynamics?", [DIALOGUE], "locomo"))
    ).text == (I_DONT_KNOW)


async def test_respond_in_the_chat_style_is_a_full_sentence_to_the_customer(
    llm: OfflineLLM,
) -> None:
    memory = PromptMemory("When does my flight leave?", [DIALOGUE])
    assert (await llm.respond("s", "u", memory)).text == (
        "You told me that your flight leaves Monday."
    )
    unknown = PromptMemory("quantum chromodynamics?", [DIALOGUE])
    assert (await llm.respond("s", "u", unknown)).text == NOTHING_REMEMBERED


def test_trait_tables_follow_the_appendix() -> None:
    assert [len(group) for group in TRAIT_GROUPS.values()] == [16, 8, 27]
    assert set(TRAIT_CUES) == set(TRAIT_DIMENSIONS), "every appendix dimension has cues"
    assert canonical_dimension("**safety**") == "Safety (Harmlessness)"
    assert canonical_dimension("Self Actualization Needs") == "Self-Actualization Needs"
    assert canonical_dimension("Curiosity") is None


@pytest.mark.parametrize(
    ("said", "facts"),
    [
        ("I live in Lisbon, so will a replacement take as long as the original shipment?",
         ["I live in Lisbon."]),
        ("My dog is called Miso, does she need a harness?", ["My dog is called Miso."]),
        ("My dog Miso, does she need a harness?", []),
        ("Can I, please, get a refund?", []),
        ("I'll attach a photo of the sole.", []),
        ("I just sent you the receipt.", []),
        ("I ordered the boots in size 39.", ["I ordered the boots in size 39."]),
        ("If I cancel, will I get a refund?", []),
        ("So I was wondering, could you help?", []),
        ("I sent items back yesterday.", ["I sent items back yesterday."]),
        ("I'll be back in Lisbon in May.", ["I'll be back in Lisbon in May."]),
    ],
)  # fmt: skip
async def test_user_knowledge_keeps_statements_not_chit_chat(said: str, facts: list[str]) -> None:
    """What a customer states of themselves, also at the head of a question; not what they
    are about to do in this chat."""
    assert await OfflineLLM(announce=False).user_knowledge(f"User: {said}") == facts


@pytest.mark.parametrize(
    ("said", "dimension", "level"),
    [
        ("I don't like travel at all.", "Travel Interest", "Low"),
        ("I don\u2019t like travel at all.", "Travel Interest", "Low"),
        ("I'm not a fan of football.", "Sports Interest", "Low"),
        ("I love hiking, running and the gym every week.", "Sports Interest", "High"),
        ("I'm an introvert, I prefer to stay home.", "Extraversion", "Low"),
        ("No, I love parties with friends.", "Extraversion", "Medium"),
        ("I'm not shy at all.", "Extraversion", "Medium"),
        ("I always plan my week and keep a checklist.", "Conscientiousness", "Medium"),
        ("I get anxious and stressed before flights.", "Neuroticism", "Medium"),
        ("I'm usually calm and relaxed.", "Neuroticism", "Low"),
        ("I like to decide things on my own, freedom matters.", "Independence Needs", "Medium"),
        ("Please be honest, don't sugarcoat it.", "Honesty", "Medium"),
        ("Keep it short and to the point.", "Conciseness", "Medium"),
        ("Give me the simple version, nothing in-depth.", "Complexity", "Low"),
        ("haha that is funny", "Sense of Humor", "Medium"),
        ("I want practical, hands-on advice, not theory.", "Practicality", "High"),
    ],
)  # fmt: skip
def test_offline_traits_read_every_group_and_say_low_when_the_user_does(
    said: str, dimension: str, level: str
) -> None:
    """Personality and needs, AI alignment and interests; "Low" from what the user says (a
    lowering cue, or a raising one negated), never from silence."""
    found = detect_traits(said)
    assert found[dimension].level == level, found


def test_silence_is_not_evidence_and_a_said_low_replaces_a_counted_level() -> None:
    assert detect_traits("The order number is 4521.") == {}
    known = detect_traits("I love travel, every trip and every flight.")
    assert known["Travel Interest"].level == "High"
    quiet = merge_traits(known, detect_traits("I went on a trip."))
    assert quiet["Travel Interest"].level == "High", "one mention does not lower it"
    said = merge_traits(known, detect_traits("I don't like travel anymore."))
    assert said["Travel Interest"].level == "Low"
