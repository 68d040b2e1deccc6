"""Qdrant Edge and payloads it cannot read back.

First what Edge itself does with a deeply nested payload (the reason for the guard), then that
EdgeStore refuses such a payload, names the point, and keeps serving everyone else.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
import qdrant_edge as qe

from adapters.ports import PAGES, Point
from adapters.stores.common import MAX_PAYLOAD_DEPTH
from adapters.stores.edge import EdgeStore
from schemas.errors import StoreError, UnstorablePayload
from tests.support.builders import EDGE_DIM, EDGE_VECTOR, edge_config, nested, point
from tests.support.paths import ROOT

BROKEN_DEPTH = 127  # a meta depth that broke Edge: 128 levels counting the payload


def run(code: str) -> None:
    """Run ``code`` in a child that dies without closing anything, as a killed process would."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    script = textwrap.dedent(code) + "\nimport os\nos._exit(0)\n"
    subprocess.run([sys.executable, "-c", script], check=True, env=env, cwd=ROOT, timeout=120)


def test_edge_cannot_read_back_a_payload_it_accepted(tmp_path: Path) -> None:
    shard = qe.EdgeShard.create(str(tmp_path / "shard"), edge_config())
    deep = str(uuid.uuid4())
    payload = {"user_id": "u", "meta": nested(BROKEN_DEPTH)}
    shard.update(
        qe.UpdateOperation.upsert_points([qe.Point(deep, {"dense": EDGE_VECTOR}, payload)])
    )
    with pytest.raises(Exception, match="recursion limit"):
        shard.retrieve([deep], True, False)
    # a payload update of that point fails, and from then on the shard refuses every write
    with pytest.raises(Exception, match="recursion limit"):
        shard.update(qe.UpdateOperation.set_payload([deep], {"tier": "mtm"}))
    other = qe.Point(str(uuid.uuid4()), {"dense": EDGE_VECTOR}, {"user_id": "v"})
    with pytest.raises(Exception, match="Not recovered from previous error"):
        shard.update(qe.UpdateOperation.upsert_points([other]))
    shard.close()


def test_edge_cannot_open_a_shard_whose_wal_holds_such_a_payload(tmp_path: Path) -> None:
    path = tmp_path / "shard"
    run(f"""
        import uuid, qdrant_edge as qe
        from tests.support.builders import EDGE_VECTOR, edge_config, nested
        shard = qe.EdgeShard.create({str(path)!r}, edge_config())
        payload = {{"user_id": "u", "meta": nested({BROKEN_DEPTH})}}
        point = qe.Point(str(uuid.uuid4()), {{"dense": EDGE_VECTOR}}, payload)
        shard.update(qe.UpdateOperation.upsert_points([point]))
    """)
    with pytest.raises(Exception, match="RecursionLimitExceeded"):
        qe.EdgeShard.load(str(path), edge_config())


async def test_the_store_refuses_it_naming_the_point_and_keeps_serving(tmp_path: Path) -> None:
    store = EdgeStore(tmp_path / "qdrant")
    await store.ensure_collections(EDGE_DIM)
    deep = point("mallory", "t1", nested(BROKEN_DEPTH))
    with pytest.raises(UnstorablePayload, match=f"pages: point {deep.id} .*deeper than") as info:
        await store.upsert(PAGES, [point("alice", "t1", {}), deep])
    assert isinstance(info.value, StoreError)
    assert info.value.field == "payload"
    await store.upsert(PAGES, [point("alice", "t2", {"ok": True})])
    assert [p.payload["turn_id"] for p in await store.scroll(PAGES, "alice")] == ["t2"]
    await store.close()
    reopened = EdgeStore(tmp_path / "qdrant")
    await reopened.ensure_collections(EDGE_DIM)
    assert await reopened.count(PAGES) == 1
    await reopened.close()


@pytest.mark.parametrize(
    ("meta", "reason"),
    [
        ({"x": float("nan")}, "NaN and Infinity"),
        ({"x": "y" * 1_100_000}, "bytes as JSON"),
        ({"x": {1, 2}}, "not a JSON value"),
    ],
)
async def test_non_json_or_huge_payloads_are_refused(
    tmp_path: Path, meta: dict[str, Any], reason: str
) -> None:
    store = EdgeStore(tmp_path / "qdrant")
    await store.ensure_collections(EDGE_DIM)
    with pytest.raises(UnstorablePayload, match=reason):
        await store.upsert(PAGES, [point("alice", "t1", meta)])
    await store.close()


def test_a_payload_at_the_limit_survives_a_kill_and_reads_back(tmp_path: Path) -> None:
    # The guard's depth must be one Edge can replay from its WAL, not only read in-process.
    folder = tmp_path / "qdrant"
    meta = nested(MAX_PAYLOAD_DEPTH - 1)  # the payload object is one more level
    run(f"""
        import asyncio
        from adapters.ports import PAGES
        from adapters.stores.edge import EdgeStore
        from tests.support.builders import EDGE_DIM, nested, point

        async def main():
            store = EdgeStore({str(folder)!r})
            await store.ensure_collections(EDGE_DIM)
            await store.upsert(PAGES, [point("alice", "t1", nested({MAX_PAYLOAD_DEPTH - 1}))])

        asyncio.run(main())
    """)

    async def read() -> list[Point]:
        store = EdgeStore(folder)
        await store.ensure_collections(EDGE_DIM)
        try:
            return await store.scroll(PAGES, "alice")
        finally:
            await store.close()

    [stored] = asyncio.run(read())
    assert stored.payload["meta"] == meta


def test_a_store_edge_cannot_open_is_reported_as_such(tmp_path: Path) -> None:
    # Edge replays the WAL inside load() with no way to skip an entry: no quarantine possible.
    folder = tmp_path / "qdrant"
    run(f"""
        import asyncio, uuid, qdrant_edge as qe
        from adapters.ports import PAGES
        from adapters.stores.edge import EdgeStore
        from tests.support.builders import EDGE_DIM, EDGE_VECTOR, nested

        async def main():
            store = EdgeStore({str(folder)!r})
            await store.ensure_collections(EDGE_DIM)
            payload = {{"user_id": "u", "meta": nested({BROKEN_DEPTH})}}
            point = qe.Point(str(uuid.uuid4()), {{"dense": EDGE_VECTOR}}, payload)
            store._shards[PAGES].update(qe.UpdateOperation.upsert_points([point]))

        asyncio.run(main())
    """)

    store = EdgeStore(folder)
    with pytest.raises(StoreError, match=r"nested too deeply .* re-ingest"):
        asyncio.run(store.ensure_collections(EDGE_DIM))
