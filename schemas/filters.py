"""What a retrieve or a respond may be scoped to: channel, assistant, conversation, time, meta.

Each filter is a condition on an indexed payload field of the pages, applied by the store in
the same search that ranks them (never a pass over a user's pages afterwards), so a filtered
retrieve still returns up to k pages that match.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictStr,
    field_validator,
    model_validator,
)

from schemas.limits import utc_in_range
from schemas.profile import DEFAULT_ASSISTANT
from schemas.turn import Channel, Identifier

FilterChannel = Annotated[Channel, Field(min_length=1)]

MAX_CHANNELS = 20
MAX_META_FILTERS = 8
MetaValue = Annotated[StrictStr, Field(max_length=256)]
# a time in a request: without a zone, UTC; within the years a page may have
UtcTime = Annotated[datetime, AfterValidator(utc_in_range)]


class Filters(BaseModel):
    """Every filter given must hold (AND); a list of channels means any of them."""

    model_config = ConfigDict(extra="forbid")

    channel: (
        FilterChannel
        | Annotated[list[FilterChannel], Field(min_length=1, max_length=MAX_CHANNELS)]
        | None
    ) = Field(None, description="the pages of this channel, or of any of these")
    assistant_id: Identifier | None = Field(
        None,
        description="the pages this assistant answered (not 'default': the default "
        "assistant's pages carry no assistant id)",
    )
    conversation_id: Identifier | None = Field(None, description="the pages of one conversation")
    after: UtcTime | None = Field(None, description="pages at or after this time (ISO 8601)")
    before: UtcTime | None = Field(None, description="pages before this time (ISO 8601)")
    meta: Annotated[dict[str, MetaValue], Field(max_length=MAX_META_FILTERS)] | None = Field(
        None,
        description="equality on top-level keys of the turns' meta (string values); only the "
        "keys named in MEMORYOS_FILTER_META_KEYS are indexed and may be used",
    )

    @field_validator("assistant_id")
    @classmethod
    def _named(cls, value: str | None) -> str | None:
        if value == DEFAULT_ASSISTANT:
            raise ValueError(
                "the default assistant's pages carry no assistant_id: scope them by channel or "
                "conversation instead"
            )
        return value

    @model_validator(mode="after")
    def _ordered(self) -> Filters:
        if self.after is not None and self.before is not None and self.after >= self.before:
            raise ValueError("after must be earlier than before")
        return self

    def is_empty(self) -> bool:
        return (
            not any(
                (self.channel, self.assistant_id, self.conversation_id, self.after, self.before)
            )
            and not self.meta
        )
