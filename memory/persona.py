"""Long-term persona memory (LPM): the bounded fact queues and the evolving user traits.

User KB and agent traits are FIFO queues of 100 facts each (paper). We add one rule the
paper leaves implicit: a fact already known (same normalized text) is not stored twice; it
is refreshed to the newest position, so repeating a fact keeps it from ageing out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

from memory.text import normalize_fact
from schemas.profile import DEFAULT_ASSISTANT
from schemas.records import Persona, Trait

_EMPTY_ANSWERS = frozenset({"", "none"})  # what an LLM writes when it found no fact


class FactKind(StrEnum):
    """The two FIFO fact stores of the LPM (values name their store collections)."""

    USER = "user_knowledge"  # facts about the user
    AGENT = "agent_traits"  # facts about the assistant, as seen with this user


def append_facts(
    queue: Sequence[str], new: Sequence[str], capacity: int
) -> tuple[list[str], list[str]]:
    """Append ``new`` facts to ``queue`` (oldest first); return (new queue, dropped facts).

    Blank facts and "None" are ignored. A fact equal to one held (by ``normalize_fact``)
    replaces it at the newest position, keeping the newer wording. When the queue is longer
    than ``capacity`` the oldest facts are dropped, oldest first; a new fact that did not fit
    is reported as dropped too. No dropped fact shares its normalized text with a kept one,
    so deleting the dropped facts' points never deletes a kept fact's point.
    """
    if capacity < 1:
        raise ValueError(f"fact queue capacity must be >= 1, got {capacity}")
    by_key: dict[str, str] = {}
    for fact in queue:
        _push(by_key, fact)
    for fact in new:
        if normalize_fact(fact) not in _EMPTY_ANSWERS:
            _push(by_key, fact.strip())
    ordered = list(by_key.values())
    cut = max(0, len(ordered) - capacity)
    return ordered[cut:], ordered[:cut]


def _push(by_key: dict[str, str], fact: str) -> None:
    key = normalize_fact(fact)
    by_key.pop(key, None)  # re-inserting moves it to the newest position
    by_key[key] = fact


def merge_traits(known: Mapping[str, Trait], new: Mapping[str, Trait]) -> dict[str, Trait]:
    """Known traits updated with the new analysis: the new value wins per dimension."""
    return {**known, **new}


def assistant_of(assistant_id: str | None) -> str:
    """The assistant a turn or request belongs to; none given means the default one."""
    return assistant_id or DEFAULT_ASSISTANT


def agent_traits_of(persona: Persona, assistant_id: str | None) -> list[str]:
    """The agent traits of one assistant as seen with this user."""
    assistant = assistant_of(assistant_id)
    if assistant == DEFAULT_ASSISTANT:
        return list(persona.agent_traits)
    return list(persona.assistant_traits.get(assistant, []))


def with_agent_traits(persona: Persona, assistant_id: str | None, traits: list[str]) -> Persona:
    assistant = assistant_of(assistant_id)
    if assistant == DEFAULT_ASSISTANT:
        return persona.model_copy(update={"agent_traits": traits})
    return persona.model_copy(
        update={"assistant_traits": {**persona.assistant_traits, assistant: traits}}
    )


def persona_view(
    persona: Persona,
    stated_profile: Mapping[str, Any],
    agent_profile: Mapping[str, Any],
    assistant_id: str | None,
) -> Persona:
    """The persona as one assistant sees it: extracted profile attributes under the ones set
    through the API (those always win), that assistant's profile and traits."""
    return persona.model_copy(
        update={
            "profile": {**persona.profile, **stated_profile},
            "agent_profile": dict(agent_profile),
            "agent_traits": agent_traits_of(persona, assistant_id),
            "assistant_traits": {},
        }
    )
