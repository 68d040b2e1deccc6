"""What a stage does with a record it meets again (a redelivery, a retry after a partial
failure, a DLQ replay) or meets after a DELETE: nothing is counted twice, nothing is kept for a
dead-lettered record, and nothing a DELETE removed comes back."""

from __future__ import annotations

import dataclasses
import gc
from pathlib import Path
from typing import Any

import pytest

from adapters.ports import SEGMENTS
from adapters.repository import HEAT_DOC, MTM
from memory.chain import ContinuityVerdict
from schemas.codec import dumps
from schemas.errors import LLMQuotaExceeded
from schemas.records import Page
from schemas.topics import MTM as MTM_TOPIC
from schemas.topics import PAGES, TURNS, user_key
from service.response import ResponseService
from streams.reconciler import Reconciler
from tests.support.builders import turn
from tests.support.fakes import FakeLLM, Pipeline, make_deps
from tests.support.pipelines import service_for, stored_turn_ids, tiers

pytestmark = pytest.mark.filterwarnings("ignore")


# A DELETE's data never comes back in a later turn's chain (prev link, seq and LLM summary).


class ContinuingLLM(FakeLLM):
    """An LLM that says every page continues the previous one and folds its summary in."""

    async def continuity(self, previous: Page | None, current: Page) -> ContinuityVerdict:
        await self._enter("continuity")
        if previous is None:
            return ContinuityVerdict(False, current.query[:60])
        return ContinuityVerdict(True, f"{previous.chain.summary} / {current.query[:60]}")


async def test_a_turn_after_a_delete_is_not_chained_to_the_deleted_pages_when_stm_lags(
    tmp_path: Path,
) -> None:
    deps = dataclasses.replace(await make_deps(), llm=ContinuingLLM())
    pipeline = Pipeline(deps)
    service = await service_for(pipeline, tmp_path)
    await service.add_turns([turn("ann", i, f"my secret diagnosis number {i}") for i in range(3)])
    await pipeline.step(TURNS)  # chain linked them; their pages wait on memoryos.pages
    await service.forget("ann")
    await service.add_turns([turn("ann", 100, "A fresh start after deleting everything")])
    await pipeline.step(PAGES)  # the STM stage stores the in-flight pages (before the marker)
    await pipeline.drain()  # the chain takes the marker, then the fresh turn: its tail is a miss
    [page] = await deps.repo.stm_pages("ann")
    assert page.turn_id == "t100"
    assert "secret" not in (page.chain.summary or ""), page.chain.summary
    assert page.chain.prev is None
    assert page.seq == 1


# A forget marker that arrives again (Kafka redelivery, a DLQ replay) purges what came before
# its DELETE, never the turns accepted after it; a completed DELETE's marker changes nothing.


async def test_a_redelivered_marker_keeps_the_turns_accepted_after_its_delete() -> None:
    """Production (Kafka keeps the topic, no journal): a worker that crashed before committing
    re-reads the marker and the turn behind it: the DELETE is complete, so the marker is
    skipped and the turn stays ("replaying any topic changes nothing")."""
    pipeline = Pipeline(await make_deps())
    service = ResponseService(pipeline.deps, pipeline)  # Kafka acks=all: NoJournal
    await service.add_turns([turn("ann", i) for i in range(4)])
    await pipeline.drain()
    await service.forget("ann")
    marker_offset = len(pipeline.topics[TURNS]) - 1
    await service.add_turns([turn("ann", 100, "Remember my new address please")])
    await pipeline.drain()
    assert [p.turn_id for p in await pipeline.deps.repo.stm_pages("ann")] == ["t100"]
    pipeline.offsets[TURNS] = marker_offset  # uncommitted offsets are delivered again
    await pipeline.drain()
    assert [p.turn_id for p in await pipeline.deps.repo.stm_pages("ann")] == ["t100"]


async def test_a_dlq_replay_of_a_completed_deletes_marker_keeps_newer_mid_term_memory(
    tmp_path: Path,
) -> None:
    """A marker exhausted at the MTM stage (store briefly down) goes to the DLQ; the reconciler
    completes the DELETE meanwhile. When the operator later runs `memoryos dlq replay`, the
    marker goes straight back to memoryos.mtm: the stage sees its DELETE is complete and
    skips it, so what the user built since stays."""
    pipeline = Pipeline(await make_deps())
    service = await service_for(pipeline, tmp_path)
    repo = pipeline.deps.repo
    await service.add_turns([turn("ann", i) for i in range(5)])
    await pipeline.drain()
    await service.forget("ann")
    original = repo.purge_mid_term

    async def down(user_id: str) -> None:
        raise OSError("store unavailable")

    repo.purge_mid_term = down  # type: ignore[method-assign]
    await pipeline.drain()
    [dead] = [d for d in pipeline.dead_letters() if d.headers["stage"] == b"mtm"]
    repo.purge_mid_term = original  # type: ignore[method-assign]
    reconciler = Reconciler(repo, service.journal, pipeline.send)
    await reconciler.run_pass()
    await reconciler.run_pass()  # the open tombstone's marker is re-sent and now passes
    await pipeline.drain()
    tombstone = await repo.tombstone("ann")
    assert tombstone is not None
    assert not tombstone[1], "the DELETE is complete"
    await service.add_turns([turn("ann", 100 + i) for i in range(6)])
    await pipeline.drain()
    before = await tiers(pipeline, "ann")
    assert before[MTM] == 3
    await pipeline.send(dead.headers["source-topic"].decode(), dead.key, dead.value)  # replay
    await pipeline.drain()
    assert await tiers(pipeline, "ann") == before


# A second EvictedPage for a page whose segment was already evicted (a replay of memoryos.mtm,
# or the reconciler's copy of a `leaving` page while the MTM stage lags) saves no segment point
# that no state tracks.


async def test_replaying_the_mtm_topic_after_an_eviction_leaves_no_untracked_segment() -> None:
    pipeline = Pipeline(await make_deps(mtm_capacity=1, theta=2.0))  # one segment per page
    for index in range(6):
        await pipeline.send(TURNS, user_key("ann"), dumps(turn("ann", index)))
    await pipeline.drain()
    live = {s.id for s in await pipeline.deps.store.scroll(SEGMENTS, "ann")}
    assert len(live) == 1
    pipeline.offsets[MTM_TOPIC] = 0  # "replaying any topic changes nothing"
    await pipeline.drain()
    state = await pipeline.deps.repo.load_doc("ann", HEAT_DOC)
    assert state is not None
    segments = {s.id for s in await pipeline.deps.store.scroll(SEGMENTS, "ann")}
    assert segments == set(state["segments"]) == live


# The MTM stage retried after a partial failure (segment saved, state not), or restarted after a
# crash between the two writes, merges the page into its segment once: size, centroid and LLM
# summary count it once.


async def test_a_page_is_merged_into_its_segment_once_when_the_stage_is_retried() -> None:
    pipeline = Pipeline(await make_deps(theta=0.0))  # every page joins the first segment
    repo = pipeline.deps.repo
    save_doc = repo.save_doc
    failed = False

    async def flaky_save_doc(user_id: str, kind: str, data: Any, **flags: bool) -> None:
        nonlocal failed
        segments = data.get("segments", {}) if kind == HEAT_DOC else {}
        if segments and sum(len(s["page_ids"]) for s in segments.values()) == 2 and not failed:
            failed = True
            raise OSError("store timeout")  # transient: the runner retries the event
        await save_doc(user_id, kind, data, **flags)

    repo.save_doc = flaky_save_doc  # type: ignore[method-assign]
    for index in range(5):
        await pipeline.send(TURNS, user_key("ann"), dumps(turn("ann", index)))
    await pipeline.drain()
    assert failed
    [segment] = await pipeline.deps.store.scroll(SEGMENTS, "ann")
    pages = segment.payload["page_ids"]
    assert len(pages) == 2
    assert segment.payload["size"] == len(pages)
    assert segment.payload["summary"].count("trip number 1") == 1, segment.payload["summary"]


# The chain stage keeps no prepared page of a turn it dead-lettered: nothing grows without
# bound, and no later turn can take another turn's page.


async def test_dead_lettered_turns_leave_no_prepared_page_on_the_chain_stage() -> None:
    pipeline = Pipeline(await make_deps(continuity_llm="always"))  # the chain asks the LLM
    llm = pipeline.deps.llm
    assert isinstance(llm, FakeLLM)

    async def no_quota(task: str) -> None:
        raise LLMQuotaExceeded("no quota")

    llm.hook = no_quota
    for index in range(50):
        await pipeline.send(TURNS, user_key(f"u{index}"), dumps(turn(f"u{index}", index)))
    await pipeline.drain()
    assert len(pipeline.dead_letters()) == 50
    chain = pipeline.stages[TURNS]
    gc.collect()
    assert not vars(chain).get("_pages"), "no per-turn state is kept on the stage"


async def test_a_later_turn_never_takes_the_page_of_a_dead_lettered_turn() -> None:
    """id() of a freed TurnEvent is reused by a later TurnEvent: had the stage kept prepared
    pages by id(turn), a later turn whose batch embedding failed would take the dead turn's
    page (here another user's) and link it instead of its own."""
    pipeline = Pipeline(await make_deps(continuity_llm="always"))  # the chain asks the LLM
    llm = pipeline.deps.llm
    assert isinstance(llm, FakeLLM)

    async def no_quota(task: str) -> None:
        raise LLMQuotaExceeded("no quota")

    llm.hook = no_quota
    for index in range(100):
        await pipeline.send(
            TURNS, user_key("eve"), dumps(turn("eve", index, f"eve secret {index}"))
        )
    await pipeline.drain()
    llm.hook = None
    embed = pipeline.deps.embedder.embed
    calls = 0

    async def prepare_embedding_fails(texts: Any) -> Any:  # the batch call fails, retry works
        nonlocal calls
        calls += 1
        if calls % 2:
            raise OSError("embedder overloaded")
        return await embed(texts)

    pipeline.deps.embedder.embed = prepare_embedding_fails  # type: ignore[method-assign]
    for index in range(300):
        gc.collect(1)  # the young generations: a full collection per turn took minutes
        await pipeline.send(TURNS, user_key("bob"), dumps(turn("bob", index, f"bob {index}")))
        await pipeline.step(TURNS)
        if pipeline.pending(PAGES) and any(b"eve" in s.value for s in pipeline.pending(PAGES)):
            break
    await pipeline.drain()
    assert await stored_turn_ids(pipeline, "eve") == [], "a dead-lettered turn of eve came back"
