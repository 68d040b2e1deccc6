"""Per-user documents are stored as one JSON string; documents of earlier versions still read."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from adapters.doc_codec import doc_data
from adapters.ports import PERSONA_DIM, PERSONAS, Point
from adapters.repository import HEAT_DOC, TOMBSTONE_DOC, MemoryRepository
from adapters.stores.edge import EdgeStore
from memory import ids
from schemas.errors import StoreError
from schemas.records import Persona


@pytest.fixture
async def repo(tmp_path: Path) -> AsyncIterator[MemoryRepository]:
    store = EdgeStore(tmp_path / "qdrant")
    await store.ensure_collections(4)
    yield MemoryRepository(store)
    await store.close()


async def test_a_document_is_stored_as_one_json_string(repo: MemoryRepository) -> None:
    heat = {"segments": {"s1": {"page_ids": ["p1", "p2"], "n_visit": 3}}, "clock": 1.5}
    await repo.save_doc("alice", HEAT_DOC, heat)
    (stored,) = await repo.store.retrieve(PERSONAS, [ids.point_id("alice", "doc", HEAT_DOC)])
    assert isinstance(stored.payload["data"], str)
    assert await repo.load_doc("alice", HEAT_DOC) == heat


async def test_a_document_written_nested_by_an_earlier_version_still_reads(
    repo: MemoryRepository,
) -> None:
    old = Point(
        ids.point_id("bob", "doc", TOMBSTONE_DOC),
        [1.0] * PERSONA_DIM,
        {"user_id": "bob", "kind": TOMBSTONE_DOC, "data": {"deleted_at": 12.0}},
    )
    await repo.store.upsert(PERSONAS, [old])
    assert await repo.load_doc("bob", TOMBSTONE_DOC) == {"deleted_at": 12.0}
    assert await repo.tombstone("bob") == (12.0, True)


@pytest.mark.parametrize("data", ["not json", "[1, 2]", 7, None])
def test_a_document_that_is_not_an_object_is_a_store_error(data: object) -> None:
    with pytest.raises(StoreError, match="document"):
        doc_data({"data": data})


async def test_several_documents_come_in_one_read_in_the_order_asked(
    repo: MemoryRepository, monkeypatch: pytest.MonkeyPatch
) -> None:
    await repo.save_doc("alice", HEAT_DOC, {"clock": 1.0})
    await repo.save_profile("alice", {"name": "Alice"})
    await repo.save_assistant_profile("support", {"tone": "calm"})
    reads: list[int] = []
    real = repo.store.retrieve

    async def counted(collection: str, point_ids: Any, with_vectors: bool = False) -> Any:
        reads.append(len(point_ids))
        return await real(collection, point_ids, with_vectors)

    monkeypatch.setattr(repo.store, "retrieve", counted)
    keys = [("alice", "profile"), ("bob", HEAT_DOC), ("alice", HEAT_DOC), ("alice", "profile")]
    assert await repo.load_docs(keys) == [
        {"name": "Alice"},
        None,
        {"clock": 1.0},
        {"name": "Alice"},
    ]
    persona, stated, agent = await repo.load_persona_view("alice", "support")
    assert (persona.user_id, stated, agent) == ("alice", {"name": "Alice"}, {"tone": "calm"})
    assert await repo.load_persona_view("bob", None) == (Persona(user_id="bob"), {}, {})
    assert reads == [4, 3, 3], "one read for the documents, each time"
