"""The stages with fakes: order per user, dead letters, forgetting, crashes and reconciling."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest

from adapters.ports import PAGES as PAGE_POINTS
from adapters.ports import SEGMENTS
from adapters.repository import LEAVING, MTM, STM
from agents.forget import check_marker
from agents.runtime import MAX_RECORD_BYTES
from schemas.codec import dumps
from schemas.errors import UnauthorizedForget
from schemas.records import ForgetUser
from schemas.topics import DLQ, PAGES, PERSONA, TURNS
from schemas.topics import MTM as MTM_TOPIC
from streams.reconciler import Reconciler
from tests.support.builders import turn
from tests.support.fakes import FakeLLM, Pipeline, gate, make_deps
from tests.support.pipelines import ingest, service_for, tiers


@pytest.fixture
async def pipeline() -> Pipeline:
    # The LLM at every stage, continuity included: these tests hold and fail its calls.
    return Pipeline(await make_deps(continuity_llm="always"))


async def test_turns_flow_through_every_tier_in_order(pipeline: Pipeline) -> None:
    await ingest(pipeline, "ann", 8)
    await pipeline.drain()
    window = await pipeline.deps.repo.stm_pages("ann", with_vectors=False)
    assert [page.turn_id for page in window] == ["t005", "t006", "t007"]
    assert await tiers(pipeline, "ann") == {STM: 3, LEAVING: 0, MTM: 5}
    persona = await pipeline.deps.repo.load_persona("ann")
    assert persona.user_knowledge, "a hot segment reached the persona"
    assert not pipeline.dead_letters()


async def test_the_persona_asks_one_call_where_the_paper_asks_three() -> None:
    calls, knowledge = {}, {}
    for combine in (True, False):
        pipeline = Pipeline(await make_deps(llm_combine=combine))
        await ingest(pipeline, "ann", 8)
        await pipeline.drain()
        llm = pipeline.deps.llm
        assert isinstance(llm, FakeLLM)
        calls[combine] = {task: llm.calls.count(task) for task in set(llm.calls)}
        knowledge[combine] = (await pipeline.deps.repo.load_persona("ann")).user_knowledge
    assert knowledge[True]
    assert knowledge[True] == knowledge[False]
    jobs = calls[False]["user_knowledge"]
    assert jobs
    assert calls[False]["user_traits"] == calls[False]["agent_traits"] == jobs
    assert calls[True]["persona"] == jobs
    assert not {"user_traits", "user_knowledge", "agent_traits"} & set(calls[True])


async def test_replaying_every_topic_changes_nothing(pipeline: Pipeline) -> None:
    await ingest(pipeline, "ann", 8)
    await pipeline.drain()
    before = await pipeline.deps.store.count(PAGE_POINTS, "ann")
    for topic in (TURNS, PAGES, MTM_TOPIC, PERSONA):
        pipeline.offsets[topic] = 0
    await pipeline.drain()
    assert await pipeline.deps.store.count(PAGE_POINTS, "ann") == before
    assert await tiers(pipeline, "ann") == {STM: 3, LEAVING: 0, MTM: 5}


async def test_a_failing_llm_is_retried_then_dead_lettered_and_later_turns_go_on(
    pipeline: Pipeline,
) -> None:
    llm = pipeline.deps.llm
    assert isinstance(llm, FakeLLM)
    failures = iter([True, True])

    async def flaky(task: str) -> None:
        if task == "continuity" and next(failures, False):
            raise OSError("llm down")

    llm.hook = flaky
    await ingest(pipeline, "ann", 2)
    await pipeline.drain()
    [dead] = pipeline.dead_letters()
    assert dead.headers["error"] == b"exhausted"
    assert dead.headers["attempts"] == b"2"
    # sealed with the user's key (crypto-shredding): readable while the user is not deleted
    assert orjson.loads(await opened(pipeline, dead.value))["turn_id"] == "t000"
    assert [p.turn_id for p in await pipeline.deps.repo.stm_pages("ann")] == ["t001"]


async def test_a_bug_is_dead_lettered_at_once(pipeline: Pipeline) -> None:
    llm = pipeline.deps.llm
    assert isinstance(llm, FakeLLM)

    async def bug(task: str) -> None:
        raise KeyError("oops")

    llm.hook = bug
    await ingest(pipeline, "ann", 1)
    await pipeline.drain()
    [dead] = pipeline.dead_letters()
    assert (dead.headers["error"], dead.headers["attempts"]) == (b"bug", b"1")


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        (b"ann", b"{not json", b"invalid"),
        (b"bob", dumps(turn("ann", 1)), b"invalid"),  # key is not the user: no order
        (None, dumps(turn("ann", 1)), b"invalid"),
        (b"ann", b'{"pad": "' + b"x" * (MAX_RECORD_BYTES * 5) + b'"}', b"too_large"),
    ],
)
async def test_bad_records_are_dead_lettered_with_a_reason_and_valid_ones_go_on(
    pipeline: Pipeline, key: bytes | None, value: bytes, reason: bytes
) -> None:
    await pipeline.send(TURNS, key, value)  # type: ignore[arg-type]
    await ingest(pipeline, "ann", 2, start=5)
    await pipeline.drain()
    [dead] = pipeline.dead_letters()
    assert dead.headers["error"] == reason
    if reason == b"too_large":
        # the record itself is too big for the topic: a reference, sealed like the record
        reference = orjson.loads(await opened(pipeline, dead.value))
        assert (reference["topic"], reference["size"]) == (TURNS, len(value))
    assert len(await pipeline.deps.repo.stm_pages("ann")) == 2


PAPER_CALLS = {"llm_run_max": 1, "llm_combine": False}


@pytest.mark.parametrize(
    ("held", "calls"),
    [
        ("continuity", {}),
        ("topics_batch", {}),  # a run of evicted pages: one topics call for them all
        ("summary", {}),  # the run's merged summaries, written after its last page
        ("topics_summary", {"llm_run_max": 1}),  # one page: topics and summary in one call
        ("topics", PAPER_CALLS),  # one page at a time, one call per task, as the paper
        ("summary", PAPER_CALLS),
        ("persona", {}),  # the three persona analyses in one call
        ("user_knowledge", PAPER_CALLS),
    ],
)
async def test_delete_while_a_stage_waits_on_the_llm_forgets_for_good(
    tmp_path: Path, held: str, calls: dict[str, object]
) -> None:
    pipeline = Pipeline(await make_deps(continuity_llm="always", **calls))
    service = await service_for(pipeline, tmp_path)
    await service.add_turns([turn("ann", i) for i in range(8)])
    llm = pipeline.deps.llm
    assert isinstance(llm, FakeLLM)
    release, wait = await gate()

    async def hold(task: str) -> None:
        if task == held:
            await wait(task)

    llm.hook = hold
    running = asyncio.create_task(pipeline.drain())
    for _ in range(500):  # the stage reaches its LLM call within a few event-loop turns
        if held in llm.calls:
            break
        await asyncio.sleep(0.01)
    assert held in llm.calls
    await service.forget("ann")  # the stage is inside its LLM call now
    release.set()
    await running
    await pipeline.drain()
    assert await pipeline.deps.repo.count_user("ann") == dict.fromkeys(
        ["short_term", "mid_term_pages", "segments", "user_knowledge", "agent_traits"], 0
    )
    assert await pipeline.deps.repo.load_doc("ann", "heat") is None
    assert (await pipeline.deps.repo.load_persona("ann")).user_knowledge == []
    # "starts afresh": a key generation after the DELETE, nothing of the user's text
    assert list(pipeline.tables["chain"]) == ["ann"]
    assert pipeline.tables["chain"]["ann"]["tail"] is None
    assert not pipeline.tables["stm"]
    # A turn after the DELETE is remembered, and carries nothing of the deleted chain.
    llm.hook = None
    await service.add_turns([turn("ann", 100, "A fresh start")])
    await pipeline.drain()
    [page] = await pipeline.deps.repo.stm_pages("ann")
    assert page.turn_id == "t100"
    assert page.chain.prev is None


async def test_reads_show_nothing_until_the_marker_passed_every_stage(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    service = await service_for(pipeline, tmp_path)
    await service.add_turns([turn("ann", i) for i in range(5)])
    await pipeline.drain(until=PAGES)
    await service.forget("ann")
    await service.add_turns([turn("ann", 50)])
    await pipeline.drain(until=TURNS)
    assert (await service.get_memory("ann"))["short_term"] == []
    await pipeline.drain()
    memory = await service.get_memory("ann")
    assert [page["turn_id"] for page in memory["short_term"]] == ["t050"]


async def test_a_forged_forget_marker_is_refused(pipeline: Pipeline) -> None:
    await ingest(pipeline, "ann", 3)
    await pipeline.drain()
    await pipeline.send(TURNS, b"ann", orjson.dumps({"kind": "forget", "user_id": "ann", "at": 1}))
    await pipeline.drain()
    [dead] = pipeline.dead_letters()
    assert dead.headers["error"] == b"invalid"
    assert len(await pipeline.deps.repo.stm_pages("ann")) == 3


@pytest.mark.parametrize("crash_after", [TURNS, PAGES, MTM_TOPIC, None])
async def test_a_crash_loses_no_acknowledged_turn(
    pipeline: Pipeline, tmp_path: Path, crash_after: str | None
) -> None:
    service = await service_for(pipeline, tmp_path)
    await service.add_turns([turn("ann", i) for i in range(10)])
    await service.add_turns([turn("bob", i) for i in range(4)])
    if crash_after is not None:
        await pipeline.step(TURNS)
        if crash_after != TURNS:
            await pipeline.step(PAGES)
        if crash_after == MTM_TOPIC:
            await pipeline.step(MTM_TOPIC)
    pipeline.crash()
    reconciler = Reconciler(pipeline.deps.repo, service.journal, pipeline.send)
    await reconciler.start()
    await pipeline.drain()
    await reconciler.run_pass(everything=True)  # settles the journal
    await pipeline.drain()
    for user, count in (("ann", 10), ("bob", 4)):
        short = min(3, count)
        assert await tiers(pipeline, user) == {STM: short, LEAVING: 0, MTM: count - short}
        points = await pipeline.deps.store.scroll(PAGE_POINTS, user, {"tier": MTM})
        segments = await pipeline.deps.store.scroll(SEGMENTS, user)
        owners = [s.id for s in segments for p in points if p.id in s.payload["page_ids"]]
        assert len(owners) == len(points), "every MTM page in exactly one segment"
    assert await service.journal.pending() == []
    assert not pipeline.dead_letters()


async def test_merge_racing_eviction_leaves_no_zombie(tmp_path: Path) -> None:
    pipeline = Pipeline(await make_deps(mtm_capacity=2, theta=0.0))
    service = await service_for(pipeline, tmp_path)
    await service.add_turns([turn("ann", i) for i in range(12)])
    await pipeline.drain()
    segments = await pipeline.deps.store.scroll(SEGMENTS, "ann")
    state = await pipeline.deps.repo.load_doc("ann", "heat")
    assert state is not None
    assert {s.id for s in segments} == set(state["segments"])
    assert len(segments) <= 2
    points = await pipeline.deps.store.scroll(PAGE_POINTS, "ann", {"tier": MTM})
    live = {p for s in segments for p in s.payload["page_ids"]}
    assert {p.id for p in points} <= live
    assert pipeline.topics[DLQ] == []


async def test_a_marker_matches_its_tombstone_despite_float_digits_the_store_dropped(
    pipeline: Pipeline,
) -> None:
    repo = pipeline.deps.repo
    await repo.forget_user("ann", 1796094268.65197)  # what Qdrant Edge gives back
    assert await check_marker(repo, ForgetUser(user_id="ann", at=1796094268.6519701))
    assert not await check_marker(repo, ForgetUser(user_id="ann", at=1796094000.0))
    with pytest.raises(UnauthorizedForget):
        await check_marker(repo, ForgetUser(user_id="ann", at=1796094999.0))


async def test_clear_continuity_cases_skip_the_llm_and_still_link_the_chain() -> None:
    pipeline = Pipeline(await make_deps(continuity_llm="unclear", stm_capacity=7))
    for index in range(4):
        text = "hiking boots trail mountains" if index < 3 else "quarterly tax invoice"
        await pipeline.send(TURNS, b"ann", dumps(turn("ann", index, text)))
    await pipeline.drain(until=PAGES)
    llm = pipeline.deps.llm
    assert isinstance(llm, FakeLLM)
    # The first three share their words: clearly one chain, no call; the fourth may be unclear.
    assert llm.calls.count("continuity") <= 1
    window = await pipeline.deps.repo.stm_pages("ann", with_vectors=False)
    assert [p.chain.chain_id for p in window][:1] * 2 == [p.chain.chain_id for p in window][1:3]
    assert window[2].chain.chain_id != window[3].chain.chain_id  # clearly a new topic


async def opened(pipeline: Pipeline, sealed: bytes) -> bytes:
    result = await pipeline.deps.keyring.open(sealed)
    assert result is not None, "sealed with a destroyed key"
    return result.plain


async def test_a_turn_settled_without_its_page_is_counted_and_said(
    pipeline: Pipeline, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The reconciler cannot tell a lost send from a dead-lettered turn once a later turn of
    the user is stored: both are settled. That is how a roll's dropped sends vanished, so it
    is counted (``memoryos_journal_settled_total{how="passed"}``) and logged, never silent."""
    service = await service_for(pipeline, tmp_path)
    await service.add_turns([turn("ann", i) for i in range(3)])
    await service.journal.append([turn("ann", 3)])  # acknowledged; its send went nowhere
    await service.add_turns([turn("ann", 4)])
    await pipeline.drain()
    reconciler = Reconciler(
        pipeline.deps.repo, service.journal, pipeline.send, metrics=pipeline.deps.metrics
    )
    await reconciler.run_pass()
    assert await service.journal.pending() == []
    settled = pipeline.deps.metrics.journal_settled
    assert settled.labels(how="passed")._value.get() == 1
    assert settled.labels(how="stored")._value.get() == 4
    assert "settled 1 journaled turns with no page" in caplog.text
