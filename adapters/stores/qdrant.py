"""Qdrant through ``qdrant-client``: a server in production, local mode in tests.

``location`` is an http(s) URL (a Qdrant server), ``:memory:`` or a folder (qdrant-client's
local mode, which locks its folder and is slow past a few thousand points: tests only).

Hybrid search is fused by Qdrant (prefetch + ``RrfQuery``), on the server and in local mode
alike, with the same k as the Edge adapter. The parametrised RRF needs Qdrant server 1.16+.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from qdrant_client import AsyncQdrantClient, models

from adapters.ports import Between, Filter, FilterValue, Hit, Payload, Point, SparseVector
from adapters.stores.common import (
    DENSE,
    LEXICAL,
    RRF_K,
    SCROLL_PAGE,
    USER_ID,
    CollectionSpec,
    check_fields,
    check_ids,
    check_points,
    check_search,
    collection_specs,
    in_order,
    indexed_fields,
    match_pairs,
    prefetch_limit,
    sparse_parts,
    spec_of,
    store_errors,
    to_hit,
    to_point,
)
from schemas.errors import StoreError

# The client checks the server's version in a thread of its own and warns when it cannot
# reach it; a store that cannot be reached fails our first call, whose error names the setting.
warnings.filterwarnings("ignore", message="Failed to obtain server version", category=UserWarning)


class QdrantStore:
    name = "qdrant"

    def __init__(
        self,
        location: str,
        *,
        api_key: str | None = None,
        timeout: int = 10,
        meta_keys: Sequence[str] = (),
    ) -> None:
        """``meta_keys``: the pages' meta keys a retrieve may filter on (indexed)."""
        self._server = location.startswith(("http://", "https://"))
        self._meta_keys = tuple(meta_keys)
        self._specs: dict[str, CollectionSpec] = {}
        with store_errors(self.name, f"opening {location}"):
            if self._server:
                self._client = AsyncQdrantClient(url=location, api_key=api_key, timeout=timeout)
            elif location == ":memory:":
                self._client = AsyncQdrantClient(location=":memory:")
            else:
                self._client = AsyncQdrantClient(path=location)

    async def ensure_collections(self, dim: int) -> None:
        specs = collection_specs(dim)
        for spec in specs.values():
            with store_errors(self.name, f"creating {spec.name}"):
                await self._ensure(spec)
        self._specs = specs

    async def close(self) -> None:
        with store_errors(self.name, "close"):
            await self._client.close()

    # --- writes ---

    async def upsert(self, collection: str, points: Sequence[Point]) -> None:
        spec = spec_of(self._specs, collection)
        if not points:
            return
        check_points(spec, points)
        structs = [
            models.PointStruct(id=str(point.id), vector=_vectors(point), payload=point.payload)
            for point in points
        ]
        with store_errors(self.name, f"upsert in {collection}"):
            await self._client.upsert(collection, structs, wait=True)

    async def set_fields(self, collection: str, ids: Sequence[str], fields: Payload) -> None:
        if not ids:
            return
        wanted = check_fields(spec_of(self._specs, collection), ids, fields)
        # a filter selector passes over an id not stored, where an id list fails on it
        only = models.Filter(must=[models.HasIdCondition(has_id=list[Any](wanted))])
        with store_errors(self.name, f"set_fields in {collection}"):
            await self._client.set_payload(collection, dict(fields), points=only, wait=True)

    async def delete(self, collection: str, ids: Sequence[str]) -> None:
        spec_of(self._specs, collection)
        if not ids:
            return
        selector = models.PointIdsList(points=list(check_ids(ids)))
        with store_errors(self.name, f"delete in {collection}"):
            await self._client.delete(collection, points_selector=selector, wait=True)

    async def flush(self) -> None:
        return None  # a server's write is in its WAL when acknowledged; local mode writes through

    async def vacuum(self) -> int:
        return 0  # the server's own optimizers vacuum in the background

    async def delete_user(self, collection: str, user_id: str) -> int:
        """Delete every point of one user; the count is taken just before the delete."""
        spec_of(self._specs, collection)
        user_filter = _filter(user_id, None)
        with store_errors(self.name, f"delete_user on {collection}"):
            count = (
                await self._client.count(collection, count_filter=user_filter, exact=True)
            ).count
            if count:
                selector = models.FilterSelector(filter=user_filter)
                await self._client.delete(collection, points_selector=selector, wait=True)
        return count

    # --- reads ---

    async def search(
        self,
        collection: str,
        user_id: str,
        vector: Sequence[float],
        limit: int,
        where: Filter | None = None,
        sparse: SparseVector | None = None,
        with_vectors: bool = False,
        lexical_only: bool = False,
        fields: Sequence[str] | None = None,
    ) -> list[Hit]:
        """Nearest points of one user; see ``EdgeStore.search`` for ``sparse``/``lexical_only``."""
        check_search(self._specs, collection, vector, sparse, lexical_only)
        if limit <= 0:
            return []
        flt = _filter(user_id, where)
        dense = [float(x) for x in vector]
        arguments: dict[str, Any] = {"query": dense, "using": DENSE}
        if sparse:
            indices, values = sparse_parts(sparse)
            lexical = models.SparseVector(indices=indices, values=values)
            arguments = {"query": lexical, "using": LEXICAL}
            if not lexical_only:
                depth = prefetch_limit(limit)
                arguments = {
                    "prefetch": [
                        models.Prefetch(query=dense, using=DENSE, filter=flt, limit=depth),
                        models.Prefetch(query=lexical, using=LEXICAL, filter=flt, limit=depth),
                    ],
                    "query": models.RrfQuery(rrf=models.Rrf(k=RRF_K)),
                }
        with store_errors(self.name, f"search in {collection}"):
            response = await self._client.query_points(
                collection,
                query_filter=flt,
                limit=limit,
                with_payload=True if fields is None else list(fields) or False,
                with_vectors=[DENSE] if with_vectors else False,
                **arguments,
            )
        return [
            to_hit(point.id, point.score, point.payload, point.vector) for point in response.points
        ]

    async def retrieve(
        self, collection: str, ids: Sequence[str], with_vectors: bool = False
    ) -> list[Point]:
        """The stored points among ``ids``, in the order asked; unknown ids are left out."""
        spec_of(self._specs, collection)
        wanted = check_ids(ids)
        if not wanted:
            return []
        with store_errors(self.name, f"retrieve from {collection}"):
            records = await self._client.retrieve(
                collection, ids=list(wanted), with_payload=True, with_vectors=with_vectors
            )
        return in_order(wanted, [_to_point(record) for record in records])

    async def scroll(
        self,
        collection: str,
        user_id: str | None,
        where: Filter | None = None,
        with_vectors: bool = False,
    ) -> list[Point]:
        """Every point of one user (matching ``where``), in id order."""
        spec_of(self._specs, collection)
        flt = _filter(user_id, where)
        points: list[Point] = []
        offset: Any = None
        with store_errors(self.name, f"scroll in {collection}"):
            while True:
                records, offset = await self._client.scroll(
                    collection,
                    scroll_filter=flt,
                    limit=SCROLL_PAGE,
                    offset=offset,
                    with_payload=True,
                    with_vectors=with_vectors,
                )
                points.extend(_to_point(record) for record in records)
                if offset is None:
                    return points

    async def count(
        self, collection: str, user_id: str | None = None, where: Filter | None = None
    ) -> int:
        spec_of(self._specs, collection)
        flt = _filter(user_id, where) if user_id is not None or where else None
        with store_errors(self.name, f"count in {collection}"):
            return (await self._client.count(collection, count_filter=flt, exact=True)).count

    # --- internals ---

    async def _ensure(self, spec: CollectionSpec) -> None:
        if await self._client.collection_exists(spec.name):
            await self._check_existing(spec)
            return
        try:
            await self._client.create_collection(
                spec.name,
                vectors_config={
                    DENSE: models.VectorParams(size=spec.dim, distance=models.Distance.COSINE)
                },
                sparse_vectors_config=(
                    {LEXICAL: models.SparseVectorParams(modifier=models.Modifier.IDF)}
                    if spec.lexical
                    else None
                ),
                # Qdrant's multitenancy recipe: no global graph, one per user (every read
                # filters on user_id), built from the tenant index below.
                hnsw_config=models.HnswConfigDiff(payload_m=16, m=0) if self._server else None,
            )
        except Exception:
            # another worker may have created it in between; anything else re-raises
            if not await self._client.collection_exists(spec.name):
                raise
            await self._check_existing(spec)
        if self._server:  # local mode ignores payload indexes (and warns about them)
            await self._client.create_payload_index(
                spec.name,
                USER_ID,
                field_schema=models.KeywordIndexParams(
                    type=models.KeywordIndexType.KEYWORD, is_tenant=True
                ),
                wait=True,
            )
            for field, kind in indexed_fields(spec.name, self._meta_keys):
                schema = (
                    models.PayloadSchemaType.FLOAT
                    if kind == "float"
                    else models.PayloadSchemaType.KEYWORD
                )
                await self._client.create_payload_index(
                    spec.name, field, field_schema=schema, wait=True
                )

    async def _check_existing(self, spec: CollectionSpec) -> None:
        info = await self._client.get_collection(spec.name)
        vectors = info.config.params.vectors
        size = vectors[DENSE].size if isinstance(vectors, dict) and DENSE in vectors else None
        if size != spec.dim:
            raise StoreError(
                f"collection {spec.name!r} exists with dense vector size {size}, expected "
                f"{spec.dim}: it was made with another embedder; use another Qdrant or drop it"
            )


def _filter(user_id: str | None, where: Filter | None) -> models.Filter:
    return models.Filter(must=[_condition(k, v) for k, v in match_pairs(user_id, where)])


def _condition(key: str, value: FilterValue) -> models.FieldCondition:
    if isinstance(value, Between):
        return models.FieldCondition(key=key, range=models.Range(gte=value.gte, lt=value.lt))
    if isinstance(value, list):
        return models.FieldCondition(key=key, match=models.MatchAny(any=value))
    return models.FieldCondition(key=key, match=models.MatchValue(value=value))


def _vectors(point: Point) -> dict[str, Any]:
    vectors: dict[str, Any] = {DENSE: [float(x) for x in point.vector]}
    if point.sparse:
        indices, values = sparse_parts(point.sparse)
        vectors[LEXICAL] = models.SparseVector(indices=indices, values=values)
    return vectors


def _to_point(record: models.Record) -> Point:
    return to_point(record.id, record.payload, record.vector)
