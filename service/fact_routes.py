"""``/v1/users/{user_id}/facts``: a user's facts listed, added, edited, deleted, and each one's
history.

Reads come from the persona stage's ``FactBook``. Writes are ``FactEdit`` events in the user's
ordered stream (202: durable, applied by the persona stage within moments), never a write to
the store from here: one writer per piece of state. A fact id is looked up in the user's own
book only, so another user's id is a 404 like an unknown one.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import Body, FastAPI, Path, Query
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from memory.fact_book import KINDS, MAX_PINNED, current
from memory.facts import add_id, book_from_persona
from memory.persona import FactKind
from memoryos_client.models import FactAccepted, FactHistory, FactList, error_responses
from schemas.errors import Conflict, InvalidEvent, NotFound
from schemas.facts import Fact, FactBook, FactEdit, FactKindName, FactText
from schemas.profile import DEFAULT_ASSISTANT
from service.auth import Reader, Writer
from service.response import FORGETTING, ResponseService

FactIdPath = Annotated[str, Path(pattern=r"^[0-9a-f-]{36}$", description="the fact's id")]
UserIdPath = Annotated[str, Path(max_length=128)]
READ = error_responses(401, 403, 404, 422, 429)
WRITE = error_responses(400, 401, 403, 404, 409, 413, 422, 429, 503)


# Request bodies: validated here with the facts' own rules (schemas/facts.py).


class FactIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: FactText
    kind: FactKindName = "user_knowledge"
    assistant_id: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$",
        description="agent traits only: the assistant they describe (none: the default one)",
    )
    pinned: StrictBool | None = Field(
        None, description="never superseded, never ages out; absent: as it is (new: false)"
    )


class FactPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: FactText | None = None
    pinned: StrictBool | None = None


def add_fact_routes(app: FastAPI, service: ResponseService) -> None:
    async def book_of(ref: str) -> FactBook:
        if await service.forgetting(ref):
            return FactBook(user_id=ref)
        book = await service.deps.repo.load_fact_book(ref)
        if book is not None:
            return book
        at = datetime.fromtimestamp(service.deps.clock.now(), UTC)
        return book_from_persona(await service.deps.repo.load_persona(ref), at)

    async def writable_book(ref: str) -> FactBook:
        if await service.forgetting(ref):
            raise Conflict(FORGETTING)
        return await book_of(ref)

    async def known(ref: str, fid: str) -> Fact:
        """The user's fact ``fid``; while a DELETE of the user completes, a 409 for every
        write (as ``send_fact_edit`` gives), not a 404 for a fact that reads as gone."""
        if await service.forgetting(ref):
            raise Conflict(FORGETTING)
        for fact in (await book_of(ref)).facts:
            if fact.fact_id == fid:
                return fact
        raise NotFound(f"no fact {fid} in this user's memory")

    async def send(ref: str, op: str, fid: str, **fields: Any) -> dict[str, str]:
        edit = FactEdit(
            user_id=ref,
            edit_id=uuid.uuid4().hex,
            op=op,
            fact_id=fid,
            at=round(service.deps.clock.now(), 3),
            **fields,
        )
        await service.send_fact_edit(edit)
        return {"fact_id": fid}

    @app.get("/v1/users/{user_id}/facts", response_model=FactList, responses=READ)
    async def list_facts(
        user_id: UserIdPath,
        who: Reader,
        kind: FactKindName | None = None,
        include_superseded: bool = False,
        limit: Annotated[int, Query(ge=1, le=500)] = 100,
        cursor: Annotated[str | None, Query(pattern=r"^[0-9]{1,6}$")] = None,
    ) -> dict[str, Any]:
        """The user's facts, newest first: current ones, and with ``include_superseded``
        those updated since (kept for audit). ``cursor``: from the previous page."""
        book = await book_of(who.user(user_id))
        facts = [
            fact
            for fact in reversed(book.facts)
            if (kind is None or fact.kind == kind) and (include_superseded or fact.current)
        ]
        start = int(cursor or 0)
        page = facts[start : start + limit]
        more = start + limit < len(facts)
        return {
            "facts": [fact.model_dump(mode="json") for fact in page],
            "next_cursor": str(start + limit) if more else None,
        }

    @app.post(
        "/v1/users/{user_id}/facts",
        status_code=202,
        response_model=FactAccepted,
        responses=WRITE,
    )
    async def add_fact(user_id: UserIdPath, body: FactIn, who: Writer) -> dict[str, str]:
        """Add a fact (source "api"); ``pinned`` keeps it from supersession and ageing out."""
        ref = who.user(user_id)
        if body.assistant_id is not None and body.kind != "agent_trait":
            raise InvalidEvent("assistant_id is for agent traits only", field="assistant_id")
        scope = body.assistant_id if body.kind == "agent_trait" else None
        if scope == DEFAULT_ASSISTANT:
            scope = None  # the default assistant's traits are named by none
        book = await writable_book(ref)
        fid = add_id(book, KINDS[body.kind], body.text, scope)
        if body.pinned:
            check_pinnable(book, fid, KINDS[body.kind], scope)
        return await send(
            ref,
            "add",
            fid,
            fact_kind=body.kind,
            text=body.text,
            pinned=body.pinned,
            assistant_id=scope,
        )

    @app.patch(
        "/v1/users/{user_id}/facts/{fact_id}",
        status_code=202,
        response_model=FactAccepted,
        responses=WRITE,
    )
    async def edit_fact(
        user_id: UserIdPath, fact_id: FactIdPath, body: Annotated[FactPatch, Body()], who: Writer
    ) -> dict[str, str]:
        """Correct a fact's text, or pin or unpin it; it keeps its id."""
        if body.text is None and body.pinned is None:
            raise InvalidEvent("give text, pinned or both", field="body")
        ref = who.user(user_id)
        fact = await known(ref, fact_id)
        if body.pinned and not fact.pinned:
            if not fact.current:
                raise Conflict(
                    "a superseded fact cannot be pinned: add its text again, or edit the fact "
                    f"that superseded it ({fact.superseded_by})"
                )
            check_pinnable(await book_of(ref), fact_id, KINDS[fact.kind], fact.assistant_id)
        return await send(ref, "edit", fact_id, text=body.text, pinned=body.pinned)

    @app.delete(
        "/v1/users/{user_id}/facts/{fact_id}",
        status_code=202,
        response_model=FactAccepted,
        responses=WRITE,
    )
    async def delete_fact(user_id: UserIdPath, fact_id: FactIdPath, who: Writer) -> dict[str, str]:
        """Delete one fact: never served, never extracted again from the turns it came from."""
        ref = who.user(user_id)
        await known(ref, fact_id)
        return await send(ref, "delete", fact_id)

    @app.get(
        "/v1/users/{user_id}/facts/{fact_id}/history",
        response_model=FactHistory,
        responses=READ,
    )
    async def fact_history(user_id: UserIdPath, fact_id: FactIdPath, who: Reader) -> dict[str, Any]:
        """Every change of the fact, oldest first, with its time and source."""
        book = await book_of(who.user(user_id))
        changes = book.history.get(fact_id)
        if changes is None:
            if any(fact.fact_id == fact_id for fact in book.facts):
                changes = []  # stored before facts had histories
            else:
                raise NotFound(f"no fact {fact_id} in this user's memory")
        return {"fact_id": fact_id, "changes": [c.model_dump(mode="json") for c in changes]}


def check_pinnable(book: FactBook, fid: str, kind: FactKind, assistant_id: str | None) -> None:
    pinned = [f for f in current(book, kind, assistant_id) if f.pinned and f.fact_id != fid]
    if len(pinned) >= MAX_PINNED:
        raise Conflict(
            f"{MAX_PINNED} facts of this kind are pinned already: unpin one first (pinned facts "
            "never age out, so their number is bounded)"
        )
