"""The public turn event: what producers write to ``memoryos.turns``.

Producers in other languages use ``schemas/turn.schema.json``, generated from this model
(``python -m schemas.export``); a test fails when the file is stale.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import orjson
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictStr, field_validator
from pydantic_core import PydanticCustomError

from schemas.limits import MAX_META_BYTES as MAX_META_BYTES
from schemas.limits import MAX_META_DEPTH as MAX_META_DEPTH
from schemas.limits import json_problem, utc_in_range

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$"
# A user's reference in the pipeline: its id, after ``<tenant>/`` outside the default tenant
# (schemas/tenants.py); never after "default/": that tenant's reference is the bare id.
USER_REF_PATTERN = r"^(?:[a-z0-9][a-z0-9_-]{0,62}/)?[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$"
DEFAULT_PREFIX = "default/"
MAX_USER_REF_CHARS = 192
MAX_TEXT_CHARS = 16_000
MAX_CHANNEL_CHARS = 64


def _unicode(value: str) -> str:
    """Lone surrogates (legal in JSON escapes) cannot be encoded downstream: refuse them here."""
    try:
        value.encode()
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode text (no lone surrogates)") from None
    return value


def check_meta(value: dict[str, Any]) -> dict[str, Any]:
    """Bounded depth and size, finite numbers, encodable text: see ``schemas.limits``."""
    if problem := json_problem(value, "meta", MAX_META_DEPTH):
        raise PydanticCustomError("meta_invalid", problem)
    try:
        size = len(orjson.dumps(value))
    except orjson.JSONEncodeError as exc:  # unreachable after json_problem; kept as a net
        raise PydanticCustomError("meta_invalid", f"meta is not encodable as JSON: {exc}") from None
    if size > MAX_META_BYTES:
        raise PydanticCustomError(
            "meta_invalid", f"meta is {size} bytes as JSON; at most {MAX_META_BYTES} allowed"
        )
    return value


Identifier = Annotated[StrictStr, Field(pattern=ID_PATTERN, max_length=128)]


def _one_reference(value: str) -> str:
    """``default/bob`` would be a second name of the default tenant's ``bob``."""
    if value.startswith(DEFAULT_PREFIX):
        raise ValueError("the default tenant's users are named without a tenant prefix")
    return value


UserRef = Annotated[
    StrictStr,
    Field(pattern=USER_REF_PATTERN, max_length=MAX_USER_REF_CHARS),
    AfterValidator(_one_reference),
]
Text = Annotated[StrictStr, Field(max_length=MAX_TEXT_CHARS), AfterValidator(_unicode)]
Channel = Annotated[StrictStr, Field(max_length=MAX_CHANNEL_CHARS), AfterValidator(_unicode)]
Meta = Annotated[dict[str, Any], AfterValidator(check_meta)]


class TurnEvent(BaseModel):
    """One dialogue turn: the user's query and the assistant's response."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="MemoryOS turn event")

    user_id: UserRef = Field(
        description="whose memory this turn belongs to; outside the default tenant "
        "<tenant>/<user id>"
    )
    turn_id: Identifier = Field(description="unique per user; a replay with the same id is a no-op")
    query: Text = Field(description="the user's utterance")
    response: Text = Field(description="the assistant's reply")
    timestamp: datetime = Field(description="ISO 8601; a time without zone is taken as UTC")
    assistant_id: Identifier | None = Field(None, description="which assistant answered")
    channel: Channel | None = Field(None, description="where the turn came from (web, sms, ...)")
    conversation_id: Identifier | None = Field(
        None, description="the conversation (thread, ticket, session) the turn belongs to"
    )
    meta: Meta = Field(
        default_factory=dict,
        description=f"any JSON object, kept with the page (e.g. source ids): at most "
        f"{MAX_META_DEPTH} levels deep and {MAX_META_BYTES} bytes, no NaN or Infinity",
    )

    @field_validator("timestamp")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        return utc_in_range(value)

    @field_validator("query", "response")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip()
