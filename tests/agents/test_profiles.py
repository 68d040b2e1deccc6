"""Profiles and per-assistant personas, through the stages and the service."""

from __future__ import annotations

from schemas.codec import dumps
from schemas.topics import TURNS, user_key
from schemas.turn import TurnEvent
from service.response import ResponseService
from tests.support.builders import turn
from tests.support.fakes import FakeLLM, Pipeline, make_deps


class TraitLLM(FakeLLM):
    """Every user line is a fact; agent traits are the assistant's replies, so each
    assistant's traits can be told apart."""

    async def user_knowledge(self, dialogue: str) -> list[str]:
        await self._enter("user_knowledge")
        return [line[6:] for line in dialogue.splitlines() if line.startswith("User: ")]

    async def agent_traits(self, dialogue: str) -> list[str]:
        await self._enter("agent_traits")
        return [line[11:] for line in dialogue.splitlines() if line.startswith("Assistant: ")]


def bot_turn(index: int, assistant: str | None, query: str) -> TurnEvent:
    """Ann's turn ``t<index>`` with ``assistant``, whose reply names it."""
    return turn(
        "ann",
        index,
        query,
        turn_id=f"t{index}",
        response=f"I am the {assistant or 'default'} bot, reply {index}.",
        assistant_id=assistant,
    )


async def run_turns(pipeline: Pipeline, turns: list[TurnEvent]) -> None:
    for item in turns:
        await pipeline.send(TURNS, user_key(item.user_id), dumps(item))
    await pipeline.drain()


async def test_agent_traits_are_per_assistant_and_user_memory_is_shared() -> None:
    deps = await make_deps()
    deps.llm = TraitLLM()
    pipeline = Pipeline(deps)
    queries = ["My name is Ann Berg.", "I live in Bergen now.", "Invoice question."]
    turns = [
        bot_turn(i, "billing" if i % 2 else "travel", queries[i] if i < 3 else f"hiking trip {i}")
        for i in range(8)
    ]
    await run_turns(pipeline, turns)
    persona = await deps.repo.load_persona("ann")
    assert persona.profile == {"name": "Ann Berg", "location": "Bergen"}
    assert set(persona.assistant_traits) == {"billing", "travel"}
    assert all("billing bot" in fact for fact in persona.assistant_traits["billing"])
    assert all("travel bot" in fact for fact in persona.assistant_traits["travel"])
    assert persona.agent_traits == []  # no turn of the default assistant

    service = ResponseService(deps, pipeline)
    billing = await service.retrieve("ann", "which bot replied?", assistant_id="billing")
    travel = await service.retrieve("ann", "which bot replied?", assistant_id="travel")
    assert billing.agent_traits
    assert all("billing bot" in text for text, _, _ in billing.agent_traits)
    assert all("travel bot" in text for text, _, _ in travel.agent_traits)
    assert billing.user_knowledge == travel.user_knowledge  # user memory is shared
    assert (await service.retrieve("ann", "which bot replied?")).agent_traits == []


async def test_the_api_profile_wins_over_extracted_attributes_and_reaches_the_prompt() -> None:
    deps = await make_deps()
    pipeline = Pipeline(deps)
    await run_turns(pipeline, [bot_turn(i, None, "My name is Annie.") for i in range(8)])
    service = ResponseService(deps, pipeline)
    assert (await service.get_memory("ann"))["persona"]["profile"] == {"name": "Annie"}

    await service.set_profile("ann", {"name": "Ann", "plan": "gold"})
    await service.set_assistant_profile("support", {"name": "Sam", "role": "support agent"})
    await run_turns(pipeline, [bot_turn(i, None, "My name is Annie.") for i in range(8, 16)])
    memory = await service.get_memory("ann")
    assert memory["persona"]["profile"] == {"name": "Ann", "plan": "gold"}
    retrieved = await service.retrieve("ann", "what is my plan?", assistant_id="support")
    assert retrieved.to_json()["user_profile"] == {"name": "Ann", "plan": "gold"}
    assert retrieved.to_json()["agent_profile"] == {"name": "Sam", "role": "support agent"}

    prompts: list[str] = []
    llm = deps.llm
    assert isinstance(llm, FakeLLM)
    original = llm.respond

    async def capture(system: str, user: str, memory: object) -> object:
        prompts.append(system + "\n" + user)
        return await original(system, user, memory)  # type: ignore[arg-type]

    llm.respond = capture  # type: ignore[method-assign,assignment]
    await service.respond("ann", "what is my plan?", assistant_id="support")
    assert "plan: gold" in prompts[0]
    assert "role: support agent" in prompts[0]
    assert "User profile:\nNone" not in prompts[0]


async def test_a_delete_removes_the_users_profile_but_not_the_assistants() -> None:
    deps = await make_deps()
    pipeline = Pipeline(deps)
    service = ResponseService(deps, pipeline)
    await service.set_profile("ann", {"name": "Ann"})
    await service.set_assistant_profile("support", {"name": "Sam"})
    await service.forget("ann")
    await pipeline.drain()
    assert (await service.get_memory("ann"))["persona"]["profile"] == {}
    assert await service.assistant_profile("support") == {"name": "Sam"}
