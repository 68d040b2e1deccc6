"""Crypto-shredding over the stages with fakes: what our topics and tables carry is sealed with
the user's data key, and a DELETE leaves every copy unreadable (adapters/keyring.py)."""

from __future__ import annotations

import base64
import time
from pathlib import Path

import pytest

from adapters import keyring as keyring_module
from adapters.keyring import Keyring, generation, is_sealed
from schemas.codec import dumps
from schemas.errors import InvalidEvent, StoreError
from schemas.topics import DLQ, MESSAGES, MTM, PAGES, PERSONA, TURNS
from tests.support.builders import msg
from tests.support.fakes import FakeLLM, Pipeline, make_deps
from tests.support.pipelines import ingest, service_for

pytestmark = pytest.mark.asyncio

SECRET = b"Zanzibar marmalade"


@pytest.fixture
async def pipeline() -> Pipeline:
    # The LLM at every stage, continuity included: a test fails its calls.
    return Pipeline(await make_deps(stm_capacity=2, continuity_llm="always"))


async def test_sealed_records_open_only_for_their_user_and_generation(
    pipeline: Pipeline,
) -> None:
    keyring = pipeline.deps.keyring
    sealed = await keyring.seal("ann", 0, SECRET)
    assert sealed is not None
    assert SECRET not in sealed
    opened = await Keyring(pipeline.deps.repo).open(sealed)  # a fresh process: from the store
    assert opened is not None
    assert (opened.user_id, opened.gen, opened.plain) == ("ann", 0, SECRET)
    # The header is authenticated: relabelled for another user, it does not open.
    relabelled = sealed.replace(b"ann", b"bob", 1)
    await keyring.seal("bob", 0, b"bob's own")  # bob has a key, just not this one
    with pytest.raises(InvalidEvent, match="authentication"):
        await keyring.open(relabelled)
    with pytest.raises(InvalidEvent, match="truncated"):
        await keyring.open(sealed[:30])


async def test_delete_destroys_the_key_and_none_is_made_again_for_older_data(
    pipeline: Pipeline,
) -> None:
    keyring = pipeline.deps.keyring
    sealed = await keyring.seal("ann", 0, SECRET)
    assert sealed is not None
    at = 1_700_000_100.0
    await pipeline.deps.repo.forget_user("ann", at)
    assert await Keyring(pipeline.deps.repo).open(sealed) is None
    # Data from before the DELETE never gets a key again; data after it does.
    assert await Keyring(pipeline.deps.repo).seal("ann", 0, SECRET) is None
    assert await Keyring(pipeline.deps.repo).current("ann") < generation(at)  # still open
    assert await Keyring(pipeline.deps.repo).seal("ann", generation(at), b"later") is not None


def sealed_values(pipeline: Pipeline) -> list[bytes]:
    """Every record of our topics and every table value: what the broker would keep."""
    values = [s.value for topic in (PAGES, MTM, PERSONA, DLQ) for s in pipeline.topics[topic]]
    for table in pipeline.tables.values():
        for value in table.values():
            if isinstance(value, str):
                values.append(base64.b64decode(value))
            elif isinstance(value, dict) and isinstance(value.get("tail"), str):
                values.append(base64.b64decode(value["tail"]))
    return values


async def test_no_plain_text_in_our_topics_or_tables_and_none_readable_after_delete(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    service = await service_for(pipeline, tmp_path)
    await ingest(pipeline, "ann", 6)  # capacity 2: pages leave STM, segments, persona jobs
    await pipeline.send(TURNS, b"ann", b'{"user_id": "ann", "query": "Zanzibar marmalade"}')
    waiting = msg(1, "user", "Zanzibar marmalade, and my parcel?", "wa-1", "whatsapp")
    await pipeline.send(MESSAGES, b"ann", dumps(waiting))  # waits in the pairing table
    await pipeline.drain()
    assert pipeline.tables["pairing"]["ann"]
    assert pipeline.dead_letters(), "the malformed turn is dead-lettered"
    values = sealed_values(pipeline)
    texts = [b"" + s.value for s in pipeline.topics[TURNS]]
    assert any(b"Zanzibar" in text for text in texts)  # the public input topic: plain
    assert not any(b"Zanzibar" in value or b"turn 1" in value for value in values)
    with_text = [v for v in values if is_sealed(v)]
    # pages, evicted pages, the tail, the waiting message, the dead letter
    assert len(with_text) >= 6 + 4 + 3
    fresh = Keyring(pipeline.deps.repo)
    assert all([await fresh.open(v) for v in with_text])

    await service.forget("ann")
    await pipeline.drain()
    fresh = Keyring(pipeline.deps.repo)
    assert [await fresh.open(v) for v in with_text] == [None] * len(with_text)
    # A turn after the DELETE is sealed with a key of the new generation, and remembered.
    await ingest(pipeline, "ann", 1, start=50)
    await pipeline.drain()
    [page] = await pipeline.deps.repo.stm_pages("ann")
    assert page.turn_id == "t050"
    latest = pipeline.topics[PAGES][-1].value
    opened = await Keyring(pipeline.deps.repo).open(latest)
    assert opened is not None
    assert b"t050" in opened.plain
    assert opened.gen == await fresh.latest("ann") > 0


async def test_pre_delete_work_reaching_a_stage_after_the_delete_is_dropped_not_resealed(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    """A stage whose process restarted (no cached key) meets a turn from before a DELETE
    whose marker is still behind it: the key is gone and no new one is made for it."""
    service = await service_for(pipeline, tmp_path)
    await ingest(pipeline, "ann", 2)
    await pipeline.drain(until=TURNS)  # pages sealed, not yet consumed by STM
    await service.forget("ann")
    pipeline.deps.keyring.forget("ann")  # the process restarted: its cache is empty
    pending = [s.value for s in pipeline.pending(PAGES) if is_sealed(s.value)]
    assert pending
    await pipeline.drain()
    assert await pipeline.deps.repo.count_user("ann") == dict.fromkeys(
        ["short_term", "mid_term_pages", "segments", "user_knowledge", "agent_traits"], 0
    )
    assert pipeline.deps.metrics.events.labels(stage="stm", outcome="forgotten")._value.get() > 0
    assert [await Keyring(pipeline.deps.repo).open(v) for v in pending] == [None] * len(pending)


async def test_a_key_made_while_its_delete_ran_is_destroyed_when_the_marker_passes(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    """The race: a stage read no tombstone, the DELETE purged the documents, then the stage
    stored a key for the old generation. The last stage's pass of the marker ends it."""
    service = await service_for(pipeline, tmp_path)
    await ingest(pipeline, "ann", 1)
    await pipeline.drain()
    await service.forget("ann")
    stale = {"gen": 0, "key": base64.b64encode(b"k" * 32).decode()}
    await pipeline.deps.repo.save_doc("ann", "data_key:0", stale, data_key=True)
    assert await pipeline.deps.repo.load_doc("ann", "data_key:0") is not None
    await pipeline.drain()
    assert await pipeline.deps.repo.load_doc("ann", "data_key:0") is None


async def test_a_sealed_dead_letter_replays_until_its_user_is_deleted(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    """`memoryos dlq replay` sends a sealed letter back as it is: the stage opens it. After a
    DELETE the same bytes open no more, so a replay cannot bring the user back."""
    service = await service_for(pipeline, tmp_path)
    llm = pipeline.deps.llm
    assert isinstance(llm, FakeLLM)

    async def down(task: str) -> None:
        raise OSError("llm down")

    llm.hook = down
    await ingest(pipeline, "ann", 1)
    await pipeline.drain()
    [dead] = pipeline.dead_letters()
    assert is_sealed(dead.value)
    llm.hook = None
    await pipeline.send(TURNS, b"ann", dead.value)
    await pipeline.drain()
    assert [p.turn_id for p in await pipeline.deps.repo.stm_pages("ann")] == ["t000"]

    await service.forget("ann")
    await pipeline.drain()
    await pipeline.send(TURNS, b"ann", dead.value)
    await pipeline.drain()
    assert await pipeline.deps.repo.stm_pages("ann") == []
    assert pipeline.deps.metrics.events.labels(stage="chain", outcome="forgotten")._value.get() == 1


async def test_a_store_error_while_sealing_a_dead_letter_is_retried_not_raised(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sealing a dead letter reads the store; a stage's batch must never raise, so a store
    error there is retried, like the dead letter's write, and the letter still goes out sealed."""
    keyring = pipeline.deps.keyring
    current, failures = keyring.current, [StoreError("qdrant: timed out")]

    async def flaky(user_id: str) -> int:
        if failures:
            raise failures.pop()
        return await current(user_id)

    monkeypatch.setattr(keyring, "current", flaky)
    await pipeline.send(TURNS, b"ann", b'{"user_id": "ann", "query": "Zanzibar marmalade"}')
    await ingest(pipeline, "ann", 1, start=5)
    await pipeline.drain()  # raises if a stage's process() raised
    [dead] = pipeline.dead_letters()
    assert not failures
    assert is_sealed(dead.value)
    assert [p.turn_id for p in await pipeline.deps.repo.stm_pages("ann")] == ["t005"]


async def test_a_key_cached_by_another_process_expires_after_its_delete(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that never sees the DELETE's marker (another process, a lost partition) may
    use its cached key only until the cache entry expires; then the store says it is gone."""
    other = Keyring(pipeline.deps.repo)
    sealed = await other.seal("ann", 0, SECRET)
    assert sealed is not None
    await pipeline.deps.repo.forget_user("ann", 1_700_000_100.0)
    assert await other.open(sealed) is not None  # within the TTL: the documented window
    later = time.monotonic() + keyring_module.CACHE_TTL_S + 1
    monkeypatch.setattr(keyring_module, "_now", lambda: later)
    assert await other.open(sealed) is None
