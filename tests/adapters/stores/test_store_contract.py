"""One contract for every VectorStore adapter: Qdrant Edge on disk and qdrant-client local mode."""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from adapters.doc_codec import doc_data
from adapters.ports import (
    AGENT_TRAITS,
    PAGES,
    PERSONA_DIM,
    PERSONAS,
    SEGMENTS,
    USER_KNOWLEDGE,
    Between,
    Point,
    VectorStore,
)
from adapters.repository import MemoryRepository
from adapters.settings import Settings
from adapters.stores import build_store
from adapters.stores.edge import EdgeStore
from adapters.stores.qdrant import QdrantStore
from schemas.errors import StoreError, UnstorablePayload
from tests.support.paths import ROOT

DIM = 4
ADAPTERS = ["edge", "qdrant-path", "qdrant-memory"]
ON_DISK = {"edge", "qdrant-path"}

StoreFactory = Callable[[], VectorStore]


def pid(key: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, key))


def point(key: str, user: str, vector: list[float], **payload: object) -> Point:
    sparse = payload.pop("sparse", None)
    return Point(pid(key), vector, {"user_id": user, "key": key, **payload}, sparse)  # type: ignore[arg-type]


@pytest.fixture(params=ADAPTERS)
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    """A factory, so persistence tests can open the same location a second time."""
    kind: str = request.param

    def make() -> VectorStore:
        if kind == "edge":
            return EdgeStore(tmp_path / "qdrant")
        if kind == "qdrant-path":
            return QdrantStore(str(tmp_path / "local"))
        return QdrantStore(":memory:")

    make.kind = kind  # type: ignore[attr-defined]
    return make


@pytest.fixture
async def store(make_store: StoreFactory) -> AsyncIterator[VectorStore]:
    opened = make_store()
    await opened.ensure_collections(DIM)
    yield opened
    await opened.close()


async def seed(store: VectorStore) -> None:
    await store.upsert(
        PAGES,
        [
            point("a1", "alice", [1.0, 0.0, 0.0, 0.0], kind="page", topic="food"),
            point("a2", "alice", [0.8, 0.6, 0.0, 0.0], kind="page", topic="travel"),
            point("a3", "alice", [0.0, 1.0, 0.0, 0.0], kind="note", topic="food"),
            point("b1", "bob", [1.0, 0.0, 0.0, 0.0], kind="page", topic="food"),
        ],
    )


async def test_search_is_per_user(store: VectorStore) -> None:
    await seed(store)
    hits = await store.search(PAGES, "alice", [1.0, 0.0, 0.0, 0.0], limit=10)
    assert [hit.payload["key"] for hit in hits] == ["a1", "a2", "a3"]
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert hits[0].vector is None
    bob = await store.search(PAGES, "bob", [0.0, 1.0, 0.0, 0.0], limit=10, with_vectors=True)
    assert [hit.id for hit in bob] == [pid("b1")]
    assert bob[0].vector == pytest.approx([1.0, 0.0, 0.0, 0.0])
    assert await store.search(PAGES, "carol", [1.0, 0.0, 0.0, 0.0], limit=10) == []
    assert await store.search(PAGES, "alice", [1.0, 0.0, 0.0, 0.0], limit=0) == []


async def test_search_returns_only_the_payload_fields_asked_for(store: VectorStore) -> None:
    await seed(store)
    query = [1.0, 0.0, 0.0, 0.0]
    some = await store.search(PAGES, "alice", query, limit=10, fields=["key", "topic"])
    assert [hit.payload for hit in some] == [
        {"key": "a1", "topic": "food"},
        {"key": "a2", "topic": "travel"},
        {"key": "a3", "topic": "food"},
    ]
    bare = await store.search(PAGES, "alice", query, limit=10, fields=[])
    assert [(hit.id, hit.payload) for hit in bare] == [(pid(k), {}) for k in ("a1", "a2", "a3")]


async def test_where_filters(store: VectorStore) -> None:
    await seed(store)
    vector = [1.0, 0.0, 0.0, 0.0]
    food = await store.search(PAGES, "alice", vector, limit=10, where={"topic": "food"})
    assert {hit.payload["key"] for hit in food} == {"a1", "a3"}
    both = await store.search(PAGES, "alice", vector, 10, where={"topic": "food", "kind": "page"})
    assert [hit.payload["key"] for hit in both] == ["a1"]
    scrolled = await store.scroll(PAGES, "alice", where={"kind": "note"})
    assert [p.payload["key"] for p in scrolled] == ["a3"]
    assert await store.count(PAGES, "alice", where={"topic": "food"}) == 2
    assert await store.count(PAGES, where={"topic": "food"}) == 3
    with pytest.raises(StoreError, match="user_id"):
        await store.search(PAGES, "alice", vector, 10, where={"user_id": "bob"})


async def test_where_with_a_list_matches_any_of_its_values(store: VectorStore) -> None:
    await seed(store)
    vector = [1.0, 0.0, 0.0, 0.0]
    hits = await store.search(PAGES, "alice", vector, 10, where={"kind": ["page", "note"]})
    everything = await store.search(PAGES, "alice", vector, 10)
    assert {hit.id for hit in hits} == {hit.id for hit in everything}
    notes = await store.scroll(PAGES, "alice", where={"kind": ["note"]})
    assert [p.payload["key"] for p in notes] == ["a3"]
    assert await store.count(PAGES, "alice", where={"kind": []}) == 0


async def test_an_int_flag_matches_on_every_engine_and_a_missing_field_matches_nothing(
    store: VectorStore,
) -> None:
    """The filters the code relies on, as the pairing documents use them: a 0/1 flag, a
    keyword beside it, and points that lack the flag."""
    one = [1.0]
    await store.upsert(
        PERSONAS,
        [
            Point(pid("w1"), one, {"user_id": "ann", "kind": "pairing", "waiting": 1}),
            Point(pid("w0"), one, {"user_id": "bob", "kind": "pairing", "waiting": 0}),
            Point(pid("wx"), one, {"user_id": "cat", "kind": "pairing"}),
            Point(pid("p1"), one, {"user_id": "dan", "kind": "persona", "waiting": 1}),
        ],
    )
    waiting = await store.scroll(PERSONAS, None, {"kind": "pairing", "waiting": 1})
    assert [p.payload["user_id"] for p in waiting] == ["ann"]
    assert await store.count(PERSONAS, None, {"kind": "pairing", "waiting": 0}) == 1
    assert await store.count(PERSONAS, None, {"kind": "pairing"}) == 3
    assert await store.count(PERSONAS, None, {"absent": 1}) == 0
    assert await store.count(PERSONAS, None, {"absent": ["x"]}) == 0


async def test_a_boolean_filter_is_refused_with_the_reason(store: VectorStore) -> None:
    """Qdrant Edge 0.9 matches no stored boolean; a read that silently finds nothing is how a
    message nobody answered stayed out of memory, so every adapter refuses the filter."""
    with pytest.raises(StoreError, match=r"boolean.*0 or 1"):
        await store.scroll(PERSONAS, None, {"waiting": True})
    with pytest.raises(StoreError, match="boolean"):
        await store.count(PAGES, "alice", {"waiting": False})


async def test_a_users_flagged_documents_are_found_on_every_engine(store: VectorStore) -> None:
    """Data keys (crypto-shredding) and dead-letter rings are found by a flag: once a boolean,
    which Qdrant Edge never matched, so a stale key outlived its DELETE there."""
    repo = MemoryRepository(store)
    await repo.save_doc("ann", "data_key:1", {"gen": 1}, data_key=1)
    await repo.save_doc("ann", "data_key:0", {"gen": 0}, data_key=True)  # an older version's
    await repo.save_doc("ann", "persona", {"traits": {}})
    await repo.save_doc("bob", "data_key:1", {"gen": 1}, data_key=1)
    found = await repo.flagged_docs("ann", "data_key")
    assert sorted(doc_data(point.payload)["gen"] for point in found) == [0, 1]


async def test_retrieve_scroll_count(store: VectorStore) -> None:
    await seed(store)
    unknown = pid("nobody")
    got = await store.retrieve(PAGES, [pid("a3"), unknown, pid("b1")])
    assert [p.id for p in got] == [pid("a3"), pid("b1")]
    assert got[0].vector == []
    assert got[0].payload["topic"] == "food"
    with_vectors = await store.retrieve(PAGES, [pid("a2")], with_vectors=True)
    assert with_vectors[0].vector == pytest.approx([0.8, 0.6, 0.0, 0.0], abs=1e-6)
    assert await store.retrieve(PAGES, []) == []
    scrolled = await store.scroll(PAGES, "alice", with_vectors=True)
    assert {p.payload["key"] for p in scrolled} == {"a1", "a2", "a3"}
    assert all(len(p.vector) == DIM for p in scrolled)
    assert await store.count(PAGES, "alice") == 3
    assert await store.count(PAGES, "bob") == 1
    assert await store.count(PAGES) == 4
    assert await store.count(SEGMENTS) == 0


async def test_scroll_pages_through_many_points(store: VectorStore) -> None:
    points = [point(f"m{i}", "many", [1.0, i / 300, 0.0, 0.0]) for i in range(300)]
    await store.upsert(SEGMENTS, points)
    scrolled = await store.scroll(SEGMENTS, "many")
    assert sorted(p.id for p in scrolled) == sorted(p.id for p in points)


async def test_delete_and_delete_user(store: VectorStore) -> None:
    await seed(store)
    await store.delete(PAGES, [pid("a2"), pid("never-stored")])
    assert await store.count(PAGES, "alice") == 2
    assert await store.retrieve(PAGES, [pid("a2")]) == []
    assert await store.delete_user(PAGES, "alice") == 2
    assert await store.delete_user(PAGES, "alice") == 0
    assert await store.count(PAGES, "alice") == 0
    assert await store.count(PAGES, "bob") == 1
    await store.delete(PAGES, [])


async def test_reupsert_is_idempotent_and_replaces_payload(store: VectorStore) -> None:
    await seed(store)
    await store.upsert(PAGES, [Point(pid("a1"), [0.0, 0.0, 1.0, 0.0], {"user_id": "alice"})])
    assert await store.count(PAGES) == 4
    (again,) = await store.retrieve(PAGES, [pid("a1")], with_vectors=True)
    assert again.payload == {"user_id": "alice"}
    assert again.vector == pytest.approx([0.0, 0.0, 1.0, 0.0])


async def test_set_fields_changes_those_fields_only_and_never_brings_a_point_back(
    store: VectorStore,
) -> None:
    await seed(store)
    await store.delete(PAGES, [pid("a2")])
    fields = {"topic": "moved", "n": [1], "kind": None}  # None: the field goes
    await store.set_fields(PAGES, [pid("a1"), pid("a2"), pid("b1")], fields)
    a1, b1 = await store.retrieve(PAGES, [pid("a1"), pid("b1")], with_vectors=True)
    assert a1.payload == {"user_id": "alice", "key": "a1", "topic": "moved", "n": [1]}
    assert a1.vector == pytest.approx([1.0, 0.0, 0.0, 0.0]), "the vector is kept"
    assert b1.payload["topic"] == "moved"
    assert await store.retrieve(PAGES, [pid("a2")]) == [], "a deleted point stays deleted"
    assert [
        h.payload["key"]
        for h in await store.search(PAGES, "alice", [1, 0, 0, 0], 5, where={"topic": "moved"})
    ] == ["a1"]
    await store.set_fields(PAGES, [], {"topic": "x"})  # nothing to change: nothing asked
    with pytest.raises(StoreError, match="owner"):
        await store.set_fields(PAGES, [pid("a1")], {"user_id": "bob"})
    with pytest.raises(UnstorablePayload, match="cannot be stored"):
        await store.set_fields(PAGES, [pid("a1")], {"x": float("nan")})
    with pytest.raises(StoreError, match="uuid"):
        await store.set_fields(PAGES, ["not-a-uuid"], {"topic": "x"})


async def test_hybrid_search_finds_the_exact_word(store: VectorStore) -> None:
    word, other = 1234567, 89
    points = [
        point(f"n{i}", "alice", [1.0, 0.1 * i, 0.0, 0.0], sparse={other: 1.0}) for i in range(6)
    ]
    points.append(point("exact", "alice", [0.0, 0.0, 1.0, 0.0], sparse={word: 1.0, other: 1.0}))
    points.append(point("bob", "bob", [1.0, 0.0, 0.0, 0.0], sparse={word: 2.0}))
    await store.upsert(USER_KNOWLEDGE, points)
    query = [1.0, 0.0, 0.0, 0.0]
    dense = await store.search(USER_KNOWLEDGE, "alice", query, limit=10)
    assert dense[-1].payload["key"] == "exact"
    hybrid = await store.search(USER_KNOWLEDGE, "alice", query, limit=3, sparse={word: 1.0})
    assert hybrid[0].payload["key"] == "exact"
    assert {hit.payload["key"] for hit in hybrid} <= {f"n{i}" for i in range(6)} | {"exact"}
    # the engines' RRF: 1/(k + rank) per list, rank from 0, k = 60
    assert hybrid[0].score == pytest.approx(1 / 60 + 1 / 66, rel=1e-4)
    # an empty sparse vector (a query of stopwords) is a plain dense search
    assert await store.search(USER_KNOWLEDGE, "alice", query, 10, sparse={}) == dense


async def test_lexical_only_search(store: VectorStore) -> None:
    await store.upsert(
        AGENT_TRAITS,
        [
            point("t1", "alice", [1.0, 0.0, 0.0, 0.0], sparse={7: 1.0}),
            point("t2", "alice", [1.0, 0.0, 0.0, 0.0], sparse={8: 1.0}),
        ],
    )
    search = store.search  # an adapter extension, not part of the port
    hits = await search(AGENT_TRAITS, "alice", [], 10, sparse={8: 1.0}, lexical_only=True)  # type: ignore[call-arg]
    assert [hit.payload["key"] for hit in hits] == ["t2"]


async def test_bad_input_is_refused(store: VectorStore) -> None:
    with pytest.raises(StoreError, match="size 3"):
        await store.upsert(PAGES, [point("x", "alice", [1.0, 0.0, 0.0])])
    with pytest.raises(StoreError, match="user_id"):
        await store.upsert(PAGES, [Point(pid("x"), [1.0, 0.0, 0.0, 0.0], {})])
    with pytest.raises(StoreError, match="uuid"):
        await store.upsert(PAGES, [Point("page-1", [1.0, 0.0, 0.0, 0.0], {"user_id": "a"})])
    with pytest.raises(StoreError, match="no lexical"):
        await store.upsert(SEGMENTS, [point("s", "alice", [1.0, 0.0, 0.0, 0.0], sparse={1: 1.0})])
    with pytest.raises(StoreError, match="no lexical"):
        await store.search(SEGMENTS, "alice", [1.0, 0.0, 0.0, 0.0], 5, sparse={1: 1.0})
    with pytest.raises(StoreError, match="unknown collection"):
        await store.count("nope")
    with pytest.raises(StoreError, match="user_id"):
        await store.search(PAGES, "", [1.0, 0.0, 0.0, 0.0], 5)
    await store.upsert(PERSONAS, [point("p", "alice", [1.0] * PERSONA_DIM, profile="x")])
    assert await store.count(PERSONAS, "alice") == 1


async def test_persists_across_close_and_reopen(make_store: StoreFactory) -> None:
    if make_store.kind not in ON_DISK:  # type: ignore[attr-defined]
        pytest.skip("in-memory store")
    first = make_store()
    await first.ensure_collections(DIM)
    await seed(first)
    await first.upsert(PAGES, [point("w", "alice", [0.0, 0.0, 0.0, 1.0], sparse={5: 1.0})])
    await first.delete(PAGES, [pid("a3")])
    await first.close()
    second = make_store()
    await second.ensure_collections(DIM)
    assert await second.count(PAGES, "alice") == 3
    hits = await second.search(PAGES, "alice", [0.0, 0.0, 0.0, 1.0], 1, sparse={5: 1.0})
    assert hits[0].id == pid("w")
    await second.close()
    third = make_store()
    with pytest.raises(StoreError, match="size"):
        await third.ensure_collections(DIM + 1)
    await third.close()


async def test_edge_folder_is_locked_to_one_store(tmp_path: Path) -> None:
    first = EdgeStore(tmp_path)
    await first.ensure_collections(DIM)
    second = EdgeStore(tmp_path)
    with pytest.raises(StoreError, match="in use"):
        await second.ensure_collections(DIM)
    await first.close()
    await second.ensure_collections(DIM)  # free again once the first is closed
    await second.close()


async def test_edge_writes_survive_a_killed_process(tmp_path: Path) -> None:
    script = f"""
import asyncio, os
from adapters.ports import PAGES, Point
from adapters.stores.edge import EdgeStore

async def main():
    store = EdgeStore({str(tmp_path)!r})
    await store.ensure_collections({DIM})
    await store.upsert(PAGES, [Point({pid("k")!r}, [1.0, 0, 0, 0], {{"user_id": "u"}})])
    os._exit(0)  # no flush, no close: only the write-ahead log has the point

asyncio.run(main())
"""
    child = await asyncio.create_subprocess_exec(sys.executable, "-c", script, cwd=ROOT)
    assert await asyncio.wait_for(child.wait(), timeout=60) == 0
    store = EdgeStore(tmp_path)
    await store.ensure_collections(DIM)
    assert [p.id for p in await store.retrieve(PAGES, [pid("k")])] == [pid("k")]
    await store.close()


async def test_store_refuses_calls_before_ensure_and_after_close(tmp_path: Path) -> None:
    store = EdgeStore(tmp_path)
    with pytest.raises(StoreError, match="ensure_collections"):
        await store.count(PAGES)
    await store.ensure_collections(DIM)
    await store.ensure_collections(DIM)  # twice is fine
    await store.close()
    await store.close()
    with pytest.raises(StoreError, match="ensure_collections"):
        await store.search(PAGES, "u", [1.0, 0.0, 0.0, 0.0], 1)


async def test_edge_flushes_as_it_goes(tmp_path: Path) -> None:
    store = EdgeStore(tmp_path, flush_interval_s=0.0)  # flush after every write
    await store.ensure_collections(DIM)
    await seed(store)
    await store.delete(PAGES, [pid("a1")])
    assert await store.delete_user(PAGES, "alice") == 2
    await store.close()
    reopened = EdgeStore(tmp_path)
    await reopened.ensure_collections(DIM)
    assert await reopened.count(PAGES) == 1
    await reopened.close()


def test_build_store_follows_settings(tmp_path: Path) -> None:
    edge = build_store(Settings(store="edge", data_dir=tmp_path))
    assert isinstance(edge, EdgeStore)
    assert edge.name == "edge"
    qdrant = build_store(Settings(store="qdrant", qdrant_url=":memory:"))
    assert isinstance(qdrant, QdrantStore)
    assert qdrant.name == "qdrant"


@pytest.mark.parametrize(
    "bad",
    [{"deep": {"a": {"a": {"a": {}}}}}, {"x": float("inf")}],
    ids=["deep", "infinite"],
)
async def test_every_adapter_refuses_a_payload_it_could_not_read_back(
    store: VectorStore, bad: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("adapters.stores.common.MAX_PAYLOAD_DEPTH", 3)  # a small limit, same rule
    with pytest.raises(UnstorablePayload, match=f"point {pid('x1')}"):
        await store.upsert(PAGES, [point("x1", "alice", [1.0, 0.0, 0.0, 0.0], **bad)])
    assert await store.count(PAGES) == 0


async def test_a_vacuum_keeps_every_live_point_as_it_was(store: VectorStore) -> None:
    """After overwrites and deletes: the same points, payloads and nearest order."""
    await seed(store)
    for round_ in range(3):  # overwritten versions, as a page changing tier leaves them
        await store.upsert(PAGES, [point("a1", "alice", [1.0, 0.0, 0.0, 0.0], round=round_)])
    await store.delete(PAGES, [pid("a3")])
    before = await store.scroll(PAGES, "alice")
    nearest = [h.id for h in await store.search(PAGES, "alice", [1.0, 0.1, 0.0, 0.0], 5)]
    assert await store.vacuum() >= 0
    assert await store.scroll(PAGES, "alice") == before
    assert [h.id for h in await store.search(PAGES, "alice", [1.0, 0.1, 0.0, 0.0], 5)] == nearest
    assert await store.count(PAGES, "bob") == 1


async def test_scoped_searches_filter_in_the_store_before_the_limit(store: VectorStore) -> None:
    """A retrieve's filters (channel, conversation, time range, a meta key) are conditions of
    the search itself: the nearest points are all of the other channel, yet a search scoped to
    this one still returns ``limit`` points, each matching; dense, hybrid and lexical alike."""
    points = [
        point(
            f"p{n}",
            "alice",
            [1.0, 0.0, 0.0, 0.0] if n % 2 else [0.6, 0.8, 0.0, 0.0],  # sms nearest the query
            channel="sms" if n % 2 else "web",
            conversation_id=f"c{n % 3}",
            ts=1_000.0 + n,
            meta={"order_id": f"o{n % 4}"},
            sparse={7: 1.0},
        )
        for n in range(12)
    ]
    await store.upsert(PAGES, points)
    query = [1.0, 0.0, 0.0, 0.0]
    for extra in ({}, {"sparse": {7: 1.0}}, {"sparse": {7: 1.0}, "lexical_only": True}):
        web = await store.search(PAGES, "alice", query, 3, where={"channel": "web"}, **extra)  # type: ignore[arg-type]
        assert [hit.payload["channel"] for hit in web] == ["web"] * 3, extra
    spans = await store.search(PAGES, "alice", query, 10, where={"ts": Between(1_004.0, 1_008.0)})
    assert sorted(hit.payload["ts"] for hit in spans) == [1_004.0, 1_005.0, 1_006.0, 1_007.0]
    after = await store.scroll(PAGES, "alice", {"ts": Between(gte=1_010.0)})
    assert sorted(p.payload["ts"] for p in after) == [1_010.0, 1_011.0]
    both = await store.search(
        PAGES, "alice", query, 10, where={"conversation_id": "c1", "meta.order_id": "o1"}
    )
    assert [hit.payload["key"] for hit in both] == ["p1"]  # c1 and o1: 1, not 4, 7, 10 nor 5, 9
    many = await store.count(PAGES, "alice", {"channel": ["web", "sms"], "ts": Between(lt=1_002.0)})
    assert many == 2
    with pytest.raises(StoreError):
        await store.search(PAGES, "alice", query, 3, where={"ts": Between()})
