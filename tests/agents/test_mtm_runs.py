"""The MTM stage takes a user's queued evicted pages as one run: one topics call for them all,
one summary call per segment they joined, and the same placement as one page at a time."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from adapters.repository import HEAT_DOC
from memory.mtm import MidTermState
from schemas.codec import dumps
from schemas.records import RetrievalHit
from schemas.topics import MTM as MTM_TOPIC
from schemas.topics import TURNS, user_key
from tests.support.fakes import FakeLLM, Pipeline, make_deps
from tests.support.pipelines import placed, themed_turn


async def segments_of(pipeline: Pipeline) -> dict[str, tuple[list[str], list[str]]]:
    return {
        kept.segment.segment_id: (sorted(kept.segment.page_ids), sorted(kept.segment.keywords))
        for kept in await pipeline.deps.repo.all_segments("ann")
    }


async def test_a_run_places_every_page_as_one_by_one_with_fewer_llm_calls() -> None:
    alone, alone_llm = await placed(run_max=1, combine=False)  # the paper's calls
    together, together_llm = await placed(run_max=8)
    assert await segments_of(together) == await segments_of(alone)
    one_by_one, in_runs = Counter(alone_llm.calls), Counter(together_llm.calls)
    assert one_by_one["topics"] == 12
    assert "topics_batch" not in one_by_one
    # The Pipeline hands the 12 evicted pages over in runs of at most 8: two batched calls.
    assert (in_runs["topics_batch"], in_runs["topics"]) == (2, 0)
    merges = sum(len(pages) - 1 for pages, _ in (await segments_of(alone)).values())
    assert one_by_one["summary"] == merges > 0
    # One summary per segment a run merged pages into, not one per merge.
    assert 0 < in_runs["summary"] < one_by_one["summary"]


async def test_one_page_asks_its_topics_and_its_likeliest_segments_summary_in_one_call() -> None:
    paper, paper_llm = await placed(run_max=1, combine=False)
    combined, combined_llm = await placed(run_max=1, combine=True)
    assert await segments_of(combined) == await segments_of(paper)
    calls, paper_calls = Counter(combined_llm.calls), Counter(paper_llm.calls)
    # Every page but the first has a segment to join: topics and its summary in one call.
    assert calls["topics_summary"] == 11
    assert calls["topics"] == 1
    assert calls["summary"] < paper_calls["summary"]
    placed_calls = ("topics", "topics_summary", "summary")
    assert sum(calls[t] for t in placed_calls) < sum(paper_calls[t] for t in placed_calls)
    summaries = {
        k.segment.segment_id: k.segment.summary
        for k in await combined.deps.repo.all_segments("ann")
    }
    expected = {
        k.segment.segment_id: k.segment.summary for k in await paper.deps.repo.all_segments("ann")
    }
    assert summaries == expected  # the fake answers both ways alike


async def test_a_run_writes_every_merged_page_into_its_segments_summary() -> None:
    pipeline, _ = await placed(run_max=8)
    for kept in await pipeline.deps.repo.all_segments("ann"):
        joined = kept.segment.page_ids[1:]  # the first page's topic wrote the summary
        # FakeLLM's summary appends the start of each "User:" line it was given.
        for page in await pipeline.deps.repo.pages_by_id("ann", joined):
            assert f"User: {page.query}"[:40] in kept.segment.summary
    state = MidTermState.from_dict(await pipeline.deps.repo.load_doc("ann", HEAT_DOC))
    assert state.stale_summaries() == {}


async def with_task_down(task: str, turns: int, **settings: object) -> tuple[Pipeline, FakeLLM]:
    """``turns`` of ann's through a pipeline whose LLM fails every ``task`` call."""
    pipeline = Pipeline(await make_deps(stm_capacity=2, llm_run_max=8, **settings))
    llm = pipeline.deps.llm
    assert isinstance(llm, FakeLLM)

    async def down(called: str) -> None:
        if called == task:
            raise OSError("llm down")

    llm.hook = down
    for index in range(turns):
        await pipeline.send(TURNS, user_key("ann"), dumps(themed_turn("ann", index)))
    await pipeline.drain()
    return pipeline, llm


async def test_a_summary_the_run_could_not_write_stays_owed_until_the_next_run() -> None:
    pipeline, llm = await with_task_down("summary", 10, theta=0.3, heat_tau=1000.0)
    state = MidTermState.from_dict(await pipeline.deps.repo.load_doc("ann", HEAT_DOC))
    owed = state.stale_summaries()
    assert owed, "the merged pages are owed to their summaries"
    assert not pipeline.dead_letters(), "a late summary loses nothing: no dead letter"
    llm.hook = None
    await pipeline.send(TURNS, user_key("ann"), dumps(themed_turn("ann", 10)))
    await pipeline.drain()
    state = MidTermState.from_dict(await pipeline.deps.repo.load_doc("ann", HEAT_DOC))
    assert state.stale_summaries() == {}
    summaries = {
        k.segment.segment_id: k.segment.summary
        for k in await pipeline.deps.repo.all_segments("ann")
    }
    for segment_id, page_ids in owed.items():
        for page in await pipeline.deps.repo.pages_by_id("ann", page_ids):
            assert f"User: {page.query}"[:40] in summaries[segment_id]


async def test_a_failed_batched_topics_call_falls_back_to_one_call_per_page() -> None:
    pipeline, llm = await with_task_down("topics_batch", 6)
    assert Counter(llm.calls)["topics"] == 4
    assert not pipeline.dead_letters()
    assert sum(len(k.segment.page_ids) for k in await pipeline.deps.repo.all_segments("ann")) == 4


async def visited(
    run_max: int,
    fail_first_write: bool = False,
    fail_first_job: bool = False,
    heat_tau: float = 1000.0,
) -> tuple[dict[str, Any], int, float]:
    """Ann's segments retrieved 10 times in a row; her heat state after, its writes, and the
    MTM stage's timings (stage duration observations) of the visits."""
    pipeline, _ = await placed(run_max=run_max, heat_tau=heat_tau)
    repo = pipeline.deps.repo
    mtm = pipeline.stages[MTM_TOPIC]
    send_persona, jobs_failing = mtm.send_persona, [fail_first_job]

    async def sending(**message: Any) -> None:
        if jobs_failing[0]:
            jobs_failing[0] = False
            raise ConnectionError("broker briefly away")
        await send_persona(**message)

    mtm.send_persona = sending
    segment_ids = sorted(k.segment.segment_id for k in await repo.all_segments("ann"))
    assert segment_ids
    writes, failing = [0], [fail_first_write]
    save_doc = repo.save_doc

    async def counting(user_id: str, name: str, data: Any, **flags: bool) -> None:
        if name == HEAT_DOC:
            writes[0] += 1
            if failing[0]:
                failing[0] = False
                raise ConnectionError("store briefly away")
        await save_doc(user_id, name, data, **flags)

    repo.save_doc = counting  # type: ignore[method-assign,assignment]
    timed_before = _mtm_timings(pipeline)
    for index in range(10):
        # Every other visit also names a segment evicted since: ignored, as one by one.
        hit_ids = [*segment_ids, "evicted"] if index % 2 else segment_ids
        hit = RetrievalHit(user_id="ann", segment_ids=hit_ids, at=1_800_000_000.0 + index)
        await pipeline.send(MTM_TOPIC, user_key("ann"), dumps(hit))
    await pipeline.drain()
    assert not pipeline.dead_letters()
    doc = await repo.load_doc("ann", HEAT_DOC)
    assert doc is not None
    return dict(doc), writes[0], _mtm_timings(pipeline) - timed_before


async def test_a_run_of_visits_counts_each_visit_as_one_by_one_with_fewer_writes() -> None:
    alone, alone_writes, _ = await visited(run_max=1)
    together, together_writes, _ = await visited(run_max=8)
    assert together == alone
    state = MidTermState.from_dict(together)
    assert {s.n_visit for s in state.segments.values()} == {10}
    assert {s.last_access for s in state.segments.values()} == {1_800_000_009.0}
    assert alone_writes == 10
    assert together_writes == 2  # runs of 8 and 2


async def test_a_merged_record_counts_as_the_retrievals_it_stands_for() -> None:
    """The service sends a user's visits within its linger as one record with counts
    (service/visits.py): the heat state ends as with a record per retrieval."""
    alone, _, _ = await visited(run_max=1)
    pipeline, _ = await placed(run_max=8, heat_tau=1000.0)
    segment_ids = sorted(k.segment.segment_id for k in await pipeline.deps.repo.all_segments("ann"))
    merged = RetrievalHit(
        user_id="ann",
        segment_ids=[*segment_ids, "evicted"],
        at=1_800_000_009.0,
        counts={segment_id: 10 for segment_id in segment_ids} | {"evicted": 5},
    )
    await pipeline.send(MTM_TOPIC, user_key("ann"), dumps(merged))
    await pipeline.drain()
    assert not pipeline.dead_letters()
    doc = await pipeline.deps.repo.load_doc("ann", HEAT_DOC)
    assert doc == alone


@pytest.mark.parametrize("hostile", [b'"Infinity"', b"1e999", b"1e308"])
async def test_a_visit_at_a_hostile_time_is_dead_lettered_and_the_heat_stays_loadable(
    hostile: bytes,
) -> None:
    """Raw on memoryos.mtm: a time that is not finite or past the year 9999 was once taken as
    the user's clock, and the heat document saved with it no longer loaded."""
    pipeline, _ = await placed(run_max=8, heat_tau=1000.0)
    repo = pipeline.deps.repo
    segment_ids = sorted(k.segment.segment_id for k in await repo.all_segments("ann"))
    before = await repo.load_doc("ann", HEAT_DOC)
    raw = b'{"kind":"retrieval","user_id":"ann","segment_ids":%s,"at":%s}' % (
        dumps(segment_ids),
        hostile,
    )
    await pipeline.send(MTM_TOPIC, user_key("ann"), raw)
    await pipeline.drain()
    [dead] = pipeline.dead_letters()
    assert dead.headers["error"] == b"invalid"
    assert await repo.load_doc("ann", HEAT_DOC) == before
    MidTermState.from_dict(before or {})  # still loads


async def test_a_run_of_visits_whose_write_fails_is_counted_once_each_one_at_a_time() -> None:
    alone, _, _ = await visited(run_max=1)
    recovered, writes, timings = await visited(run_max=8, fail_first_write=True)
    assert recovered == alone
    assert writes == 1 + 8 + 1  # the failed run, its 8 visits alone, then the run of 2
    assert timings == 10  # each visit once: alone (8) or in its run (2), not in the failed run


async def test_a_visit_whose_persona_job_fails_to_send_is_counted_once() -> None:
    # At this tau the placed segment is not hot; the visits heat it up, and its job goes out
    # among them.
    alone, _, _ = await visited(run_max=1, heat_tau=22.0)
    state = MidTermState.from_dict(alone)
    assert any(s.transferred for s in state.segments.values()), "jobs were sent"
    for run_max in (1, 8):
        recovered, _, _ = await visited(run_max=run_max, fail_first_job=True, heat_tau=22.0)
        assert recovered == alone


def _mtm_timings(pipeline: Pipeline) -> float:
    for family in pipeline.deps.metrics.registry.collect():
        for sample in family.samples:
            timed = sample.name == "memoryos_stage_duration_seconds_count"
            if timed and sample.labels.get("stage") == "mtm":
                return sample.value
    return 0.0


async def test_a_heat_save_that_keeps_failing_sends_each_persona_job_once() -> None:
    pipeline, llm = await placed(run_max=1, heat_tau=22.0)
    repo, mtm = pipeline.deps.repo, pipeline.stages[MTM_TOPIC]
    jobs: list[bytes] = []
    send_persona, save_doc = mtm.send_persona, repo.save_doc

    async def sending(**message: Any) -> None:
        jobs.append(message["value"])
        await send_persona(**message)

    failures = [0]

    async def saving(user_id: str, name: str, data: Any, **flags: bool) -> None:
        segments = data.get("segments", {}) if name == HEAT_DOC else {}
        pending = any(s.get("persona_pending") for s in segments.values())
        if pending and failures[0] < 6:  # every save that would mark a job as out, six times
            failures[0] += 1
            raise ConnectionError("store briefly away")
        await save_doc(user_id, name, data, **flags)

    mtm.send_persona = sending
    repo.save_doc = saving  # type: ignore[method-assign,assignment]
    segment_ids = sorted(k.segment.segment_id for k in await repo.all_segments("ann"))
    for index in range(16):  # the 10th visit makes the segment hot
        hit = RetrievalHit(user_id="ann", segment_ids=segment_ids, at=1_800_000_000.0 + index)
        await pipeline.send(MTM_TOPIC, user_key("ann"), dumps(hit))
    await pipeline.drain()
    assert failures[0] == 6
    assert pipeline.dead_letters(), "the policy gave up on some visits while the store was away"
    assert len(jobs) == 1, "each failed attempt sent the job again"
    assert Counter(llm.calls)["persona"] == 1
