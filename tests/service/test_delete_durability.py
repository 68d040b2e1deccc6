"""A DELETE is durable before it is destructive: with the journal's disk full it removes
nothing and says so, a restart after it brings back nothing that a DELETE removed, and a turn
acknowledged while it runs is forgotten too."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from adapters.journal import SqliteJournal
from adapters.stores.edge import EdgeStore
from schemas.errors import JournalError, StoreError
from schemas.topics import TURNS
from schemas.turn import TurnEvent
from service.response import ResponseService
from streams.reconciler import Reconciler
from tests.support.builders import turn
from tests.support.fakes import Pipeline, make_deps
from tests.support.pipelines import stored_turn_ids
from tests.support.tmpfs import fill_until, mounted_tmpfs


def order(index: int) -> TurnEvent:
    """Ann's turn ``index``, long enough that 300 of them fill the journal's disk."""
    return turn(
        "ann",
        index,
        f"My order number {index} is late. " + "It was a gift for my sister. " * 40,
        response=f"Order {index} noted.",
    )


async def test_a_delete_whose_journal_write_fails_removes_nothing_and_a_restart_keeps_it_so(
    tmp_path: Path,
) -> None:
    # The store on Edge, off the full disk: 300 turns on qdrant-client's in-memory store
    # spend a minute in its Python filters.
    store = EdgeStore(tmp_path / "qdrant")
    with mounted_tmpfs(tmp_path / "disk", 16) as disk:
        pipeline = Pipeline(await make_deps(store, stm_capacity=3))
        journal = SqliteJournal(disk / "journal.sqlite3")
        service = ResponseService(pipeline.deps, pipeline, journal)
        reconciler = Reconciler(
            pipeline.deps.repo, journal, pipeline.send, clock=pipeline.deps.clock
        )
        service.forget_lock = reconciler.lock
        await service.add_turns([order(i) for i in range(4)])
        await pipeline.drain()
        # journaled, not yet stored: deleting them needs new log pages on a full disk
        await service.add_turns([order(i) for i in range(4, 300)])
        filler = fill_until(disk, 0)

        with pytest.raises(JournalError):
            await service.forget("ann")
        kept = [f"t{i:03d}" for i in range(4)]
        assert await stored_turn_ids(pipeline, "ann") == kept  # nothing removed
        assert await pipeline.deps.repo.tombstone("ann") is None
        assert not await service.forgetting("ann")  # reads are not hidden: no DELETE happened

        pipeline.crash()  # a restart: the broker and the tables forget everything
        await reconciler.start()
        await pipeline.drain()
        acknowledged = [f"t{i:03d}" for i in range(300)]
        assert await stored_turn_ids(pipeline, "ann") == acknowledged

        filler.unlink()  # space again: the DELETE goes through, and for good
        await service.forget("ann")
        pipeline.crash()
        await reconciler.start()
        await pipeline.drain()
        assert await stored_turn_ids(pipeline, "ann") == []
        assert await journal.pending() == []
        journal.close()
    await store.close()


async def test_a_delete_the_store_fails_part_way_is_completed_by_its_marker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No reconciler re-sends markers on a real Kafka: once the tombstone is written, the
    marker goes out even if deleting failed, and the stages finish the DELETE."""
    pipeline = Pipeline(await make_deps(stm_capacity=3))
    service = ResponseService(pipeline.deps, pipeline)  # no journal, as with Kafka
    await service.add_turns([order(i) for i in range(6)])
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
    assert await stored_turn_ids(pipeline, "ann") == []
    assert await pipeline.deps.store.count("segments", "ann") == 0
    assert not await service.forgetting("ann")  # the last stage closed the DELETE


@pytest.mark.filterwarnings("ignore")
async def test_a_delete_racing_an_acknowledgement_waits_for_it_and_then_wins(
    tmp_path: Path,
) -> None:
    """add_turns and DELETE of one user take the user's lock: a DELETE started while the turn
    is between the journal and the send waits until the turn is sent (behind it goes the
    marker), then forgets it too, with or without a crash. Without the lock the DELETE purged
    the journal entry first: remembered without a crash, gone after one."""
    pipeline = Pipeline(await make_deps())
    racer: asyncio.Task[object] | None = None

    class RacingSink:
        async def send(self, topic: str, key: bytes, value: bytes) -> None:
            nonlocal racer
            if topic == TURNS and racer is None and b'"turn_id":"t100"' in value:
                racer = asyncio.create_task(service.forget("ann"))
                await asyncio.sleep(0.01)  # give the DELETE every chance to run now
            await pipeline.send(topic, key, value)

    service = ResponseService(
        pipeline.deps, RacingSink(), SqliteJournal(tmp_path / "journal.sqlite3")
    )
    await service.add_turns([turn("ann", i) for i in range(3)])
    await pipeline.drain()
    assert await service.add_turns([turn("ann", 100, "after")]) == ["t100"]  # acknowledged
    assert racer is not None
    await racer
    markers = [s for s in pipeline.topics[TURNS] if b'"kind":"forget"' in s.value]
    sent = [s.value for s in pipeline.topics[TURNS]]
    assert sent.index(markers[0].value) > max(i for i, v in enumerate(sent) if b"t100" in v)
    await pipeline.drain(until=TURNS)
    pipeline.crash()
    await Reconciler(pipeline.deps.repo, service.journal, pipeline.send).start()
    await pipeline.drain()
    assert await stored_turn_ids(pipeline, "ann") == []
