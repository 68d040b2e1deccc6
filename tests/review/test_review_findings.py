"""Findings of an adversarial review of the durability, forgetting and ordering work.

Each test showed a violated guarantee when it was written (as a strict xfail); each is fixed
now and runs as a plain regression test.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from adapters.journal import SqliteJournal
from adapters.ports import PAGES as PAGE_POINTS
from adapters.ports import SEGMENTS
from adapters.repository import HEAT_DOC, LEAVING, MTM, STM
from memory.chain import ContinuityVerdict
from schemas.codec import decode, dumps
from schemas.errors import LLMQuotaExceeded
from schemas.records import Page, PersonaInput
from schemas.topics import MTM as MTM_TOPIC
from schemas.topics import PAGES, PERSONA, TURNS, user_key
from schemas.turn import TurnEvent
from service.response import ResponseService
from streams import reconciler as reconciler_module
from streams.reconciler import Reconciler
from tests.support.fakes import FakeLLM, Pipeline, make_deps

pytestmark = pytest.mark.filterwarnings("ignore")


def turn(user: str, index: int, text: str = "") -> TurnEvent:
    return TurnEvent(
        user_id=user,
        turn_id=f"t{index:03d}",
        query=text or f"I like hiking trip number {index} in the mountains",
        response=f"Noted, trip {index}.",
        timestamp=datetime.fromtimestamp(1_700_000_000 + index * 60, UTC),
    )


async def tiers(pipeline: Pipeline, user: str) -> dict[str, int]:
    store = pipeline.deps.store
    return {
        tier: await store.count(PAGE_POINTS, user, {"tier": tier}) for tier in (STM, LEAVING, MTM)
    }


async def stored_turn_ids(pipeline: Pipeline, user: str) -> list[str]:
    points = await pipeline.deps.store.scroll(PAGE_POINTS, user)
    return sorted(str(p.payload["turn_id"]) for p in points)


def with_journal(pipeline: Pipeline, tmp_path: Path) -> ResponseService:
    return ResponseService(pipeline.deps, pipeline, SqliteJournal(tmp_path / "journal.sqlite3"))


def kinds(pipeline: Pipeline, topic: str) -> list[str]:
    return [orjson.loads(sent.value).get("kind", "turn") for sent in pipeline.topics[topic]]


# ---------------------------------------------------------------------------------------------
# F1. A DELETE's data comes back in a later turn's chain (prev link, seq and LLM summary).
# ---------------------------------------------------------------------------------------------


class ContinuingLLM(FakeLLM):
    """An LLM that says every page continues the previous one and folds its summary in."""

    async def continuity(self, previous: Page | None, current: Page) -> ContinuityVerdict:
        await self._enter("continuity")
        if previous is None:
            return ContinuityVerdict(False, current.query[:60])
        return ContinuityVerdict(True, f"{previous.chain.summary} / {current.query[:60]}")


async def test_f1_turn_after_delete_is_chained_to_deleted_pages_when_stm_lags(
    tmp_path: Path,
) -> None:
    deps = dataclasses.replace(await make_deps(), llm=ContinuingLLM())
    pipeline = Pipeline(deps)
    service = with_journal(pipeline, tmp_path)
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


# ---------------------------------------------------------------------------------------------
# F2. A forget marker that arrives again (Kafka redelivery, the reconciler, a DLQ replay)
#     erases turns accepted after its DELETE: markers purge "everything of the user", not
#     "everything before the DELETE", and a completed DELETE's marker is still honoured.
# ---------------------------------------------------------------------------------------------


async def test_f2a_redelivered_marker_erases_turns_accepted_after_the_delete() -> None:
    """Production (Kafka keeps the topic, no journal): a worker that crashed before committing
    re-reads the marker and the turn behind it. "Replaying any topic changes nothing"."""
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


async def test_f2b_reconciler_resending_an_open_marker_erases_unjournaled_later_turns() -> None:
    """Production worker restart while the marker has not reached the persona stage yet: the
    start pass re-sends the marker, and a turn accepted after the DELETE (already past the chain
    stage, not journaled with Kafka) is purged for good."""
    pipeline = Pipeline(await make_deps())
    service = ResponseService(pipeline.deps, pipeline)  # NoJournal, as with Kafka
    await service.add_turns([turn("ann", i) for i in range(4)])
    await pipeline.drain()
    await service.forget("ann")
    await service.add_turns([turn("ann", 100, "Remember my new address please")])
    await pipeline.drain(until=MTM_TOPIC)  # the marker waits at the persona stage
    assert [p.turn_id for p in await pipeline.deps.repo.stm_pages("ann")] == ["t100"]
    restart = Reconciler(pipeline.deps.repo, service.journal, pipeline.send, embedded=False)
    await restart.start()  # a production worker: Kafka kept the marker, nothing to re-send
    await pipeline.drain()
    assert [p.turn_id for p in await pipeline.deps.repo.stm_pages("ann")] == ["t100"]


async def test_f2c_dlq_replay_of_a_dead_lettered_marker_erases_newer_mid_term_memory(
    tmp_path: Path,
) -> None:
    """A marker exhausted at the MTM stage (store briefly down) goes to the DLQ; the reconciler
    completes the DELETE meanwhile. When the operator later runs `memoryos dlq replay`, the
    marker goes straight back to memoryos.mtm, where no stage checks it: it erases everything
    the user built since."""
    pipeline = Pipeline(await make_deps())
    service = with_journal(pipeline, tmp_path)
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


# ---------------------------------------------------------------------------------------------
# F3. A DELETE that lands while a reconciler pass is running is undone by that pass: the pass
#     decided what to re-send before the DELETE, and sends it after the DELETE's marker.
# ---------------------------------------------------------------------------------------------


async def test_f3a_delete_during_a_reconciler_pass_brings_a_stuck_turn_back(
    tmp_path: Path,
) -> None:
    pipeline = Pipeline(await make_deps())
    service = with_journal(pipeline, tmp_path)
    journal = service.journal
    llm = pipeline.deps.llm
    assert isinstance(llm, FakeLLM)

    async def no_quota(task: str) -> None:
        raise LLMQuotaExceeded("no quota")

    llm.hook = no_quota  # the turn fails for good: journaled, re-sent once per interval
    await service.add_turns([turn("ann", 1, "my secret diagnosis")])
    await pipeline.drain()
    reconciler = Reconciler(pipeline.deps.repo, journal, pipeline.send)
    service.forget_lock = reconciler.lock  # as streams/stack.py wires them
    await reconciler.run_pass()  # owed now; re-sent by the next pass
    llm.hook = None  # the operator fixed the quota
    settle = journal.settle
    racer: asyncio.Task[object] | None = None

    async def settle_racing_a_delete(seqs: Any) -> None:
        nonlocal racer
        racer = asyncio.create_task(service.forget("ann"))  # a DELETE arrives mid-pass
        await asyncio.sleep(0.01)
        journal.settle = settle  # type: ignore[method-assign]
        await settle(seqs)

    journal.settle = settle_racing_a_delete  # type: ignore[method-assign]
    await reconciler.run_pass()
    assert racer is not None
    await racer  # it waited for the pass: its marker comes after everything the pass sent
    await pipeline.drain()
    assert await stored_turn_ids(pipeline, "ann") == []


async def test_f3b_delete_during_a_reconciler_pass_brings_a_leaving_page_back(
    tmp_path: Path,
) -> None:
    pipeline = Pipeline(await make_deps())
    service = with_journal(pipeline, tmp_path)
    await service.add_turns([turn("ann", i) for i in range(5)])
    await pipeline.drain(until=PAGES)  # two pages left STM; the MTM stage is behind
    assert (await tiers(pipeline, "ann"))[LEAVING] == 2
    raced = False

    async def send(topic: str, key: bytes, value: bytes) -> None:
        nonlocal raced
        if topic == MTM_TOPIC and not raced:  # the pass read the leaving pages already
            raced = True
            await service.forget("ann")
            await pipeline.drain()  # the marker passes every stage; the DELETE is complete
        await pipeline.send(topic, key, value)

    reconciler = Reconciler(pipeline.deps.repo, service.journal, send)
    await reconciler.run_pass()
    await reconciler.run_pass()
    await pipeline.drain()
    assert raced
    tombstone = await pipeline.deps.repo.tombstone("ann")
    assert tombstone is not None
    assert not tombstone[1], "the DELETE is complete"
    assert await stored_turn_ids(pipeline, "ann") == []
    assert await pipeline.deps.store.count(SEGMENTS, "ann") == 0


# ---------------------------------------------------------------------------------------------
# F4. Pages evicted from MTM (their segment evicted) come back as the newest STM page: the
#     journal still holds their turns (settled only by a reconciler pass), the page point is
#     gone, so the reconciler re-sends the turn and the chain stage links it as new.
# ---------------------------------------------------------------------------------------------


async def test_f4_a_turn_whose_segment_was_evicted_returns_as_the_newest_page(
    tmp_path: Path,
) -> None:
    pipeline = Pipeline(await make_deps(mtm_capacity=1, theta=2.0))  # one segment per page
    service = with_journal(pipeline, tmp_path)
    await service.add_turns([turn("ann", i) for i in range(6)])
    await pipeline.drain()  # within one reconcile interval (a bulk `memoryos ingest`)
    before = await stored_turn_ids(pipeline, "ann")
    assert before == ["t002", "t003", "t004", "t005"]  # t000, t001 evicted with their segments
    reconciler = Reconciler(pipeline.deps.repo, service.journal, pipeline.send)
    await reconciler.start()  # a restart; or two running passes
    await pipeline.drain()
    await reconciler.run_pass()
    await pipeline.drain()
    window = [p.turn_id for p in await pipeline.deps.repo.stm_pages("ann")]
    assert window == ["t003", "t004", "t005"]
    assert await stored_turn_ids(pipeline, "ann") == before


async def test_f4_a_backlog_longer_than_one_read_settles_evicted_turns_before_sending_any(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same window past one reconciler read: the start pass judges the first read only,
    and the stack sends the rest unjudged, so the rule runs over the whole journal first."""
    monkeypatch.setattr(reconciler_module, "JOURNAL_READ", 2)
    pipeline = Pipeline(await make_deps(mtm_capacity=1, theta=2.0))  # one segment per page
    service = with_journal(pipeline, tmp_path)
    await service.add_turns([turn("ann", i) for i in range(6)])
    await pipeline.drain()
    before = await stored_turn_ids(pipeline, "ann")
    assert before == ["t002", "t003", "t004", "t005"]  # t000, t001 evicted with their segments
    pipeline.crash()
    reconciler = Reconciler(pipeline.deps.repo, service.journal, pipeline.send)
    await reconciler.start()
    # what Stack.catch_up_journal sends: every turn past the pass's read
    for entry in await service.journal.pending(after=reconciler.read_through):
        await pipeline.send(TURNS, user_key(entry.user_id), entry.value)
    await pipeline.drain()
    window = [p.turn_id for p in await pipeline.deps.repo.stm_pages("ann")]
    assert window == ["t003", "t004", "t005"], "no evicted turn linked anew as the newest"
    assert await stored_turn_ids(pipeline, "ann") == before
    assert await service.journal.pending() == []


# ---------------------------------------------------------------------------------------------
# F5. A second EvictedPage for a page whose segment was already evicted (a replay of
#     memoryos.mtm, or the reconciler's copy of a `leaving` page while the MTM stage lags)
#     re-saves the segment point: a zombie segment that no state tracks, never evicted.
# ---------------------------------------------------------------------------------------------


async def test_f5_replaying_the_mtm_topic_after_an_eviction_leaves_a_zombie_segment() -> None:
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


# ---------------------------------------------------------------------------------------------
# F6. Retrying the MTM stage after a partial failure (segment saved, state not) merges the
#     same page into its segment twice: size and centroid count it twice, the LLM summary
#     absorbs it twice. The same happens when a crash hits between the two writes.
# ---------------------------------------------------------------------------------------------


async def test_f6_retry_after_the_heat_state_write_failed_merges_a_page_twice() -> None:
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


# ---------------------------------------------------------------------------------------------
# F7. The chain stage's prepared pages (``ChainAgent._pages``, keyed by ``id(turn)``) are kept
#     for ever when a turn is dead-lettered after ``link`` failed: an unbounded leak, and once
#     the TurnEvent is freed its id() is reused by a later TurnEvent, which then takes the
#     dead turn's page (another turn, possibly another user's) when batch embedding failed.
# ---------------------------------------------------------------------------------------------


async def test_f7_dead_lettered_turns_leak_their_prepared_pages() -> None:
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


async def test_f7b_a_later_turn_takes_a_dead_turns_page_by_id_reuse() -> None:
    """The consequence: id() of a freed TurnEvent is reused by a later TurnEvent; when its
    batch embedding failed, ``handle`` pops the stale page and links the dead turn (here
    another user's) instead of its own."""
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


# ---------------------------------------------------------------------------------------------
# F8. ``Resume`` (sent for every user at every worker start) clears ``persona_pending`` while a
#     job is still queued or running (Kafka keeps memoryos.persona across a worker restart):
#     the same pages go to the persona stage twice, LLM calls and persona updates double.
# ---------------------------------------------------------------------------------------------


def persona_jobs(pipeline: Pipeline) -> list[tuple[str, tuple[str, ...]]]:
    jobs = []
    for sent in pipeline.topics[PERSONA]:
        record = decode(PersonaInput, sent.value).root
        if record.kind == "persona":
            jobs.append((record.segment_id, tuple(record.page_ids)))
    return jobs


async def test_f8_resume_while_a_persona_job_is_queued_sends_the_same_pages_again() -> None:
    pipeline = Pipeline(await make_deps())
    for index in range(8):
        await pipeline.send(TURNS, user_key("ann"), dumps(turn("ann", index)))
    await pipeline.drain(until=MTM_TOPIC)  # a job waits on memoryos.persona
    assert persona_jobs(pipeline)
    restart = Reconciler(pipeline.deps.repo, NoJournalLike(), pipeline.send, embedded=False)
    await restart.start()  # a production worker's restart: Kafka kept the persona topic
    await pipeline.drain(until=MTM_TOPIC)
    sent = [page for _, pages in persona_jobs(pipeline) for page in pages]
    assert len(sent) == len(set(sent)), "pages of a job still queued were sent again"


class NoJournalLike:
    async def pending(self, limit: int = 10_000, after: int = 0) -> list[Any]:
        return []

    async def pending_messages(self, limit: int = 10_000, after: int = 0) -> list[Any]:
        return []

    async def settle(self, seqs: Any) -> None:
        return None

    async def settle_queued(self, flush: Any) -> int:
        return 0


# ---------------------------------------------------------------------------------------------
# F9. add_turns racing a DELETE of the same user: the DELETE purges the journal entry the
#     turn was just given, then the turn is sent (behind the marker) and acknowledged. Without
#     a crash it is remembered (it follows the marker); after a crash it is gone, because the
#     journal no longer holds it: an acknowledged turn whose fate depends on the crash.
# ---------------------------------------------------------------------------------------------


async def test_f9_a_delete_racing_an_acknowledgement_waits_for_it_and_then_wins(
    tmp_path: Path,
) -> None:
    """Fixed with per-user locks: the DELETE started while the turn was between journal and
    send waits until the turn is sent, then forgets it too, with or without a crash."""
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
