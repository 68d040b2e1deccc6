"""The response prompt of the paper's appendix."""

from __future__ import annotations

from datetime import UTC, datetime

from memory.prompt import build_prompt, prompt_texts
from schemas.records import Page, Persona, Trait
from tests.support.builders import page


def may_page(n: int, summary: str = "") -> Page:
    """Page ``n``, written on the ``n``th of May 2024 at 9:30 (the prompt shows the date)."""
    return page(n, summary=summary, timestamp=datetime(2024, 5, n, 9, 30, tzinfo=UTC))


PERSONA = Persona(
    user_id="u1",
    profile={"name": "Ann"},
    traits={"Openness": Trait(level="High", reason="loves travel"), "Humor": Trait(level="Low")},
    user_knowledge=["not retrieved: must not appear"],
    agent_profile={"role": "travel agent"},
)


PROMPT_ARGS: dict[str, object] = {
    "query": "Where did Ann go in May?",
    "short_term": [may_page(3), may_page(4)],
    "mid_term": [may_page(1, summary="Trip to Oslo")],
    "persona": PERSONA,
    "user_knowledge": ["I live in Bergen"],
    "agent_traits": ["I recommended Interstellar"],
    "user_name": "Ann",
    "assistant_name": "Mira",
}


def prompt(**overrides: object) -> tuple[str, str]:
    """The appendix's (locomo) wording unless ``style`` is overridden."""
    arguments = PROMPT_ARGS | {"style": "locomo"} | overrides
    return build_prompt(**arguments)  # type: ignore[arg-type]


def test_system_role_plays_the_assistant_with_its_traits() -> None:
    system, _ = prompt()
    assert system.startswith(
        "You are role-playing as Mira in a conversation with the user who is playing Ann."
    )
    assert "role: travel agent" in system
    assert "- I recommended Interstellar" in system
    assert "Any content referring to 'User' in the prompt refers to Ann's content" in system
    assert "'mental health', as this is more concise" in system


def test_user_message_sections_in_the_appendix_order() -> None:
    _, user = prompt()
    markers = [
        "<CONTEXT>",
        "Recent conversation between Ann and Mira:",
        "User: question 3",
        "User: question 4",
        "<MEMORY>",
        "Relevant past conversations:",
        "[Conversation summary] Trip to Oslo",
        "User: question 1",
        "<CHARACTER TRAITS>",
        "Characteristics of Ann:",
        "name: Ann",
        "Openness: High (loves travel)",
        "Humor: Low",
        "- I live in Bergen",
        "The question is: Where did Ann go in May?",
        "Please only provide the content of the answer, without including 'answer:'",
        "'17 July 2025'",
        "Generate answers primarily composed of concrete entities",
    ]
    positions = [user.index(marker) for marker in markers]
    assert positions == sorted(positions)
    assert "Time: 2024-05-03 09:30 UTC" in user
    assert "not retrieved" not in user


def test_empty_tiers_say_none() -> None:
    system, user = prompt(
        short_term=[],
        mid_term=[],
        persona=Persona(user_id="u1"),
        user_knowledge=[],
        agent_traits=[],
    )
    assert "Here are some of your character traits and knowledge:\nNone\n" in system
    assert "Recent conversation between Ann and Mira:\nNone\n<MEMORY>" in user
    assert "Relevant past conversations:\nNone\n<CHARACTER TRAITS>" in user


def test_page_in_both_tiers_is_shown_once() -> None:
    _, user = prompt(short_term=[may_page(1)], mid_term=[may_page(1, "s"), may_page(2)])
    assert user.count("User: question 1") == 1
    assert user.count("User: question 2") == 1


def test_prompt_texts_in_tier_order_without_repeats() -> None:
    texts = prompt_texts(
        [may_page(3)],
        [may_page(3), may_page(1, "Trip")],
        ["I live in Bergen", " ", "I live in Bergen"],
        ["I recommended Interstellar"],
    )
    assert texts == [
        "User: question 3\nAssistant: answer 3\nTime: 2024-05-03 09:30 UTC",
        "User: question 1\nAssistant: answer 1\nTime: 2024-05-01 09:30 UTC",
        "I live in Bergen",
        "I recommended Interstellar",
    ]


def test_the_default_chat_style_replies_to_the_customer_in_the_papers_structure() -> None:
    system, user = prompt(style="chat")
    assert system.startswith("You are role-playing as Mira")
    assert "full sentences" in system
    assert "concise" not in system + user
    assert "17 July 2025" not in user
    markers = [
        "Recent conversation between Ann and Mira:",
        "<MEMORY>",
        "[Conversation summary] Trip to Oslo",
        "<CHARACTER TRAITS>",
        "name: Ann",
        "- I live in Bergen",
        "Ann says: Where did Ann go in May?",
    ]
    positions = [user.index(marker) for marker in markers]
    assert positions == sorted(positions)
    arguments = {k: v for k, v in PROMPT_ARGS.items() if k != "style"}
    assert build_prompt(**arguments) == (system, user)  # type: ignore[arg-type]
