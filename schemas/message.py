"""The public message event: what a message bus writes to ``memoryos.messages``.

A multi-channel bus carries one event per message (the customer's, then the assistant's), not
dialogue turns. The pairing stage (``agents/pairing.py``) joins a customer's message(s) with
the assistant's reply into a turn. Producers in other languages use
``schemas/message.schema.json``, generated from this model (``python -m schemas.export``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from schemas.limits import utc_in_range
from schemas.turn import MAX_META_BYTES, MAX_META_DEPTH, Channel, Identifier, Meta, Text, UserRef


class MessageEvent(BaseModel):
    """One message of a conversation, from the customer (``user``) or the ``assistant``."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="MemoryOS message event")

    kind: Literal["message"] = Field("message", description="always 'message' (may be left out)")
    user_id: UserRef = Field(
        description="the customer whose memory this message belongs to; outside the default "
        "tenant <tenant>/<user id>"
    )
    conversation_id: Identifier = Field(
        description="the conversation (thread, ticket, chat) the message belongs to"
    )
    message_id: Identifier = Field(
        description="unique per user; a replay with the same id is a no-op"
    )
    role: Literal["user", "assistant"] = Field(description="who wrote it")
    text: Annotated[Text, Field(min_length=1)] = Field(description="the message text")
    timestamp: datetime = Field(description="ISO 8601; a time without zone is taken as UTC")
    channel: Channel | None = Field(None, description="where it was sent (whatsapp, email, ...)")
    assistant_id: Identifier | None = Field(None, description="which assistant wrote or got it")
    meta: Meta = Field(
        default_factory=dict,
        description=f"any JSON object, kept with the turn when it fits: at most "
        f"{MAX_META_DEPTH} levels deep and {MAX_META_BYTES} bytes, no NaN or Infinity",
    )

    @field_validator("timestamp")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        return utc_in_range(value)

    @field_validator("text")
    @classmethod
    def _strip(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value.strip()
