"""Facts as records: user knowledge and agent traits with ids, provenance, validity and history.

The persona stage owns them. Extraction, supersession and the API's edits all reach it in the
user's order (an edit is a ``FactEdit`` on ``memoryos.persona``), and ``FactBook`` is the one
document it keeps per user: every fact it still holds, current or superseded, each fact's
history, and the ids that must never be extracted again (deleted, or edited away).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, RootModel, StrictBool, StrictStr

from schemas.records import EventTime, ForgetUser, PersonaJob, Record
from schemas.turn import Identifier, UserRef, _unicode

FactKindName = Literal["user_knowledge", "agent_trait"]
MAX_FACT_CHARS = 1_000
_WORD = re.compile(r"[^\W_]")


def _worded(value: str) -> str:
    if _WORD.search(value) is None:
        raise ValueError("a fact must say something: at least one letter or digit")
    return value.strip()


FactText = Annotated[
    StrictStr,
    Field(min_length=1, max_length=MAX_FACT_CHARS),
    AfterValidator(_unicode),
    AfterValidator(_worded),
]
FactId = Annotated[StrictStr, Field(pattern=r"^[0-9a-f-]{36}$")]
API: Literal["api"] = "api"


class FactSource(Record):
    """The turns and pages a fact was extracted from (newest last, bounded)."""

    turn_ids: list[str] = Field(default_factory=list)
    page_ids: list[str] = Field(default_factory=list)


Source = FactSource | Literal["api"]


class Fact(Record):
    """One user-knowledge fact or agent trait, as the API shows it."""

    fact_id: str
    kind: FactKindName
    text: str
    created_at: datetime
    source: Source
    assistant_id: str | None = None
    pinned: bool = False
    superseded_by: str | None = None
    superseded_at: datetime | None = None

    @property
    def current(self) -> bool:
        return self.superseded_by is None


Change = Literal["extracted", "added", "edited", "pinned", "unpinned", "superseded", "deleted"]


class FactChange(Record):
    """One entry of a fact's history."""

    change: Change
    at: datetime
    source: Source
    text: str | None = None  # the fact's text after the change, where the change sets it
    superseded_by: str | None = None


class FactBook(Record):
    """The persona stage's document of a user's facts.

    ``facts``: current facts of each kind oldest first (the paper's FIFO order), then the
    superseded ones kept for audit. ``removed``: ids never extracted again. ``edits``: the
    API edits already applied, so a re-sent edit changes nothing.
    """

    user_id: str
    facts: list[Fact] = Field(default_factory=list)
    history: dict[str, list[FactChange]] = Field(default_factory=dict)
    removed: list[str] = Field(default_factory=list)
    edits: list[str] = Field(default_factory=list)
    # per fact, ``at`` of the newest API edit applied to it: an older copy sent again is stale
    edited_at: dict[str, float] = Field(default_factory=dict)


class FactEdit(Record):
    """API -> persona stage (memoryos.persona, sealed with the user's key): add, edit or
    delete one fact. ``edit_id`` makes a re-sent edit harmless."""

    kind: Literal["fact_edit"] = "fact_edit"
    user_id: UserRef
    edit_id: Identifier
    op: Literal["add", "edit", "delete"]
    fact_id: FactId
    fact_kind: FactKindName | None = None  # "add" only
    text: FactText | None = None
    pinned: StrictBool | None = None
    assistant_id: Identifier | None = None
    at: EventTime


class PersonaInput(
    RootModel[Annotated[PersonaJob | FactEdit | ForgetUser, Field(discriminator="kind")]]
):
    """What memoryos.persona carries: the MTM stage's jobs, the API's fact edits, and the
    forget marker, in the user's order."""
