"""A fake ResponseService behind the real HTTP app: the HTTP layer tested alone."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

from fastapi import FastAPI

from adapters.metrics import Metrics
from adapters.settings import Settings
from memory.pairing import message_digest
from schemas.records import Page, Persona, Trait
from schemas.turn import TurnEvent
from service.http import create_http_app
from service.response import Responded, ResponseService, Retrieved, ScoredFact
from tests.support.builders import page

KEYS = ("key-one", "key-two")
AUTH = {"Authorization": f"Bearer {KEYS[0]}"}
LIMIT = 40_000  # above every single-field limit, so 413 and 422 stay apart
TURN = {"query": "I like tea.", "response": "Noted."}
TEA_FACT = "5f0e7a52-2b61-5c8f-9a3e-4d2c1b0a9f81"
GREEN_TEA_TRAIT = "0c6d9e1f-8a7b-5e4d-a3c2-b1f0e9d8c7b6"
FORGOTTEN = {"short_term": 2, "mid_term_pages": 5, "segments": 1, "user_knowledge": 3,
             "agent_traits": 0}  # fmt: skip


def tea_page(turn_id: str, meta: dict[str, Any] | None = None) -> Page:
    """A page of alice's, what every fake retrieve returns."""
    return page(
        query="I like tea.",
        response="Noted.",
        page_id=f"p-{turn_id}",
        user_id="alice",
        turn_id=turn_id,
        timestamp=datetime(2024, 3, 1, 9, 0, tzinfo=UTC),
        meta=meta or {},
        chain_id="c1",
        summary="tea",
    )


class FakeMemory:
    """What the routes call on ResponseService, recording what they were given."""

    def __init__(self) -> None:
        self.responded: list[tuple[str, str, str | None]] = []
        self.turns: list[TurnEvent] = []
        self.answer = "You like tea."
        self.failure: Exception | None = None
        self.profiles: dict[str, dict[str, Any]] = {}
        self.messages: list[Any] = []
        self.scopes: list[dict[str, Any]] = []  # the filters and times retrieves were given

    async def add_turns(self, turns: list[TurnEvent]) -> list[str]:
        if self.failure:
            raise self.failure
        self.turns.extend(turns)
        return [turn.turn_id for turn in turns]

    async def retrieve(
        self,
        user_id: str,
        query: str,
        top_k: int | None = None,
        assistant_id: str | None = None,
        **scope: Any,
    ) -> Retrieved:
        self.scopes.append(scope)
        return Retrieved(
            short_term=[tea_page("t1", {"source": "crm"})],
            mid_term=[(tea_page("t0"), "seg-1", 0.75)],
            persona=Persona(
                user_id=user_id,
                profile={"name": "Alice"},
                traits={"openness": Trait(level="High", reason="tries teas")},
            ),
            user_knowledge=[ScoredFact("likes tea", 0.9, TEA_FACT)],
            agent_traits=[ScoredFact("recommends green tea", 0.4, GREEN_TEA_TRAIT)],
        )

    async def respond(
        self,
        user_id: str,
        query: str,
        assistant_id: str | None = None,
        record: bool = True,
        **scope: Any,
    ) -> Responded:
        self.responded.append((user_id, query, assistant_id))
        memory = await self.retrieve(user_id, query)
        usage = {"prompt_tokens": 120, "completion_tokens": 7}
        return Responded(self.answer, memory, usage, record)

    async def get_memory(self, user_id: str) -> dict[str, Any]:
        return {
            "user_id": user_id,
            "short_term": [tea_page("t1").public()],
            "mid_term": [],
            "persona": {"profile": {}, "traits": {}, "user_knowledge": [], "agent_traits": []},
        }

    async def forget(self, user_id: str) -> dict[str, int]:
        return dict(FORGOTTEN)

    async def add_messages(self, messages: list[Any]) -> list[str | None]:
        """As the service: a (user, message id) seen before is a duplicate, not kept."""
        outcomes: list[str | None] = []
        for message in messages:
            earlier = {(m.user_id, m.message_id): message_digest(m) for m in self.messages}
            outcomes.append(earlier.get((message.user_id, message.message_id)))
            if outcomes[-1] is None:
                self.messages.append(message)
        return outcomes

    async def set_profile(self, user_id: str, profile: dict[str, Any]) -> dict[str, Any]:
        self.profiles[user_id] = profile
        return profile

    async def set_assistant_profile(
        self, assistant_id: str, profile: dict[str, Any]
    ) -> dict[str, Any]:
        self.profiles[f"assistant:{assistant_id}"] = profile
        return profile

    async def assistant_profile(self, assistant_id: str) -> dict[str, Any]:
        return self.profiles.get(f"assistant:{assistant_id}", {})


async def status() -> dict[str, Any]:
    return {"status": "ok", "ready": True}


def build(fake: FakeMemory, api: bool = True, **settings: Any) -> FastAPI:
    values: dict[str, Any] = {"api_keys": ",".join(KEYS), "max_body_bytes": LIMIT} | settings
    return create_http_app(
        cast(ResponseService, fake), Settings(**values), Metrics(), status, status, api=api
    )
