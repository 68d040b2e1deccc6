"""A tenant's memory as NDJSON lines, and back: the store's points, whole.

The first line is a header (the format, the tenant, the embedder that made the vectors and
their size); then one line per point: its collection, id, vector and payload. Points keep their
ids, times and every field, so an import rebuilds the same memory (pages with their chains,
segments with their heat, persona, facts, profiles, the assistants' profiles) and importing
twice changes nothing. The lexical vectors are not in the file: they are made again from the
text, as the pipeline makes them.

What is left out: a user whose DELETE is still open (nothing of them), the DELETE's own
records (tombstones), which belong to the deployment that deleted, and the users' data keys,
which seal the topics of the deployment that made them: the importing deployment makes its own.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any, NoReturn

from pydantic import ValidationError

from adapters.doc_codec import doc_data
from adapters.keyring import KEY_DOC, Keyring
from adapters.ports import (
    AGENT_TRAITS,
    COLLECTIONS,
    PAGES,
    PERSONA_DIM,
    PERSONAS,
    SEGMENTS,
    USER_KNOWLEDGE,
    Point,
)
from adapters.repository import (
    ASSISTANTS,
    FACTS_DOC,
    FORGOTTEN_DOC,
    HEAT_DOC,
    PAIRING_DOC,
    PERSONA_DOC,
    TIERS,
    TOMBSTONE_DOC,
    MemoryRepository,
)
from memory import ids
from memory.mtm import MidTermState
from memory.pairing import PairingState
from memory.persona import FactKind
from memory.text import lexical_vector
from schemas.codec import describe
from schemas.errors import InvalidEvent, StoreError
from schemas.facts import FactBook
from schemas.records import Page, Persona, Segment
from schemas.tenants import reference, tenant_of, user_of
from schemas.turn import ID_PATTERN

FORMAT = "memoryos-export/1"
_DELETE_RECORDS = frozenset({TOMBSTONE_DOC, FORGOTTEN_DOC})


def _not_exported(kind: object) -> bool:
    """A DELETE's records, and data keys: a key goes with the deployment whose topics it
    seals (an old export imported after a DELETE must not bring a destroyed key back)."""
    return kind in _DELETE_RECORDS or str(kind).startswith(KEY_DOC)


def header(tenant: str, embedder: str | None, dim: int) -> dict[str, Any]:
    return {"format": FORMAT, "tenant": tenant, "embedder": embedder, "dim": dim}


async def user_lines(repo: MemoryRepository, ref: str) -> list[dict[str, Any]]:
    """Every point of one user (reference), as lines; none while their DELETE is open."""
    stone = await repo.tombstone(ref)
    if stone is not None and stone[1]:
        return []
    lines = []
    for collection in COLLECTIONS:
        for point in await repo.store.scroll(collection, ref, with_vectors=True):
            if collection == PERSONAS and _not_exported(point.payload.get("kind")):
                continue
            lines.append(_line(collection, point))
    return lines


async def assistant_lines(repo: MemoryRepository, tenant: str) -> list[dict[str, Any]]:
    """The profiles of the tenant's assistants."""
    points = await repo.store.scroll(PERSONAS, ASSISTANTS)
    return [
        _line(PERSONAS, point)
        for point in points
        if tenant_of(str(point.payload.get("kind", "")).removeprefix("profile:")) == tenant
    ]


async def tenant_lines(
    repo: MemoryRepository, tenant: str, refs: Iterable[str]
) -> AsyncIterator[dict[str, Any]]:
    for line in await assistant_lines(repo, tenant):
        yield line
    for ref in refs:
        for line in await user_lines(repo, ref):
            yield line


def _line(collection: str, point: Point) -> dict[str, Any]:
    vector = point.vector if collection != PERSONAS else []
    return {"collection": collection, "id": point.id, "vector": vector, "payload": point.payload}


async def import_lines(
    repo: MemoryRepository, tenant: str, dim: int, lines: Iterable[Mapping[str, Any]]
) -> dict[str, int]:
    """Upsert the points of ``lines`` (after the header), each checked to be of ``tenant``:
    counts per collection. InvalidEvent names the first line that is not.

    A point's id must be the one its owner and key make (``memory.ids``), so no line can land
    on another owner's point: not another tenant's, not an API key's, not the store's own
    documents. Each imported user gets a data key of this deployment (none is imported)."""
    by_collection: dict[str, list[Point]] = {}
    for number, line in enumerate(lines, start=2):
        collection, point = _point(line, tenant, dim, number)
        by_collection.setdefault(collection, []).append(point)
    for collection, points in by_collection.items():
        await _refuse_taken(repo, collection, points)
    await _refuse_foreign_references(repo, by_collection)
    for collection, points in by_collection.items():
        await repo.store.upsert(collection, points)
    owners = {
        str(point.payload["user_id"]) for points in by_collection.values() for point in points
    }
    keyring = Keyring(repo)
    for owner in sorted(owners - {ASSISTANTS}):
        await keyring.seal(owner, await keyring.current(owner), b"")  # makes the user's key
    await repo.store.flush()
    return {collection: len(points) for collection, points in by_collection.items()}


async def _refuse_taken(repo: MemoryRepository, collection: str, points: list[Point]) -> None:
    """A point whose id another owner holds already is refused (a segment's id is not made
    again here: this check is what keeps it to its owner)."""
    owner_of = {point.id: point.payload["user_id"] for point in points}
    for stored in await repo.store.retrieve(collection, list(owner_of)):
        if stored.payload.get("user_id") != owner_of[stored.id]:
            raise InvalidEvent(
                f"point {stored.id} of {collection} belongs to another owner", field="body"
            )


async def _refuse_foreign_references(
    repo: MemoryRepository, by_collection: Mapping[str, list[Point]]
) -> None:
    """Every segment and page a heat document names must be its owner's, in this import or
    already stored: the MTM stage deletes and rewrites what its state names, by id."""
    owner_of: dict[tuple[str, str], str] = {
        (collection, point.id): str(point.payload["user_id"])
        for collection, points in by_collection.items()
        for point in points
    }
    wanted: dict[tuple[str, str], str] = {}
    for point in by_collection.get(PERSONAS, []):
        if point.payload.get("kind") == HEAT_DOC:
            segments, pages = heat_references(doc_data(point.payload))
            owner = str(point.payload["user_id"])
            wanted.update({(SEGMENTS, sid): owner for sid in segments})
            wanted.update({(PAGES, pid): owner for pid in pages})
    missing = {key: owner for key, owner in wanted.items() if key not in owner_of}
    for collection in (SEGMENTS, PAGES):
        asked = [point_id for (where, point_id) in missing if where == collection]
        for stored in await repo.store.retrieve(collection, asked) if asked else []:
            owner_of[(collection, stored.id)] = str(stored.payload.get("user_id"))
    for key, owner in wanted.items():
        if owner_of.get(key) != owner:
            raise InvalidEvent(
                f"a heat document of {owner} names {key[0]} {key[1]}, which is not theirs",
                field="body",
            )


def _refuse(number: int, why: str) -> NoReturn:
    raise InvalidEvent(f"line {number}: {why}", field="body")


def _point(line: Mapping[str, Any], tenant: str, dim: int, number: int) -> tuple[str, Point]:
    collection, payload, point_id = line.get("collection"), line.get("payload"), line.get("id")
    if collection not in COLLECTIONS or not isinstance(payload, dict):
        _refuse(number, "not a point of the export format")
    if not isinstance(point_id, str) or not _is_uuid(point_id):
        _refuse(number, "the point's id is not a UUID")
    if _expected_id(collection, payload, tenant, number) not in (None, point_id):
        _refuse(number, "the point's id is not the one its owner and key make")
    vector = line.get("vector")
    if collection == PERSONAS:
        vector = [1.0] * PERSONA_DIM
    elif not (
        isinstance(vector, list)
        and len(vector) == dim
        and all(isinstance(x, int | float) and math.isfinite(x) for x in vector)
    ):
        _refuse(number, f"a vector of {dim} finite numbers is expected")
    sparse = None
    if collection == PAGES:
        sparse = lexical_vector(f"{payload.get('query', '')} {payload.get('response', '')}")
        # the indexed time is the page's own, whatever the line says (an older export has none)
        stamp = Page.model_validate({k: v for k, v in payload.items() if k not in _PLACE})
        payload = {**payload, "ts": stamp.timestamp.timestamp()}
    elif collection in (USER_KNOWLEDGE, AGENT_TRAITS):
        sparse = lexical_vector(str(payload.get("text", "")))
    return collection, Point(point_id, [float(x) for x in vector], payload, sparse)


def _expected_id(collection: str, payload: Mapping[str, Any], tenant: str, number: int) -> Any:
    """The id the point must have (None where only ownership is checked: segments)."""
    owner, kind = payload.get("user_id"), payload.get("kind")
    if owner == ASSISTANTS:
        assistant = str(kind).removeprefix("profile:")
        if (
            collection != PERSONAS
            or not str(kind).startswith("profile:")
            or not _of(assistant, tenant)
        ):
            _refuse(number, f"an assistant's point of another tenant than {tenant}")
        return ids.point_id(ASSISTANTS, "doc", str(kind))
    if not isinstance(owner, str) or not _of(owner, tenant):
        _refuse(number, f"a point of another tenant than {tenant}")
    if collection == PERSONAS:
        if not isinstance(kind, str) or kind in _DELETE_RECORDS or kind.startswith(KEY_DOC):
            _refuse(number, "a document that is not imported (a DELETE's record or a data key)")
        try:
            _check_doc(kind, doc_data(payload), owner)
        except (StoreError, ValueError, TypeError, KeyError, AttributeError) as exc:
            _refuse(number, f"the {kind} document is not one this version reads: {exc}")
        return ids.point_id(owner, "doc", kind)
    if collection == PAGES:
        try:
            page = Page.model_validate({k: v for k, v in payload.items() if k not in _PLACE})
        except ValidationError as exc:
            _refuse(number, f"not a page: {describe(exc)[1]}")
        if payload.get("tier") not in TIERS or page.user_id != owner:
            _refuse(number, "a page must name its owner and one of the tiers " + ", ".join(TIERS))
        expected = ids.page_id(owner, page.turn_id)
        if page.page_id != expected:
            _refuse(number, "a page's page_id must be the one its owner and turn make")
        return expected
    if collection == SEGMENTS:
        try:
            segment = Segment.model_validate({k: v for k, v in payload.items() if k != "size"})
        except ValidationError as exc:
            _refuse(number, f"not a segment: {describe(exc)[1]}")
        return segment.segment_id
    if collection == USER_KNOWLEDGE:
        return ids.fact_id(owner, FactKind.USER, str(payload.get("text")))
    if collection == AGENT_TRAITS:
        scope = payload.get("assistant_id")
        text = str(payload.get("text"))
        return ids.fact_id(owner, FactKind.AGENT, text, str(scope) if scope else None)
    return None  # segments: their id names the page that opened them, which may be gone


_PLACE = ("tier", "segment_id", "ts")


def _check_doc(kind: str, data: dict[str, Any], owner: str) -> None:
    """The documents the stages read back, read as they read them (ValueError if not)."""
    if kind == HEAT_DOC:
        MidTermState.from_dict(data)
    elif kind == PERSONA_DOC:
        Persona.model_validate(data)
    elif kind == PAIRING_DOC:
        PairingState.from_dict(data)
    elif kind == FACTS_DOC and FactBook.model_validate(data).user_id != owner:
        raise ValueError("a facts document names another user")


def heat_references(data: Mapping[str, Any]) -> tuple[set[str], set[str]]:
    """(segment ids, page ids) a heat document names: the MTM stage deletes and rewrites them."""
    state = MidTermState.from_dict(data)
    pages: set[str] = set()
    for stats in state.segments.values():
        pages.update(stats.page_ids, stats.transferred, stats.unsummarized)
    return set(state.segments), pages


def _of(ref: str, tenant: str) -> bool:
    """Whether ``ref`` is the reference of a user (or assistant) id of ``tenant``."""
    return tenant_of(ref) == tenant and re.fullmatch(ID_PATTERN, user_of(ref)) is not None


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def tenant_refs(refs: Iterable[str], tenant: str, user: str | None) -> list[str]:
    """The references to export: the tenant's users, or the one asked for."""
    if user is not None:
        return [reference(tenant, user)]
    return [ref for ref in refs if tenant_of(ref) == tenant]
