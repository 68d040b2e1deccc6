"""The public turn event: what producers write to ``memoryos.turns``.

Producers in other languages use ``schemas/turn.schema.json``, generated from this model
(``python -m schemas.export``); a test fails when the file is stale.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, StrictStr, field_validator

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$"
MAX_TEXT_CHARS = 16_000
MAX_META_BYTES = 16_384
MAX_CHANNEL_CHARS = 64

Identifier = Annotated[StrictStr, Field(pattern=ID_PATTERN, max_length=128)]
Text = Annotated[StrictStr, Field(max_length=MAX_TEXT_CHARS)]


class TurnEvent(BaseModel):
    """One dialogue turn: the user's query and the assistant's response."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="MemoryOS turn event")

    user_id: Identifier = Field(description="whose memory this turn belongs to")
    turn_id: Identifier = Field(description="unique per user; a replay with the same id is a no-op")
    query: Text = Field(description="the user's utterance")
    response: Text = Field(description="the assistant's reply")
    timestamp: datetime = Field(description="ISO 8601; a time without zone is taken as UTC")
    assistant_id: Identifier | None = Field(None, description="which assistant answered")
    channel: Annotated[StrictStr, Field(max_length=MAX_CHANNEL_CHARS)] | None = Field(
        None, description="where the turn came from (web, sms, ...)"
    )
    meta: dict[str, Any] = Field(
        default_factory=dict, description="any JSON object, kept with the page (e.g. source ids)"
    )

    @field_validator("timestamp")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        return value if value.tzinfo else value.replace(tzinfo=UTC)

    @field_validator("meta")
    @classmethod
    def _meta_size(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            size = len(orjson.dumps(value))
        except orjson.JSONEncodeError as exc:  # e.g. integers beyond 64 bits
            raise ValueError(f"meta is not encodable as JSON: {exc}") from None
        if size > MAX_META_BYTES:
            raise ValueError(f"meta is {size} bytes as JSON; at most {MAX_META_BYTES} allowed")
        return value

    @field_validator("query", "response")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip()
