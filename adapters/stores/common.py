"""What the vector-store adapters share: collection specs, validation, filters, errors.

Both adapters keep the same layout so that an embedded data folder and a Qdrant server hold
the same thing: per collection one dense cosine vector named ``dense`` and, where lexical
matching helps retrieval, one sparse vector named ``lexical`` whose IDF the engine computes.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import orjson

from adapters.ports import (
    AGENT_TRAITS,
    COLLECTIONS,
    PAGES,
    PERSONA_DIM,
    PERSONAS,
    USER_KNOWLEDGE,
    Between,
    Filter,
    FilterValue,
    Hit,
    Payload,
    Point,
    SparseVector,
)
from schemas.errors import StoreError, UnstorablePayload
from schemas.limits import json_problem

DENSE = "dense"
LEXICAL = "lexical"
USER_ID = "user_id"

# The constant of the original RRF paper (Cormack et al. 2009); both engines score a point
# 1 / (k + rank) per list, rank counted from 0, and add the lists up.
RRF_K = 60
SCROLL_PAGE = 256
_LEXICAL_COLLECTIONS = frozenset({PAGES, USER_KNOWLEDGE, AGENT_TRAITS})
_MAX_SPARSE_INDEX = 2**32 - 1  # Qdrant stores sparse indices as u32
# Qdrant Edge 0.9 decodes payloads with a recursion limit: a payload about 124 levels deep
# cannot be replayed from its WAL (the shard refuses to open) and one of 128 cannot be read
# back (the shard fails every later update). Shown by tests/adapters/stores/test_edge_payloads.py;
# half that depth leaves room for the WAL's own wrapping. Turn meta is capped at 32 upstream.
MAX_PAYLOAD_DEPTH = 64
MAX_PAYLOAD_BYTES = 1_048_576  # as compact JSON; a page holds at most ~150 KB of text + meta


@dataclass(frozen=True)
class CollectionSpec:
    name: str
    dim: int
    lexical: bool


CHAIN_ID = "chain.chain_id"  # the MTM stage finds the pages of a chain by it
# Payload fields besides user_id that reads filter on: indexed so those filters stay cheap
# (without them, a page search inside chosen segments is many times slower). A retrieve's
# filters read the pages' channel, assistant, conversation, time (``ts``, epoch seconds) and
# the meta keys the operator names (MEMORYOS_FILTER_META_KEYS).
KEYWORD_FIELDS: dict[str, tuple[str, ...]] = {
    "pages": ("tier", "segment_id", "channel", "assistant_id", "conversation_id", CHAIN_ID),
    "agent_traits": ("assistant_id",),
}
FLOAT_FIELDS: dict[str, tuple[str, ...]] = {"pages": ("ts",)}
META = "meta."


def indexed_fields(collection: str, meta_keys: Sequence[str] = ()) -> list[tuple[str, str]]:
    """(field, "keyword" or "float") of every payload index a collection has, besides the
    user's."""
    keyword = [*KEYWORD_FIELDS.get(collection, ())]
    if collection == PAGES:
        keyword += [META + key for key in meta_keys]
    return [(f, "keyword") for f in keyword] + [
        (f, "float") for f in FLOAT_FIELDS.get(collection, ())
    ]


def collection_specs(dim: int) -> dict[str, CollectionSpec]:
    """The five collections for an embedder of ``dim`` dimensions."""
    if dim < 1:
        raise StoreError(f"vector size must be at least 1, got {dim}")
    return {
        name: CollectionSpec(
            name=name,
            dim=PERSONA_DIM if name == PERSONAS else dim,
            lexical=name in _LEXICAL_COLLECTIONS,
        )
        for name in COLLECTIONS
    }


def prefetch_limit(limit: int) -> int:
    """How deep each side of a hybrid search looks before fusion.

    RRF only sees what the two lists return: a point that is 15th by meaning and 1st by words
    must still be in the dense list to get credit for both.
    """
    return max(4 * limit, 50)


def spec_of(specs: dict[str, CollectionSpec], collection: str) -> CollectionSpec:
    if not specs:
        raise StoreError("the store is closed or not ready: call ensure_collections(dim) first")
    try:
        return specs[collection]
    except KeyError:
        raise StoreError(
            f"unknown collection {collection!r}; expected one of {', '.join(specs)}"
        ) from None


def check_id(point_id: str) -> str:
    """Point ids are uuid strings (uuid5 of user and natural key), in canonical form."""
    try:
        return str(uuid.UUID(point_id))
    except (ValueError, TypeError, AttributeError):
        raise StoreError(f"point id must be a uuid string, got {point_id!r}") from None


def check_ids(ids: Sequence[str]) -> list[str]:
    return [check_id(point_id) for point_id in ids]


def check_points(spec: CollectionSpec, points: Sequence[Point]) -> None:
    """Reject what the engine would store badly or never find again, before anything is written.

    A point without ``user_id`` would be invisible to every (user-filtered) read, and a sparse
    vector on a collection without one would be dropped: both are caller bugs, so they raise.
    """
    for point in points:
        check_id(point.id)
        if len(point.vector) != spec.dim:
            raise StoreError(
                f"{spec.name}: point {point.id} has a vector of size {len(point.vector)}, "
                f"the collection expects {spec.dim}"
            )
        owner = point.payload.get(USER_ID)
        if not isinstance(owner, str) or not owner:
            raise StoreError(f"{spec.name}: point {point.id} has no {USER_ID!r} in its payload")
        if point.sparse:
            check_sparse(spec, point.sparse)
        check_payload(spec, point)


def check_fields(spec: CollectionSpec, ids: Sequence[str], fields: Payload) -> list[str]:
    """The canonical ids, or a refusal of fields that would move a point to another user or
    that the engine could not read back."""
    if USER_ID in fields:
        raise StoreError(f"{spec.name}: {USER_ID!r} is a point's owner, never changed in place")
    where = f"{spec.name}: fields for {len(ids)} points"
    if problem := json_problem(fields, "payload", MAX_PAYLOAD_DEPTH):
        raise UnstorablePayload(f"{where} cannot be stored: {problem}", field="payload")
    if (size := len(orjson.dumps(fields))) > MAX_PAYLOAD_BYTES:
        raise UnstorablePayload(
            f"{where} cannot be stored: {size} bytes as JSON, at most {MAX_PAYLOAD_BYTES}",
            field="payload",
        )
    return check_ids(ids)


def check_payload(spec: CollectionSpec, point: Point) -> None:
    """Refuse a payload the engine could not read back, so it never reaches the shard."""
    where = f"{spec.name}: point {point.id}"
    if problem := json_problem(point.payload, "payload", MAX_PAYLOAD_DEPTH):
        raise UnstorablePayload(f"{where} cannot be stored: {problem}", field="payload")
    size = len(orjson.dumps(point.payload))
    if size > MAX_PAYLOAD_BYTES:
        raise UnstorablePayload(
            f"{where} cannot be stored: payload is {size} bytes as JSON, at most "
            f"{MAX_PAYLOAD_BYTES}",
            field="payload",
        )


def check_sparse(spec: CollectionSpec, sparse: SparseVector) -> None:
    if not spec.lexical:
        raise StoreError(f"collection {spec.name!r} has no lexical (sparse) vector")
    for index, value in sparse.items():
        if not 0 <= index <= _MAX_SPARSE_INDEX:
            raise StoreError(f"{spec.name}: sparse index {index} is outside 0..2**32-1")
        if not math.isfinite(value):
            raise StoreError(f"{spec.name}: sparse value {value!r} at {index} is not finite")


def check_search(
    specs: dict[str, CollectionSpec],
    collection: str,
    vector: Sequence[float],
    sparse: SparseVector | None,
    lexical_only: bool,
) -> CollectionSpec:
    spec = spec_of(specs, collection)
    if not lexical_only and len(vector) != spec.dim:
        raise StoreError(
            f"{spec.name}: query vector has size {len(vector)}, the collection expects {spec.dim}"
        )
    if sparse:
        check_sparse(spec, sparse)
    elif lexical_only:
        raise StoreError("lexical_only search needs a non-empty sparse vector")
    return spec


def sparse_parts(sparse: SparseVector) -> tuple[list[int], list[float]]:
    """Indices in ascending order with their values, the form both engines take."""
    ordered = sorted(sparse.items())
    return [index for index, _ in ordered], [float(value) for _, value in ordered]


def match_pairs(user_id: str | None, where: Filter | None) -> list[tuple[str, FilterValue]]:
    """The exact-match conditions of a read: the user first, then ``where``.

    A list value matches any of its items (a page of any of the chosen segments).
    """
    pairs: list[tuple[str, FilterValue]] = []
    if user_id is not None:
        if not isinstance(user_id, str) or not user_id:
            raise StoreError(f"user_id must be a non-empty string, got {user_id!r}")
        pairs.append((USER_ID, user_id))
    for key, value in (where or {}).items():
        if key == USER_ID:
            raise StoreError("pass the user as user_id, not inside where")
        if isinstance(value, Between):
            if value.gte is None and value.lt is None:
                raise StoreError(f"where[{key!r}] is a range with neither end")
            pairs.append((key, value))
            continue
        if isinstance(value, bool):
            # Qdrant Edge 0.9's MatchValue reads True as 1 and then matches no stored boolean:
            # a flag that reads must find is stored as 0 or 1 on every engine.
            raise StoreError(
                f"where[{key!r}] is a boolean, which not every engine can match: "
                "store the flag as 0 or 1 and match the int"
            )
        is_list = isinstance(value, list) and all(isinstance(item, str) for item in value)
        if not key or not (is_list or isinstance(value, str | int)):
            raise StoreError(f"where[{key!r}] must be a str, int or list of str, got {value!r}")
        pairs.append((key, value))
    return pairs


def dense_of(vector: object) -> list[float]:
    """The dense part of a named-vector dict as the engines return it (empty if absent)."""
    if isinstance(vector, dict):
        return [float(x) for x in vector.get(DENSE, [])]
    return []


_ID_TEXTS: dict[int, str] = {}
ID_TEXTS_MAX = 1 << 16  # about 10 MB at most; emptied when full


def id_text(point_id: object) -> str:
    """A point id as text. Qdrant Edge hands ids out as ``uuid.UUID``, which ``str()`` formats
    slowly, in Python; a retrieve turns a few hundred into text, mostly the same user's pages
    again and again, so their texts are kept."""
    if not isinstance(point_id, uuid.UUID):
        return str(point_id)
    key = point_id.int
    text = _ID_TEXTS.get(key)
    if text is None:
        if len(_ID_TEXTS) >= ID_TEXTS_MAX:
            _ID_TEXTS.clear()
        text = _ID_TEXTS[key] = str(point_id)
    return text


def to_point(point_id: object, payload: Payload | None, vector: object) -> Point:
    """A stored record as a Point; both engines' sparse vectors carry indices and values."""
    sparse: SparseVector | None = None
    lexical = vector.get(LEXICAL) if isinstance(vector, dict) else None
    if lexical is not None:
        sparse = dict(zip(lexical.indices, map(float, lexical.values), strict=True))
    return Point(
        id=id_text(point_id), vector=dense_of(vector), payload=dict(payload or {}), sparse=sparse
    )


def to_hit(point_id: object, score: float, payload: Payload | None, vector: object) -> Hit:
    """A scored point as a Hit; ``vector`` is None unless vectors were asked for."""
    return Hit(
        id=id_text(point_id),
        score=float(score),
        payload=dict(payload or {}),
        vector=None if vector is None else dense_of(vector),
    )


def in_order(wanted: Sequence[str], found: Sequence[Point]) -> list[Point]:
    """``found`` in the order of ``wanted``, each id once; ids not found are left out."""
    by_id = {point.id: point for point in found}
    return [by_id[point_id] for point_id in dict.fromkeys(wanted) if point_id in by_id]


@contextmanager
def store_errors(backend: str, action: str) -> Iterator[None]:
    """Turn whatever the engine raises into one StoreError that names the operation."""
    try:
        yield
    except StoreError:
        raise
    except Exception as exc:  # the engines raise bare Exception, httpx and grpc errors
        raise StoreError(f"{backend}: {action} failed: {exc}") from exc
