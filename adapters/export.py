"""A tenant's memory as NDJSON lines, and back: the store's points, whole.

The first line is a header (the format, the tenant, the embedder that made the vectors and
their size); then one line per point: its collection, id, vector and payload. Points keep their
ids, times and every field, so an import rebuilds the same memory (pages with their chains,
segments with their heat, persona, facts, profiles, the assistants' profiles) and importing
twice changes nothing. The lexical vectors are not in the file: they are made again from the
text, as the pipeline makes them.

What is left out: a user whose DELETE is still open (nothing of them), and the DELETE's own
records (tombstones), which belong to the deployment that deleted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

from adapters.ports import (
    AGENT_TRAITS,
    COLLECTIONS,
    PAGES,
    PERSONA_DIM,
    PERSONAS,
    USER_KNOWLEDGE,
    Point,
)
from adapters.repository import (
    ASSISTANTS,
    FORGOTTEN_DOC,
    TOMBSTONE_DOC,
    MemoryRepository,
)
from memory.text import lexical_vector
from schemas.errors import InvalidEvent
from schemas.tenants import reference, tenant_of

FORMAT = "memoryos-export/1"
_DELETE_RECORDS = frozenset({TOMBSTONE_DOC, FORGOTTEN_DOC})


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
            if collection == PERSONAS and point.payload.get("kind") in _DELETE_RECORDS:
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
    counts per collection. InvalidEvent names the first line that is not."""
    by_collection: dict[str, list[Point]] = {}
    for number, line in enumerate(lines, start=2):
        collection, point = _point(line, tenant, dim, number)
        by_collection.setdefault(collection, []).append(point)
    for collection, points in by_collection.items():
        await repo.store.upsert(collection, points)
    await repo.store.flush()
    return {collection: len(points) for collection, points in by_collection.items()}


def _point(line: Mapping[str, Any], tenant: str, dim: int, number: int) -> tuple[str, Point]:
    collection, payload = line.get("collection"), line.get("payload")
    if collection not in COLLECTIONS or not isinstance(payload, dict):
        raise InvalidEvent(f"line {number}: not a point of the export format", field="body")
    owner = str(payload.get("user_id", ""))
    kind = str(payload.get("kind", ""))
    if owner == ASSISTANTS:
        mine = kind.startswith("profile:") and tenant_of(kind.removeprefix("profile:")) == tenant
    else:
        mine = tenant_of(owner) == tenant and "/" not in owner.removeprefix(f"{tenant}/")
    if not mine:
        raise InvalidEvent(f"line {number}: a point of another tenant than {tenant}", field="body")
    vector = line.get("vector")
    if collection == PERSONAS:
        vector = [1.0] * PERSONA_DIM
    elif not isinstance(vector, list) or len(vector) != dim:
        raise InvalidEvent(f"line {number}: a vector of {dim} numbers is expected", field="body")
    sparse = None
    if collection == PAGES:
        sparse = lexical_vector(f"{payload.get('query', '')} {payload.get('response', '')}")
    elif collection in (USER_KNOWLEDGE, AGENT_TRAITS):
        sparse = lexical_vector(str(payload.get("text", "")))
    return collection, Point(str(line.get("id")), vector, payload, sparse)


def tenant_refs(refs: Iterable[str], tenant: str, user: str | None) -> list[str]:
    """The references to export: the tenant's users, or the one asked for."""
    if user is not None:
        return [reference(tenant, user)]
    return [ref for ref in refs if tenant_of(ref) == tenant]
