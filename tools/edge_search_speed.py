"""One user's nearest pages in Qdrant Edge, timed side by side on one store.

    python -m tools.edge_search_speed [--users 50] [--pages 300] [--searches 800]

The store holds ``users`` x ``pages`` random pages, each with a tier; every search asks for one
user's 100 nearest. The pool searches of a retrieve once carried ``tier in (stm, leaving,
mtm)``, which every page matches; this prints what that condition cost, and the searches
without it split over two threads (shorter only if Edge lets the GIL go while it searches).
Then the searches a retrieve's pool makes (the four ranking fields), on the same store
reopened five ways, each twice, in the order A B C D E E D C B A: A as the stack opens it
(searches on the calling thread, the field cache on), B without the field cache, C with
Edge's own thread per core and no cache (the previous release), D and E with the pages'
payloads cached (``MEMORYOS_EDGE_PAGE_PAYLOADS=cached``), with and without the field cache;
each reopening names its placement, so every way reads the files as it would be opened. And
two checks of why a retrieve's searches stay separate calls on the event loop's thread: a
pure-Python loop timed alone, beside a thread that hashes (native work that lets the GIL go:
the control) and beside a thread that searches (longer than beside the hashing if Edge holds
the GIL while it searches), and Edge's ``query_batch`` (several searches in one call)
against one call a search.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import qdrant_edge as qe

from adapters import event_loop
from adapters.ports import PAGES, Point
from adapters.repository import POOL_FIELDS, TIERS
from adapters.stores.edge import EdgeStore, _dense_query, _filter

DIM = 384


async def run(
    users: int, pages: int, searches: int, page_payloads: str = "cold"
) -> dict[str, list[float]]:
    """``page_payloads``: the placement the store is made and filled with; a reopening with
    another placement reads the segments written before as they were written (measured)."""
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as folder:
        store = EdgeStore(folder, page_payloads=page_payloads)
        await store.ensure_collections(DIM)
        try:
            points = []
            for index in range(users * pages):
                vector = rng.normal(size=DIM)
                payload = {
                    "user_id": f"u{index % users}",
                    "tier": TIERS[index % len(TIERS)],
                    "page_id": str(index),
                    "seq": index // users,
                    "timestamp": "2024-03-11T09:06:00+00:00",
                    "segment_id": f"s{index % 997}",
                }
                points.append(
                    Point(f"{index:032x}", (vector / np.linalg.norm(vector)).tolist(), payload)
                )
            for start in range(0, len(points), 1000):
                await store.upsert(PAGES, points[start : start + 1000])
            queries = [rng.normal(size=DIM).tolist() for _ in range(searches)]
            timings: dict[str, list[float]] = {}
            conditions = {"tier_condition": {"tier": list(TIERS)}, "user_only": None}
            for label in [*conditions, *reversed(conditions)]:  # each first once
                started = time.perf_counter()
                for index, query in enumerate(queries):
                    user = f"u{index % users}"
                    await store.search(PAGES, user, query, 100, where=conditions[label], fields=[])
                per_search = (time.perf_counter() - started) / searches * 1000
                timings.setdefault(f"{label}_ms_per_search", []).append(round(per_search, 3))
            # The same searches split over two threads: shorter only if Edge lets the GIL go.
            started = time.perf_counter()
            half = searches // 2

            def search_from(first: int) -> None:
                event_loop.run(_searches(store, queries[first : first + half], users, first))

            threads = [threading.Thread(target=search_from, args=(f,)) for f in (0, half)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            per_search = (time.perf_counter() - started) / (2 * half) * 1000
            timings["user_only_two_threads_ms_per_search"] = [round(per_search, 3)]
            timings.update(_gil_and_batches(store, queries, users))
        finally:
            await store.close()
        timings.update(await _pool_searches(folder, queries, users))
        return timings


POOL_WAYS: dict[str, dict[str, Any]] = {  # label: EdgeStore options
    "pool_fields_stack_default": {"search_threads": 1},
    "pool_fields_no_field_cache": {"search_threads": 1, "field_cache_points": 0},
    "pool_fields_thread_per_core_no_cache": {"search_threads": 0, "field_cache_points": 0},
    # MEMORYOS_EDGE_PAGE_PAYLOADS=cached, with and without the field cache
    "pool_fields_cached_payloads": {"search_threads": 1, "page_payloads": "cached"},
    "pool_fields_cached_payloads_no_field_cache": {
        "search_threads": 1,
        "field_cache_points": 0,
        "page_payloads": "cached",
    },
}


async def _pool_searches(
    folder: str, queries: list[list[float]], users: int
) -> dict[str, list[float]]:
    timings: dict[str, list[float]] = {}
    for label in [*POOL_WAYS, *reversed(POOL_WAYS)]:
        store = EdgeStore(folder, **POOL_WAYS[label])
        await store.ensure_collections(DIM)
        try:
            started = time.perf_counter()
            for index, query in enumerate(queries):
                user = f"u{index % users}"
                await store.search(PAGES, user, query, 100, fields=POOL_FIELDS)
            per_search = (time.perf_counter() - started) / len(queries) * 1000
            timings.setdefault(f"{label}_ms_per_search", []).append(round(per_search, 3))
        finally:
            await store.close()
    return timings


SPIN = 3_000_000


def _spin() -> float:
    started, total = time.perf_counter(), 0
    for index in range(SPIN):
        total += index
    return time.perf_counter() - started


def _spin_beside(work: Callable[[], None]) -> float:
    """The loop's time while another thread repeats ``work``: on a free core it takes as long
    as alone unless ``work`` holds the GIL."""
    stop = threading.Event()

    def repeat() -> None:
        while not stop.is_set():
            work()

    thread = threading.Thread(target=repeat)
    thread.start()
    try:
        return _spin()
    finally:
        stop.set()
        thread.join()


def _gil_and_batches(
    store: EdgeStore, queries: list[list[float]], users: int
) -> dict[str, list[float]]:
    """The GIL check and ``query_batch``, on Edge's shard itself (the store's own handle: the
    adapter has no batch call, because this measures whether it should)."""
    shard = store._shards[PAGES]
    requests = [
        qe.QueryRequest(limit=100, query=_dense_query(query), filter=_filter(f"u{i % users}", None),
                        with_payload=False, with_vector=False)
        for i, query in enumerate(queries)
    ]  # fmt: skip
    timings: dict[str, list[float]] = {}
    for size in (1, 3, 10):
        started = time.perf_counter()
        for start in range(0, len(requests), size):
            if size == 1:
                shard.query(requests[start])
            else:
                shard.query_batch(qe.QueryBatchRequest(requests[start : start + size]))
        per_search = (time.perf_counter() - started) / len(requests) * 1000
        label = "query_one_at_a_time" if size == 1 else f"query_batch_of_{size}"
        timings[f"{label}_ms_per_search"] = [round(per_search, 3)]

    def search() -> None:
        for request in requests[:50]:
            shard.query(request)

    def digest() -> None:  # the control: native work that lets the GIL go (hashlib does)
        hashlib.sha256(bytes(4_000_000)).digest()

    timings["python_loop_alone_s"] = [round(_spin(), 3)]
    timings["python_loop_beside_a_hashing_thread_s"] = [round(_spin_beside(digest), 3)]
    timings["python_loop_beside_a_searching_thread_s"] = [round(_spin_beside(search), 3)]
    return timings


async def _searches(store: EdgeStore, queries: list[list[float]], users: int, first: int) -> None:
    for index, query in enumerate(queries, start=first):
        await store.search(PAGES, f"u{index % users}", query, 100, fields=[])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--searches", type=int, default=800)
    parser.add_argument("--page-payloads", choices=["cold", "cached"], default="cold")
    args = parser.parse_args()
    timings = event_loop.run(run(args.users, args.pages, args.searches, args.page_payloads))
    made = {"users": args.users, "pages_per_user": args.pages, "made_with": args.page_payloads}
    print(json.dumps({**made, **timings}))


if __name__ == "__main__":
    main()
