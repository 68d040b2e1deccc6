from __future__ import annotations

import pytest

from adapters.llm import parsing
from adapters.llm.parsing import (
    find_json,
    parse_answer,
    parse_continuity,
    parse_facts,
    parse_persona,
    parse_summary,
    parse_topics,
    parse_topics_batch,
    parse_topics_summary,
    parse_traits,
    strip_think,
)
from schemas.errors import LLMUnparseable
from schemas.records import Trait

TOPICS = '[{"theme": "Trip", "keywords": ["Berlin", "flight"], "content": "User plans a trip."}]'


def test_strip_think_removes_blocks_and_leading_reasoning() -> None:
    assert strip_think("<think>a\nb</think>\nanswer") == "answer"
    assert strip_think("<THINK>x</THINK>one<think>y</think> two") == "one two"
    assert strip_think("reasoning without opening tag</think>\nanswer") == "answer"


@pytest.mark.parametrize(
    "reply",
    [
        TOPICS,
        f"```json\n{TOPICS}\n```",
        f"Sure! Here you go:\n```\n{TOPICS}\n```\nAnything else?",
        f"The topics are {TOPICS} as requested.",
        f"<think>two topics? no, one [maybe]</think>{TOPICS}",
    ],
)
def test_find_json_in_fences_prose_and_after_think(reply: str) -> None:
    assert find_json(reply)[0]["theme"] == "Trip"


def test_find_json_skips_unbalanced_prose_brackets() -> None:
    assert find_json('see [note 1 {"a": 1}') == {"a": 1}
    assert find_json('{"text": "a } inside a string"}') == {"text": "a } inside a string"}


def test_find_json_raises_when_absent() -> None:
    with pytest.raises(LLMUnparseable):
        find_json("no json here [at all")


def test_topics_cap_two_and_accept_comma_keywords_and_wrappers() -> None:
    many = (
        '{"topics": [{"theme": "A", "keywords": "x, y", "content": "a"},'
        '{"theme": "B", "keywords": ["z"], "content": "b"},'
        '{"theme": "C", "keywords": ["w"], "content": "c"}]}'
    )
    topics = parse_topics(many)
    assert [t.theme for t in topics] == ["A", "B"]
    assert topics[0].keywords == ["x", "y"]
    single = parse_topics('{"theme": "Solo", "keywords": ["k"], "content": "c"}')
    assert single[0].theme == "Solo"


def test_topics_without_content_are_unparseable() -> None:
    with pytest.raises(LLMUnparseable):
        parse_topics('[{"theme": "A"}]')


@pytest.mark.parametrize(
    ("reply", "continuous", "summary"),
    [
        ("true\nThe user plans a trip.", True, "The user plans a trip."),
        ("FALSE\nNew topic: cats.", False, "New topic: cats."),
        ("**true**\n\nUpdated meta-summary: trip to Berlin.", True, "trip to Berlin."),
        ("false - User asks about cats.", False, "User asks about cats."),
        ("<think>hmm</think>\ntrue\nline one\nline two", True, "line one line two"),
        ("```\ntrue\nfenced summary\n```", True, "fenced summary"),
        ("Continuity: yes\nstill the trip", True, "still the trip"),
    ],
)
def test_continuity_two_line_replies(reply: str, continuous: bool, summary: str) -> None:
    verdict = parse_continuity(reply)
    assert verdict.continuous is continuous
    assert verdict.summary == summary


@pytest.mark.parametrize("reply", ["", "true", "maybe\nsummary", "a\nb\nc\ntrue\nlate"])
def test_continuity_unparseable(reply: str) -> None:
    with pytest.raises(LLMUnparseable):
        parse_continuity(reply)


def test_traits_lines_with_markdown_reasons_and_unknown_dimensions() -> None:
    reply = (
        "Here is the analysis:\n"
        "1. **Travel Interest**: High [Reason: plans trips]\n"
        "- Safety: Low\n"
        "* Conciseness: Medium (High/Medium/Low) [Reason: asks for short answers]\n"
        "Curiosity: High [Reason: not an appendix dimension]\n"
        "extraversion: low [Reason: prefers staying in]"
    )
    traits = parse_traits(reply)
    assert set(traits) == {
        "Travel Interest",
        "Safety (Harmlessness)",
        "Conciseness",
        "Extraversion",
    }
    assert traits["Travel Interest"].level == "High"
    assert traits["Travel Interest"].reason == "plans trips"
    assert traits["Conciseness"].reason == "asks for short answers"
    assert traits["Extraversion"].level == "Low"


def test_traits_none_is_empty_and_garbage_raises() -> None:
    assert parse_traits("None") == {}
    assert parse_traits("No dimensions can be extracted from this dialogue.") == {}
    with pytest.raises(LLMUnparseable):
        parse_traits("~~ lorem ipsum ~~")


def test_facts_bullets_numbered_and_none() -> None:
    reply = (
        "[User Knowledge]\n- I live in Paris.\n* I have a dog.\n2. I like tea.\n- I live in Paris."
    )
    assert parse_facts(reply) == ["I live in Paris.", "I have a dog.", "I like tea."]
    assert parse_facts("[Assistant Knowledge]\n- None") == []
    assert parse_facts('"None"') == []
    assert parse_facts("None found.") == []
    assert parse_facts('- [Fact 1]\n- (Or "None" if none found)\n- None') == []


def test_facts_without_bullets_raise() -> None:
    with pytest.raises(LLMUnparseable):
        parse_facts("I live in Paris.")


def test_free_text_parsers() -> None:
    assert parse_summary("<think>x</think>Updated summary: the trip.") == "the trip."
    assert parse_summary("```\nfenced\n```") == "fenced"
    assert parse_answer("Answer: Berlin") == "Berlin"
    code = "Use this:\n```python\nprint(1)\n```"
    assert parse_answer(code) == code  # answers keep their code blocks
    with pytest.raises(LLMUnparseable):
        parse_answer("<think>only thinking</think>")


def test_max_topics_is_the_papers_two() -> None:
    assert parsing.MAX_TOPICS == 2


def test_topics_of_several_dialogues_by_number_or_in_order() -> None:
    one = '[{"theme": "Trip", "keywords": ["Berlin"], "content": "A trip."}]'
    two = '[{"theme": "Cold", "keywords": "cold, sick", "content": "A cold."}]'
    by_number = parse_topics_batch(f'{{"2": {two}, "1": {one}}}', 2)
    assert [[t.theme for t in topics] for topics in by_number] == [["Trip"], ["Cold"]]
    wrapped = parse_topics_batch(f'{{"dialogues": {{"1": {one}, "2": {two}}}}}', 2)
    assert wrapped == by_number
    assert parse_topics_batch(f"[{one}, {two}]", 2) == by_number


def test_topics_of_several_dialogues_refuse_a_missing_one() -> None:
    one = '[{"theme": "Trip", "keywords": ["Berlin"], "content": "A trip."}]'
    with pytest.raises(LLMUnparseable, match="dialogue '2'"):
        parse_topics_batch(f'{{"1": {one}, "3": {one}}}', 2)
    with pytest.raises(LLMUnparseable, match="not 2"):
        parse_topics_batch(f"[{one}]", 2)


def test_topics_with_a_summary_need_both() -> None:
    one = '[{"theme": "Trip", "keywords": ["Berlin"], "content": "A trip."}]'
    topics, summary = parse_topics_summary(f'{{"topics": {one}, "summary": "Trip to Berlin."}}')
    assert ([t.theme for t in topics], summary) == (["Trip"], "Trip to Berlin.")
    with pytest.raises(LLMUnparseable):
        parse_topics_summary(f'{{"topics": {one}}}')
    with pytest.raises(LLMUnparseable):
        parse_topics_summary('{"topics": [], "summary": "x"}')


def test_persona_reads_three_sections_and_keeps_known_traits() -> None:
    known = {"Openness": Trait(level="Medium", reason="earlier")}
    reply = (
        "**[User Traits]**\nTravel Interest: High [Reason: plans a trip]\n\n"
        "[User Knowledge]\n- I plan a trip to Berlin.\n"
        "## Assistant Knowledge\nNone"
    )
    found = parse_persona(reply, known)
    assert set(found.traits) == {"Openness", "Travel Interest"}
    assert found.traits["Travel Interest"].reason == "plans a trip"
    assert found.user_knowledge == ["I plan a trip to Berlin."]
    assert found.agent_traits == []


def test_persona_refuses_a_missing_or_unreadable_section() -> None:
    with pytest.raises(LLMUnparseable, match="assistant knowledge"):
        parse_persona("[User Traits]\nNone\n[User Knowledge]\n- I ski.", {})
    with pytest.raises(LLMUnparseable):  # a section with neither facts nor "None"
        parse_persona("[User Traits]\nNone\n[User Knowledge]\n\n[Assistant Knowledge]\nNone", {})


def test_persona_reads_which_known_facts_a_new_one_updates() -> None:
    reply = (
        "[User Traits]\nNone\n[User Knowledge]\n- I live in Paris (updates 2)\n"
        "- I have a cat named Rex (updates 1, 9).\n- I ski.\n[Assistant Knowledge]\nNone"
    )
    found = parse_persona(reply, {}, known_facts=3)
    assert found.user_knowledge == ["I live in Paris", "I have a cat named Rex", "I ski."]
    assert found.user_updates == [(2,), (1,), ()], "numbers beyond the known facts are ignored"
    assert parse_persona(reply, {}).user_updates == [(), (), ()], "no known facts: none named"
