"""`memoryos inspect` shows profiles and each assistant's traits."""

from __future__ import annotations

from streams.commands.inspect import render


def test_inspect_shows_the_profile_and_each_assistants_persona() -> None:
    memory = {
        "user_id": "ann",
        "short_term": [],
        "mid_term": [],
        "persona": {
            "profile": {"name": "Ann", "plan": "gold"},
            "traits": {},
            "user_knowledge": ["I live in Bergen."],
            "agent_traits": [],
            "agent_profile": {},
            "assistants": {
                "billing": {"agent_profile": {"role": "billing"}, "agent_traits": ["I sent it."]}
            },
        },
    }
    text = render(memory)
    assert "  profile: name=Ann, plan=gold" in text
    assert "  assistant billing: role=billing\n    I sent it." in text
    assert "assistant default" not in text
