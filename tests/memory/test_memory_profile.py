"""Profile attributes read from the extracted first-person facts."""

from __future__ import annotations

from memory.persona import agent_traits_of, persona_view, with_agent_traits
from memory.profile import profile_from_facts
from schemas.records import Persona


def test_stated_attributes_are_read_from_first_person_facts() -> None:
    facts = [
        "My name is Ann Berg (on 2024-05-01).",
        "I live in New York City with my dog.",
        "I'm from Bergen.",
        "I work as a night nurse at the clinic.",
        "I am 34 years old.",
        "My email is ann@example.com.",
        "I like hiking.",
    ]
    assert profile_from_facts(facts) == {
        "name": "Ann Berg",
        "location": "New York City",
        "hometown": "Bergen",
        "occupation": "night nurse",
        "age": "34",
        "email": "ann@example.com",
    }


def test_the_latest_statement_wins_and_vague_ones_are_ignored() -> None:
    assert profile_from_facts(["I live in Oslo.", "I live in the city.", "I live in Rome."]) == {
        "location": "Rome"
    }
    assert profile_from_facts(["I live in a flat.", "call me maybe"]) == {}


def test_the_view_puts_api_profile_over_extracted_and_picks_the_assistant() -> None:
    persona = Persona(user_id="u", profile={"name": "Annie", "location": "Oslo"})
    persona = with_agent_traits(persona, None, ["I suggested tea."])
    persona = with_agent_traits(persona, "billing", ["I sent invoice 7."])
    assert agent_traits_of(persona, "default") == ["I suggested tea."]
    view = persona_view(persona, {"name": "Ann"}, {"role": "billing bot"}, "billing")
    assert view.profile == {"name": "Ann", "location": "Oslo"}
    assert view.agent_profile == {"role": "billing bot"}
    assert view.agent_traits == ["I sent invoice 7."]
    assert persona_view(persona, {}, {}, None).agent_traits == ["I suggested tea."]
