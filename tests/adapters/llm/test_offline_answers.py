"""The offline backend answers in sentences a person can read (the demo's questions)."""

from __future__ import annotations

from adapters.llm.offline_answers import NOTHING_REMEMBERED, chat_answer


def page_text(query: str, response: str) -> str:
    return f"user: {query}\nassistant: {response}"


BOOTS = page_text(
    "Hi, I ordered the Alpine Trek hiking boots in size 39 last week.",
    "I'm sorry to hear that! Could you share your order number?",
)
DOG = page_text(
    "Okay. Different question: I have a dog named Miso. Do you sell running harnesses?",
    "We do! How big is Miso?",
)
LATEX = page_text(
    "What about socks? I think they contained latex.",
    "Since you're allergic to latex, I recommend the Merino Run socks.",
)
LATEX_SAID = page_text(
    "As I said, I'm allergic to latex. Is there latex in the leash?", "Good catch."
)
CITY = page_text("I'm in Toronto, same address as on the order.", "Confirmed: shipping to Toronto.")
GREETING = page_text("Hi, it's Alice again.", "Hi Alice!")


def test_a_greeting_or_a_label_is_never_told_back_as_a_fact() -> None:
    assert chat_answer("What size are my hiking boots?", [GREETING, BOOTS]) == (
        "You told me that you ordered the Alpine Trek hiking boots in size 39 last week."
    )
    assert chat_answer("What is my dog's name?", [DOG]) == (
        "You told me that you have a dog named Miso."
    )
    assert chat_answer("Who is Alice again?", [GREETING]) == NOTHING_REMEMBERED


def test_what_the_customer_said_wins_over_what_the_assistant_said() -> None:
    assert chat_answer("What am I allergic to?", [LATEX, LATEX_SAID]) == (
        "You told me that you're allergic to latex."
    )
    assert chat_answer("What am I allergic to?", [LATEX]).startswith("As I mentioned before:")


def test_where_the_customer_lives_is_found_without_a_shared_word() -> None:
    assert chat_answer("Which city do I live in?", [BOOTS, CITY]) == (
        "You told me that you're in Toronto, same address as on the order."
    )


def test_what_do_you_know_about_me_answers_from_the_profile_and_facts() -> None:
    answer = chat_answer(
        "What do you know about me?",
        [BOOTS],
        {"name": "Alice", "plan": "gold"},
        ["I have a dog named Miso.", "I'm allergic to latex."],
    )
    assert answer == (
        "Here is what I know about you: name: Alice, plan: gold. "
        "You told me: you have a dog named Miso; you're allergic to latex."
    )
    assert chat_answer("What do you know about me?", [BOOTS]) == NOTHING_REMEMBERED


def test_a_fact_written_as_label_and_value_and_a_short_one_are_found() -> None:
    address = page_text("My new address: 5 Elm Street.", "Updated.")
    assert chat_answer("What is my new address?", [address]) == (
        "You told me that your new address: 5 Elm Street."
    )
    assert chat_answer("What is my name? Sam?", [page_text("hey I'm Sam", "Hi Sam!")]) == (
        "You told me that you're Sam."
    )
