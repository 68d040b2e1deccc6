"""Qdrant Edge: the Qdrant engine in-process, the embedded store of ``memoryos up``.

One EdgeShard per collection, each in its own folder under ``<data_dir>/qdrant``. Edge calls
are synchronous; a filtered search takes well under a millisecond, so small calls run on the
event loop and only calls that can grow (bulk upserts, scrolls, flush, close) go to a
worker thread. Hybrid search is fused by Edge itself (prefetch + ``Fusion.Rrf``).

Payloads are bounded before they reach a shard (``check_payload``): Edge accepts a payload
nested ~124+ levels deep but cannot decode it again, and then fails the shard, not the point.

Durability: every update goes to the shard's write-ahead log before ``update`` returns, so a
killed process loses nothing; ``flush`` writes the segments and truncates the WAL. Edge has no
background flusher, so the store flushes every ``flush_interval_s`` of writes (bounding WAL
replay at start-up) and on ``close``.

Space: a delete only marks the point deleted (an upsert over a point rewrites it in place),
and Edge has no background optimizer either, so without ``vacuum`` a shard whose points are
deleted and replaced (MTM's evictions, once users are full) keeps growing in memory and on
disk while its live points stay level; vacuumed now and then, it stays near its live size.
Shards are never given an HNSW index: every search is filtered to one user, a few hundred
points, which Qdrant answers from the payload index without it, and building one made a
vacuum take seconds.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import qdrant_edge as qe

from adapters.ports import (
    PAGES,
    Between,
    Filter,
    FilterValue,
    Hit,
    Payload,
    Point,
    SparseVector,
)
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
    dense_of,
    id_text,
    in_order,
    indexed_fields,
    match_pairs,
    prefetch_limit,
    sparse_parts,
    spec_of,
    store_errors,
    to_point,
)
from adapters.stores.field_cache import FieldCache
from schemas.errors import StoreError

T = TypeVar("T")

# Above this many points an update or retrieve leaves the event loop: up to it, the work
# stays well under a millisecond, less than a thread hop costs a busy loop.
_INLINE_POINTS = 16
_LOCK_FILE = ".lock"
FIELD_CACHE_POINTS = 32_768  # the settings' default (MEMORYOS_EDGE_FIELD_CACHE_POINTS)
NO_HNSW_KB = 1 << 40  # an indexing threshold no shard reaches: vacuums never build HNSW
# Where the pages' payloads live (MEMORYOS_EDGE_PAGE_PAYLOADS). Edge fixes it when it creates a
# segment (the store's first start, a vacuum's rewrite), and later writes go into that segment
# as it was made: in a large store, one made and filled cached searched its pools (four fields
# of a hundred pages) several times faster, whichever way it was reopened; one made cold stayed
# slow, cached at reopening or not. In a small store cached gained nothing and cost the stack's
# retrieves loop CPU (docs/benchmarks.md; tools.edge_search_speed --page-payloads,
# tools.retrieve_load). Named at every opening: a shard otherwise keeps the placement it
# was last opened with.
PAGE_PAYLOADS = {"cold": qe.Memory.Cold, "cached": qe.Memory.Cached}


class EdgeStore:
    name = "edge"

    def __init__(
        self,
        path: Path | str,
        *,
        flush_interval_s: float = 5.0,
        search_threads: int = 1,
        field_cache_points: int = FIELD_CACHE_POINTS,
        page_payloads: str = "cold",
        meta_keys: Sequence[str] = (),
    ) -> None:
        """``meta_keys``: the pages' meta keys a retrieve may filter on (indexed)."""
        self._root = Path(path)
        self._meta_keys = tuple(meta_keys)
        self._search_threads = search_threads
        self._page_payloads = PAGE_PAYLOADS[page_payloads]
        self._fields = FieldCache(field_cache_points)
        self._flush_interval_s = flush_interval_s
        self._specs: dict[str, CollectionSpec] = {}
        self._shards: dict[str, qe.EdgeShard] = {}
        self._dirty: set[str] = set()
        self._unvacuumed: set[str] = set()  # collections written since their last vacuum
        self._last_flush = time.monotonic()
        self._lock_fd: int | None = None

    @property
    def cached_field_points(self) -> int:
        """Points whose ranking fields the field cache holds now (bounded; the soak samples it)."""
        return len(self._fields)

    # --- lifecycle ---

    async def ensure_collections(self, dim: int) -> None:
        specs = collection_specs(dim)
        if self._shards:
            if specs != self._specs:
                raise StoreError(f"edge store at {self._root} is already open with other sizes")
            return
        # Opened on the loop thread on purpose: a second caller cannot interleave and find
        # the folder locked by us; it is start-up, and each shard opens in well under 1 s.
        self._lock_fd = _lock(self._root)
        shards: dict[str, qe.EdgeShard] = {}
        damaged: list[Path] = []
        try:
            for spec in specs.values():
                payloads = self._page_payloads if spec.name == PAGES else None
                try:
                    shards[spec.name] = _open_shard(
                        self._root / spec.name,
                        spec,
                        self._search_threads,
                        payloads,
                        self._meta_keys,
                    )
                except DamagedLog as exc:
                    damaged.append(exc.path)  # every one named at once, not one per start
            if damaged:
                raise StoreError(damaged_logs(damaged))
        except BaseException:
            _flush_and_close(shards)
            _unlock(self._lock_fd)
            self._lock_fd = None
            raise
        self._shards, self._specs = shards, specs
        self._last_flush = time.monotonic()

    async def close(self) -> None:
        self._fields.clear()
        shards, self._shards, self._specs = self._shards, {}, {}
        try:
            if shards:
                await asyncio.to_thread(_flush_and_close, shards)
        finally:
            self._dirty.clear()
            _unlock(self._lock_fd)
            self._lock_fd = None

    async def flush(self) -> None:
        """Write every changed shard's segments to disk and truncate its WAL."""
        dirty = [self._shards[name] for name in sorted(self._dirty) if name in self._shards]
        self._dirty.clear()
        self._last_flush = time.monotonic()
        with store_errors(self.name, "flush"):
            await asyncio.to_thread(_flush, dirty)

    async def vacuum(self) -> int:
        """Rewrite every written shard whose deleted share passed Edge's threshold (a fifth),
        then flush. Edge holds the GIL while it rewrites, for longer the more live points a
        shard has, so this runs every ``MEMORYOS_STORE_VACUUM_INTERVAL_S``, not per write."""
        names = sorted(name for name in self._unvacuumed if name in self._shards)
        self._unvacuumed.clear()
        shards = [self._shards[name] for name in names]
        with store_errors(self.name, "vacuum"):
            rewritten = await asyncio.to_thread(_optimize, shards)
        if rewritten:
            self._dirty.update(names)
            await self.flush()
        return rewritten

    # --- writes ---

    async def upsert(self, collection: str, points: Sequence[Point]) -> None:
        spec = spec_of(self._specs, collection)
        if not points:
            return
        check_points(spec, points)
        operation = qe.UpdateOperation.upsert_points([_to_edge(point) for point in points])
        await self._update(collection, operation, check_ids([p.id for p in points]), "upsert")

    async def set_fields(self, collection: str, ids: Sequence[str], fields: Payload) -> None:
        if not ids:
            return
        wanted = check_fields(spec_of(self._specs, collection), ids, fields)
        # By filter, not by ids: Edge refuses a set by ids when one is missing, after it has
        # set the others.
        only = qe.Filter(must=[qe.HasIdCondition(set[Any](wanted))])
        operation = qe.UpdateOperation.set_payload_by_filter(only, dict(fields))
        await self._update(collection, operation, wanted, "set_fields")

    async def delete(self, collection: str, ids: Sequence[str]) -> None:
        spec_of(self._specs, collection)
        if not ids:
            return
        wanted = check_ids(ids)
        operation = qe.UpdateOperation.delete_points(list[Any](wanted))
        await self._update(collection, operation, wanted, "delete")

    async def delete_user(self, collection: str, user_id: str) -> int:
        spec_of(self._specs, collection)
        user_filter = _filter(user_id, None)
        shard = self._shards[collection]
        # no await between count and delete: no other coroutine can write in between
        self._fields.forget_collection(collection)  # rare: not worth knowing whose they were
        with store_errors(self.name, f"delete_user on {collection}"):
            count = shard.count(qe.CountRequest(exact=True, filter=user_filter))
            if count:
                shard.update(qe.UpdateOperation.delete_points_by_filter(user_filter))
        if count:
            await self._mark_dirty(collection)
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
        """Nearest points of one user.

        With ``sparse`` the dense and lexical lists are fused by Edge's RRF and the scores are
        RRF scores; an empty ``sparse`` counts as none. ``lexical_only`` ranks by the sparse
        vector alone (``vector`` is then ignored); it exists for measurements.
        """
        check_search(self._specs, collection, vector, sparse, lexical_only)
        if limit <= 0:
            return []
        flt = _filter(user_id, where)
        prefetches: list[qe.Prefetch] | None = None
        query: Any
        if sparse:
            lexical_query = qe.Query.Nearest(qe.SparseVector(*sparse_parts(sparse)), using=LEXICAL)
            query = lexical_query
            if not lexical_only:  # the dense query is built only when it is searched
                depth = prefetch_limit(limit)
                prefetches = [
                    qe.Prefetch(limit=depth, query=_dense_query(vector), filter=flt),
                    qe.Prefetch(limit=depth, query=lexical_query, filter=flt),
                ]
                query = qe.Fusion.Rrf(k=RRF_K)
        else:
            query = _dense_query(vector)
        # a few fields: read from the field cache (when it has room)
        cached = tuple(fields) if fields and self._fields.max_points > 0 else ()
        request = qe.QueryRequest(
            limit=limit,
            query=query,
            prefetches=prefetches,
            filter=flt,
            with_payload=False if cached else _payload_selector(fields),
            with_vector=[DENSE] if with_vectors else False,
        )
        with store_errors(self.name, f"search in {collection}"):
            scored = self._shards[collection].query(request)
            if cached:
                return self._with_fields(collection, cached, scored)
        # Edge hands out a fresh payload dict at each access: kept as it is, not copied
        return [
            Hit(id_text(point.id), point.score, point.payload or {}, _dense_or_none(point.vector))
            for point in scored
        ]

    def _with_fields(
        self, collection: str, fields: tuple[str, ...], scored: list[qe.ScoredPoint]
    ) -> list[Hit]:
        """Hits of ``scored`` (read without their payload) with ``fields`` of each, from the
        field cache or, for the points it lacks, read in one call and kept."""
        ids = [id_text(point.id) for point in scored]
        found = self._fields.get(collection, fields, ids)
        missing = [point_id for point_id in ids if point_id not in found]
        if missing:
            selector = qe.PayloadSelector.Include(list(fields))
            records = self._shards[collection].retrieve(list[Any](missing), selector, False)
            read = {id_text(record.id): record.payload or {} for record in records}
            self._fields.put(collection, fields, read)
            found.update(read)
        return [
            # a copy: a caller's change must not reach the cache
            Hit(point_id, point.score, dict(found.get(point_id, {})), _dense_or_none(point.vector))
            for point_id, point in zip(ids, scored, strict=True)
        ]

    async def retrieve(
        self, collection: str, ids: Sequence[str], with_vectors: bool = False
    ) -> list[Point]:
        """The stored points among ``ids``, in the order asked; unknown ids are left out."""
        spec_of(self._specs, collection)
        wanted = check_ids(ids)
        if not wanted:
            return []
        fetch = self._shards[collection].retrieve
        with store_errors(self.name, f"retrieve from {collection}"):
            records = await _call(len(wanted) > _INLINE_POINTS, fetch, wanted, True, with_vectors)
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
        shard = self._shards[collection]

        def scroll_from(offset: Any, points: list[Point]) -> Any:
            records, offset = shard.scroll(
                qe.ScrollRequest(
                    offset=offset,
                    limit=SCROLL_PAGE,
                    filter=flt,
                    with_payload=True,
                    with_vector=with_vectors,
                )
            )
            points.extend(_to_point(record) for record in records)
            return offset

        def scroll_rest(offset: Any, points: list[Point]) -> list[Point]:
            while offset is not None:
                offset = scroll_from(offset, points)
            return points

        with store_errors(self.name, f"scroll in {collection}"):
            # The first page on the loop: most scrolls (a user's STM window, a document) fit
            # in it, and a thread hop on a busy loop costs more than reading a few points.
            points: list[Point] = []
            offset = scroll_from(None, points)
            if offset is None:
                return points
            return await asyncio.to_thread(scroll_rest, offset, points)

    async def count(
        self, collection: str, user_id: str | None = None, where: Filter | None = None
    ) -> int:
        spec_of(self._specs, collection)
        flt = _filter(user_id, where) if user_id is not None or where else None
        with store_errors(self.name, f"count in {collection}"):
            return int(self._shards[collection].count(qe.CountRequest(exact=True, filter=flt)))

    # --- internals ---

    async def _update(
        self, collection: str, operation: qe.UpdateOperation, ids: list[str], action: str
    ) -> None:
        shard = self._shards[collection]
        # Forgotten before and after: a search while the update runs in a thread may cache
        # the fields as they were.
        self._fields.forget(collection, ids)
        try:
            with store_errors(self.name, f"{action} in {collection}"):
                await _call(len(ids) > _INLINE_POINTS, shard.update, operation)
        finally:
            self._fields.forget(collection, ids)
        await self._mark_dirty(collection)

    async def _mark_dirty(self, collection: str) -> None:
        self._dirty.add(collection)
        self._unvacuumed.add(collection)
        if time.monotonic() - self._last_flush >= self._flush_interval_s:
            await self.flush()


async def _call(in_thread: bool, function: Callable[..., T], *args: Any) -> T:
    if in_thread:
        return await asyncio.to_thread(function, *args)
    return function(*args)


def _open_shard(
    path: Path,
    spec: CollectionSpec,
    search_threads: int,
    payloads: qe.Memory | None = None,
    meta_keys: Sequence[str] = (),
) -> qe.EdgeShard:
    config = qe.EdgeConfig(
        vectors={DENSE: qe.EdgeVectorParams(size=spec.dim, distance=qe.Distance.Cosine)},
        sparse_vectors=(
            {LEXICAL: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)} if spec.lexical else None
        ),
        optimizers=qe.EdgeOptimizersConfig(indexing_threshold=NO_HNSW_KB),
        payload_memory=payloads,  # None: Edge's own for the collections read a few points at once
        # 0 names the count itself: None would keep the count an earlier start saved
        max_search_threads=search_threads or os.cpu_count() or 1,
    )
    try:
        if (path / "edge_config.json").exists():
            # load() checks the stored vectors against ``config`` and refuses a mismatch
            shard = qe.EdgeShard.load(str(path), config)
        else:
            shard = qe.EdgeShard.create(str(path), config)
    except Exception as exc:
        if "RecursionLimitExceeded" in str(exc) or "recursion limit" in str(exc):
            # Edge replays its WAL inside load() and offers no way to skip one entry, so a
            # payload it cannot decode (written before payloads were bounded) cannot be
            # quarantined from here: say what it is instead of blaming the vector size.
            raise StoreError(
                f"cannot open the {spec.name!r} collection at {path}: it holds a payload "
                "nested too deeply for Qdrant Edge to decode (written by a version before "
                "payloads were bounded). Move the folder aside and re-ingest the turns."
            ) from exc
        if "failed to open WAL" in str(exc):
            raise DamagedLog(path / "wal") from None
        raise StoreError(
            f"cannot open the {spec.name!r} collection at {path} (vector size {spec.dim}): "
            f"{exc}. A folder made with another MEMORYOS_EMBEDDER or MEMORYOS_EMBEDDING_DIM "
            "cannot be reused; point MEMORYOS_DATA_DIR elsewhere."
        ) from exc
    for field, kind in [(USER_ID, "keyword"), *indexed_fields(spec.name, meta_keys)]:
        with store_errors("edge", f"index {field} in {spec.name}"):
            if field not in shard.info().payload_schema:
                schema = (
                    qe.PayloadSchemaType.Float if kind == "float" else qe.PayloadSchemaType.Keyword
                )
                shard.update(qe.UpdateOperation.create_field_index(field, schema))
    return shard


class DamagedLog(StoreError):
    def __init__(self, path: Path) -> None:
        super().__init__(f"the write-ahead log {path} is damaged")
        self.path = path


def damaged_logs(logs: list[Path]) -> str:
    """What to do about write-ahead logs Edge cannot read: the segments, made durable at each
    flush, are intact, and what only a log held is still in the journal (its entries settle
    only after a flush), so setting the logs aside loses nothing acknowledged."""
    moves = "; ".join(f"mv {log} {log.with_name('wal.damaged')}" for log in logs)
    return (
        f"the store's write-ahead log is damaged in {len(logs)} collection(s) "
        f"({', '.join(log.parent.name for log in logs)}); nothing was started over it. Move "
        f"each aside ({moves}) and start again: the collections reopen at their last flush and "
        "the journal re-sends every acknowledged turn and message not flushed before it"
    )


def _lock(root: Path) -> int:
    """One process per data folder; Edge's own WAL lock only says "WouldBlock"."""
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / _LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StoreError(
            f"the data folder {root} is in use by another memoryos process (or another "
            "store in this one); stop it or set MEMORYOS_DATA_DIR elsewhere"
        ) from None
    return fd


def _unlock(fd: int | None) -> None:
    if fd is not None:
        os.close(fd)  # closing the descriptor drops the flock


def _optimize(shards: list[qe.EdgeShard]) -> int:
    return sum(1 for shard in shards if shard.optimize())


def _flush(shards: list[qe.EdgeShard]) -> None:
    for shard in shards:
        shard.flush()


def _flush_and_close(shards: dict[str, qe.EdgeShard]) -> None:
    errors: list[str] = []
    for name, shard in shards.items():
        try:
            shard.flush()
            shard.close()
        except Exception as exc:  # close the others anyway, then report every failure
            errors.append(f"{name}: {exc}")
    if errors:
        raise StoreError("edge: closing failed for " + "; ".join(errors))


def _filter(user_id: str | None, where: Filter | None) -> qe.Filter:
    return qe.Filter(must=[_condition(k, v) for k, v in match_pairs(user_id, where)])


def _condition(key: str, value: FilterValue) -> qe.FieldCondition:
    if isinstance(value, Between):
        return qe.FieldCondition(key, range=qe.RangeFloat(gte=value.gte, lt=value.lt))
    if isinstance(value, list):
        return qe.FieldCondition(key, match=qe.MatchAny(value))
    return qe.FieldCondition(key, match=qe.MatchValue(value))


def _dense_query(vector: Sequence[float]) -> qe.Query:
    return qe.Query.Nearest(list(map(float, vector)), using=DENSE)


def _dense_or_none(vector: object) -> list[float] | None:
    return None if vector is None else dense_of(vector)


def _payload_selector(fields: Sequence[str] | None) -> Any:
    if fields is None:
        return True
    return qe.PayloadSelector.Include(list(fields)) if fields else False


def _to_edge(point: Point) -> qe.Point:
    vector: dict[str, Any] = {DENSE: [float(x) for x in point.vector]}
    if point.sparse:
        vector[LEXICAL] = qe.SparseVector(*sparse_parts(point.sparse))
    return qe.Point(str(point.id), vector, point.payload)


def _to_point(record: qe.Record) -> Point:
    return to_point(record.id, record.payload, record.vector)
