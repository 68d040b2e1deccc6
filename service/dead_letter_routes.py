"""``POST /v1/users/{user_id}/dead-letters/replay``: send a user's dead letters back (scope
``admin``), as `memoryos dlq replay` does for the whole topic.

The letters are named as the user's history lists them (source topic, partition, offset); none
named: every dead letter of the user still on the dead-letter topic. Only records keyed by the
user are ever sent, so a tenant cannot replay another's; none from before the user's last
DELETE (409 while a DELETE is going through the stages). Every stage is idempotent, so a replay
twice is harmless.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Annotated, Any, Protocol

from fastapi import Body, FastAPI, Path
from pydantic import BaseModel, ConfigDict, Field

from memoryos_client.models import DeadLettersReplayed, error_responses
from schemas.turn import ID_PATTERN
from service.auth import Admin


class LetterSource(BaseModel):
    model_config = ConfigDict(extra="forbid")
    topic: str = Field(max_length=249, description="the source topic, as the history lists it")
    partition: int = Field(ge=0)
    offset: int = Field(ge=0)


class ReplayIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    letters: list[LetterSource] | None = Field(
        None, max_length=1000, description="which dead letters; none: all of the user's"
    )


class DeadLetterReplay(Protocol):
    async def replay_user(
        self, user_ref: str, wanted: Collection[tuple[str, int, int]] | None
    ) -> dict[str, int]: ...


def add_dead_letter_routes(app: FastAPI, dead_letters: DeadLetterReplay) -> None:
    @app.post(
        "/v1/users/{user_id}/dead-letters/replay",
        response_model=DeadLettersReplayed,
        responses=error_responses(400, 401, 403, 409, 413, 422, 429, 503),
    )
    async def replay_dead_letters(
        user_id: Annotated[str, Path(pattern=ID_PATTERN, max_length=128)],
        who: Admin,
        body: Annotated[ReplayIn | None, Body()] = None,
    ) -> dict[str, Any]:
        """Send the user's dead letters back to the topics they came from."""
        wanted = None
        if body is not None and body.letters is not None:
            wanted = {(item.topic, item.partition, item.offset) for item in body.letters}
        return await dead_letters.replay_user(who.user(user_id), wanted)
