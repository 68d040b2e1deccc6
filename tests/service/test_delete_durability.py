"""A DELETE is durable before it is destructive: with the journal's disk full it removes
nothing and says so, and a restart after it brings back nothing that a DELETE removed."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from adapters.journal import SqliteJournal
from schemas.errors import JournalError, StoreError
from schemas.turn import TurnEvent
from service.response import ResponseService
from streams.reconciler import Reconciler
from tests.support.fakes import Pipeline, make_deps
from tests.support.tmpfs import fill_until, mounted_tmpfs


def turn(index: int) -> TurnEvent:
    return TurnEvent(
        user_id="ann",
        turn_id=f"t{index:03d}",
        query=f"My order number {index} is late. " + "It was a gift for my sister. " * 40,
        response=f"Order {index} noted.",
        timestamp=datetime.fromtimestamp(1_700_000_000 + index * 60, UTC),
    )


async def stored(pipeline: Pipeline) -> list[str]:
    points = await pipeline.deps.store.scroll("pages", "ann")
    return sorted(str(p.payload["turn_id"]) for p in points)


async def test_a_delete_whose_journal_write_fails_removes_nothing_and_a_restart_keeps_it_so(
    tmp_path: Path,
) -> None:
    with mounted_tmpfs(tmp_path / "disk", 16) as disk:
        pipeline = Pipeline(await make_deps(stm_capacity=3))
        journal = SqliteJournal(disk / "journal.sqlite3")
        service = ResponseService(pipeline.deps, pipeline, journal)
        reconciler = Reconciler(
            pipeline.deps.repo, journal, pipeline.send, clock=pipeline.deps.clock
        )
        service.forget_lock = reconciler.lock
        await service.add_turns([turn(i) for i in range(4)])
        await pipeline.drain()
        # journaled, not yet stored: deleting them needs new log pages on a full disk
        await service.add_turns([turn(i) for i in range(4, 300)])
        filler = fill_until(disk, 0)

        with pytest.raises(JournalError):
            await service.forget("ann")
        assert await stored(pipeline) == [f"t{i:03d}" for i in range(4)]  # nothing removed
        assert await pipeline.deps.repo.tombstone("ann") is None
        assert not await service.forgetting("ann")  # reads are not hidden: no DELETE happened

        pipeline.crash()  # a restart: the broker and the tables forget everything
        await reconciler.start()
        await pipeline.drain()
        assert await stored(pipeline) == [f"t{i:03d}" for i in range(300)]  # as acknowledged

        filler.unlink()  # space again: the DELETE goes through, and for good
        await service.forget("ann")
        pipeline.crash()
        await reconciler.start()
        await pipeline.drain()
        assert await stored(pipeline) == []
        assert await journal.pending() == []
        journal.close()


async def test_a_delete_the_store_fails_part_way_is_completed_by_its_marker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No reconciler re-sends markers on a real Kafka: once the tombstone is written, the
    marker goes out even if deleting failed, and the stages finish the DELETE."""
    pipeline = Pipeline(await make_deps(stm_capacity=3))
    service = ResponseService(pipeline.deps, pipeline)  # no journal, as with Kafka
    await service.add_turns([turn(i) for i in range(6)])
    await pipeline.drain()
    store = pipeline.deps.store
    delete_user = store.delete_user

    async def fails_on_segments(collection: str, user_id: str) -> int:
        if collection == "segments":
            raise StoreError("store unavailable")
        return await delete_user(collection, user_id)

    monkeypatch.setattr(store, "delete_user", fails_on_segments)
    with pytest.raises(StoreError):
        await service.forget("ann")
    monkeypatch.setattr(store, "delete_user", delete_user)  # the store is back
    assert await service.forgetting("ann")  # reads show nothing meanwhile
    await pipeline.drain()
    assert await stored(pipeline) == []
    assert await pipeline.deps.store.count("segments", "ann") == 0
    assert not await service.forgetting("ann")  # the last stage closed the DELETE
