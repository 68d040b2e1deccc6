"""Mid-term bookkeeping: heat counters, eviction by heat, persona threshold."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from memory.heat import HeatParams
from memory.mtm import EVICTED_MEMORY, AddOutcome, MidTermState, PageAdded, SegmentStats

PAPER = HeatParams()
COUNTS_ONLY = HeatParams(gamma=0.0)  # heat = N_visit + L_interaction, no time term


def state_with(*segments: SegmentStats) -> MidTermState:
    return MidTermState(segments={stats.segment_id: stats for stats in segments})


def test_first_page_creates_segment() -> None:
    state = MidTermState()
    assert state.add_page("s1", "p1", now=100.0, created=True) == PageAdded(
        AddOutcome.CREATED, "s1"
    )
    assert state.segments["s1"] == SegmentStats(
        "s1", last_access=100.0, created_at=100.0, l_interaction=1, page_ids=["p1"]
    )


def test_unknown_segment_is_adopted_not_lost() -> None:
    state = MidTermState()
    assert state.add_page("s1", "p1", now=1.0, created=False).outcome is AddOutcome.ADOPTED
    assert "s1" in state


def test_joining_counts_interaction_and_refreshes_access() -> None:
    state = MidTermState()
    state.add_page("s1", "p1", now=100.0, created=True)
    assert state.add_page("s1", "p2", now=250.0, created=False).outcome is AddOutcome.JOINED
    stats = state.segments["s1"]
    assert (stats.l_interaction, stats.n_visit, stats.last_access) == (2, 0, 250.0)
    assert stats.created_at == 100.0
    assert stats.page_ids == ["p1", "p2"]


def test_adding_a_page_twice_changes_nothing() -> None:
    state = MidTermState()
    state.add_page("s1", "p1", now=100.0, created=True)
    before = state.to_dict()
    assert state.add_page("s1", "p1", now=500.0, created=True) == PageAdded(
        AddOutcome.DUPLICATE, "s1"
    )
    assert state.add_page("s2", "p1", now=500.0, created=True) == PageAdded(
        AddOutcome.DUPLICATE, "s1"
    )
    assert state.to_dict() == before


def test_late_page_for_evicted_segment_is_not_resurrected() -> None:
    state = MidTermState()
    state.add_page("s1", "p1", now=1.0, created=True)
    state.add_page("s2", "p2", now=2.0, created=True)
    state.add_page("s2", "p3", now=3.0, created=False)
    [gone] = state.evict_over_capacity(1, now=3.0, params=PAPER)
    assert gone.segment_id == "s1"
    assert state.evicted == ["s1"]
    assert state.add_page("s1", "p9", now=4.0, created=False).outcome is AddOutcome.EVICTED
    assert "s1" not in state


def test_record_visits() -> None:
    state = MidTermState()
    state.add_page("s1", "p1", now=10.0, created=True)
    state.add_page("s2", "p2", now=10.0, created=True)
    assert state.record_visits(["s1", "gone", "s1"], now=99.0) == ["s1"]
    assert state.segments["s1"].n_visit == 1
    assert state.segments["s1"].last_access == 99.0
    assert state.segments["s1"].l_interaction == 1
    assert state.segments["s2"].n_visit == 0
    assert state.segments["s2"].last_access == 10.0


def test_record_visits_with_counts_adds_each_segments_retrievals() -> None:
    state = MidTermState()
    state.add_page("s1", "p1", now=10.0, created=True)
    state.add_page("s2", "p2", now=10.0, created=True)
    assert state.record_visits(["s1", "s2", "gone"], 99.0, {"s1": 4, "gone": 2}) == ["s1", "s2"]
    assert state.segments["s1"].n_visit == 4
    assert state.segments["s2"].n_visit == 1  # not named in counts: one retrieval


def test_a_merged_visits_counts_are_bounded_and_positive() -> None:
    from pydantic import ValidationError

    from schemas.records import MAX_VISITS_PER_RECORD, RetrievalHit

    for bad in (0, -1, MAX_VISITS_PER_RECORD + 1, True, "3"):
        with pytest.raises(ValidationError):
            RetrievalHit(user_id="u", segment_ids=["s1"], at=1.0, counts={"s1": bad})


@pytest.mark.parametrize(
    "fields",
    [
        {"at": float("inf")},
        {"at": float("nan")},
        {"at": 1e308},
        {"at": -1.0},
        {"counts": {"other": 2}},  # not among segment_ids
        {"times": {"other": 0.5}},
        {"times": {"s1": 2.0}},  # later than at
    ],
)
def test_a_hostile_visit_record_is_refused(fields: dict[str, object]) -> None:
    """A time that is not finite or in range would become the user's clock (a heat document
    that no longer loads); a merged record names only its own segments."""
    from pydantic import ValidationError

    from schemas.records import RetrievalHit

    with pytest.raises(ValidationError):
        RetrievalHit.model_validate({"user_id": "u", "segment_ids": ["s1"], "at": 1.0, **fields})


def test_record_visits_with_times_gives_each_segment_its_own_last_access() -> None:
    state = MidTermState()
    state.add_page("s1", "p1", now=10.0, created=True)
    state.add_page("s2", "p2", now=10.0, created=True)
    state.record_visits(["s1", "s2"], 50.0, times={"s2": 20.0})
    assert state.segments["s1"].last_access == 50.0
    assert state.segments["s2"].last_access == 20.0


def test_late_events_never_move_access_time_backwards() -> None:
    state = MidTermState()
    state.add_page("s1", "p1", now=100.0, created=True)
    state.record_visits(["s1"], now=50.0)
    state.add_page("s1", "p2", now=40.0, created=False)
    assert state.segments["s1"].last_access == 100.0
    assert state.segments["s1"].n_visit == 1


def test_heat_of_by_hand() -> None:
    state = state_with(
        SegmentStats("s1", last_access=0.0, created_at=0.0, n_visit=2, l_interaction=3)
    )
    assert state.heat_of("s1", now=1e7, params=PAPER) == pytest.approx(5 + math.exp(-1))
    assert state.heat_of("nope", now=1e7, params=PAPER) is None


def test_heat_with_clock_behind_last_access_stays_finite() -> None:
    state = state_with(SegmentStats("s1", last_access=1e9, created_at=0.0, l_interaction=1))
    assert state.heat_of("s1", now=0.0, params=PAPER) == 2.0


def test_eviction_goes_by_heat_not_visits_or_recency() -> None:
    now = 3e7
    state = state_with(
        # many visits but long ago: 5 + 0 + exp(-3) ~ 5.05
        SegmentStats("many-visits", last_access=0.0, created_at=0.0, n_visit=5),
        # just accessed, one page: 0 + 1 + 1 = 2 -> coldest although the most recent
        SegmentStats("recent", last_access=now, created_at=now, l_interaction=1),
        # one visit but many pages: 1 + 10 + exp(-3) ~ 11.05
        SegmentStats("many-pages", last_access=0.0, created_at=0.0, n_visit=1, l_interaction=10),
    )
    evicted = state.evict_over_capacity(1, now=now, params=PAPER)
    assert [stats.segment_id for stats in evicted] == ["recent", "many-visits"]
    assert list(state.segments) == ["many-pages"]


def test_eviction_returns_page_ids_and_remembers_the_ids() -> None:
    state = MidTermState()
    state.add_page("s1", "p1", now=1.0, created=True)
    state.add_page("s1", "p2", now=1.0, created=False)
    state.add_page("s2", "p3", now=2.0, created=True)
    state.record_visits(["s2"], now=2.0)
    state.record_visits(["s2"], now=2.0)
    [gone] = state.evict_over_capacity(1, now=2.0, params=PAPER)
    assert gone.page_ids == ["p1", "p2"]
    assert state.evicted == ["s1"]


def test_eviction_ties_go_to_older_access_then_smaller_id() -> None:
    state = state_with(
        SegmentStats("b", last_access=5.0, created_at=0.0, l_interaction=1),
        SegmentStats("a", last_access=5.0, created_at=0.0, l_interaction=1),
        SegmentStats("c", last_access=1.0, created_at=0.0, l_interaction=1),
        SegmentStats("d", last_access=0.0, created_at=0.0, l_interaction=2),
    )
    evicted = state.evict_over_capacity(1, now=10.0, params=COUNTS_ONLY)
    assert [stats.segment_id for stats in evicted] == ["c", "a", "b"]


def test_within_capacity_nothing_is_evicted() -> None:
    state = MidTermState()
    state.add_page("s1", "p1", now=1.0, created=True)
    assert state.evict_over_capacity(1, now=1.0, params=PAPER) == []
    with pytest.raises(ValueError, match="capacity"):
        state.evict_over_capacity(-1, now=1.0, params=PAPER)


def test_capacity_one_keeps_only_the_hottest() -> None:
    state = MidTermState()
    for index in range(5):
        state.add_page(f"s{index}", f"p{index}", now=float(index), created=True)
    state.record_visits(["s2"], now=5.0)
    evicted = state.evict_over_capacity(1, now=5.0, params=PAPER)
    assert len(evicted) == 4
    assert list(state.segments) == ["s2"]


def test_evicted_ids_are_bounded_newest_kept() -> None:
    state = MidTermState()
    for index in range(EVICTED_MEMORY + 5):
        state.add_page(f"s{index:05d}", f"p{index}", now=float(index), created=True)
        state.evict_over_capacity(0, now=float(index), params=PAPER)
    assert len(state.evicted) == EVICTED_MEMORY
    assert state.evicted[-1] == f"s{EVICTED_MEMORY + 4:05d}"
    assert "s00000" not in state.evicted


def test_hot_segments_strictly_above_tau() -> None:
    state = state_with(
        SegmentStats("at-tau", last_access=0.0, created_at=0.0, n_visit=2, l_interaction=3),
        SegmentStats("above", last_access=0.0, created_at=0.0, n_visit=2, l_interaction=4),
        SegmentStats("hotter", last_access=0.0, created_at=0.0, n_visit=0, l_interaction=9),
    )
    assert state.hot_segments(5.0, now=0.0, params=COUNTS_ONLY) == ["hotter", "above"]


def test_hot_segments_with_paper_parameters() -> None:
    # 4 pages accessed just now: 0 + 4 + 1 == tau, not above it; a fifth page makes it hot
    state = MidTermState()
    for index in range(4):
        state.add_page("s1", f"p{index}", now=100.0, created=index == 0)
    assert state.hot_segments(5.0, now=100.0, params=PAPER) == []
    state.add_page("s1", "p4", now=100.0, created=False)
    assert state.hot_segments(5.0, now=100.0, params=PAPER) == ["s1"]


def test_a_segment_hot_from_visits_alone_does_not_update_the_persona_again() -> None:
    state = state_with(
        SegmentStats("s1", last_access=0.0, created_at=0.0, n_visit=9, l_interaction=2)
    )
    assert state.hot_segments(5.0, now=0.0, params=COUNTS_ONLY) == ["s1"]
    state.reset_interaction("s1")
    state.record_visits(["s1"], now=1.0)
    assert state.hot_segments(5.0, now=1.0, params=COUNTS_ONLY) == [], "nothing new to learn"
    state.add_page("s1", "fresh", now=2.0, created=False)
    assert state.hot_segments(5.0, now=2.0, params=COUNTS_ONLY) == ["s1"]


def test_reset_interaction_keeps_visits() -> None:
    state = state_with(
        SegmentStats("s1", last_access=7.0, created_at=0.0, n_visit=3, l_interaction=6)
    )
    assert state.reset_interaction("s1") is True
    stats = state.segments["s1"]
    assert (stats.l_interaction, stats.n_visit, stats.last_access) == (0, 3, 7.0)
    assert state.reset_interaction("unknown") is False


def test_remove_returns_stats_and_remembers_id() -> None:
    state = MidTermState()
    state.add_page("s1", "p1", now=1.0, created=True)
    removed = state.remove("s1")
    assert removed is not None
    assert removed.page_ids == ["p1"]
    assert state.remove("s1") is None
    assert state.evicted == ["s1"]
    assert len(state) == 0


def test_round_trip_through_json() -> None:
    state = MidTermState()
    state.add_page("s1", "p1", now=1.5, created=True)
    state.add_page("s2", "p2", now=2.5, created=True)
    state.record_visits(["s2"], now=3.0)
    state.remove("s1")
    data = json.loads(json.dumps(state.to_dict()))
    assert MidTermState.from_dict(data) == state
    assert data["segments"]["s2"] == {
        "segment_id": "s2",
        "last_access": 3.0,
        "created_at": 2.5,
        "n_visit": 1,
        "l_interaction": 1,
        "page_ids": ["p2"],
        "transferred": [],
        "persona_pending": False,
        "unsummarized": [],
    }


def test_segment_stats_write_every_field() -> None:
    """to_dict is spelled out for speed: a field added later must not be left out of it."""
    stats = SegmentStats("s1", last_access=1.0, created_at=0.5, page_ids=["p1"])
    assert set(stats.to_dict()) == {f.name for f in dataclasses.fields(SegmentStats)}
    assert SegmentStats.from_dict(stats.to_dict()) == stats


def test_from_dict_of_nothing_is_empty() -> None:
    assert MidTermState.from_dict(None) == MidTermState()
    assert MidTermState.from_dict({}) == MidTermState()


def test_from_dict_rejects_malformed_state() -> None:
    with pytest.raises(ValueError, match="segment stats"):
        MidTermState.from_dict({"segments": {"s1": {"segment_id": "s1"}}})


def test_persona_jobs_carry_only_new_pages_and_wait_for_their_acknowledgement() -> None:
    state = MidTermState()
    for index in range(6):
        state.add_page("s1", f"p{index}", now=10.0, created=index == 0)
    params = HeatParams(mu=1e7)
    [(segment, pages)] = state.take_persona_jobs(5.0, 10.0, params, max_pages=4)
    assert (segment, pages) == ("s1", ["p0", "p1", "p2", "p3"])
    # A job is out: no second one until the persona acknowledges it.
    assert state.take_persona_jobs(5.0, 10.0, params, max_pages=4) == []
    assert state.persona_applied("s1", pages) is True
    assert state.segments["s1"].l_interaction == 2
    assert state.segments["s1"].transferred == pages
    # Acknowledged twice (a replay): nothing counted twice.
    state.persona_applied("s1", pages)
    assert state.segments["s1"].l_interaction == 2
    assert state.persona_applied("gone", ["p9"]) is False


def test_resume_allows_a_lost_job_to_be_sent_again() -> None:
    state = MidTermState()
    for index in range(6):
        state.add_page("s1", f"p{index}", now=10.0, created=index == 0)
    first = state.take_persona_jobs(5.0, 10.0, HeatParams(), max_pages=16)
    state.resume()
    assert state.take_persona_jobs(5.0, 10.0, HeatParams(), max_pages=16) == first


def test_the_clock_never_moves_back() -> None:
    state = MidTermState()
    assert state.advance(100.0) == 100.0
    assert state.advance(50.0) == 100.0  # an older page is applied at the latest time seen
    assert state.advance(150.0) == 150.0


def test_the_clock_stays_within_a_records_range() -> None:
    """A page stored before timestamps were bounded may carry a time past the year 9999: the
    clock, which the MTM stage's records carry, stops at the last second of 9999."""
    from schemas.limits import MAX_EVENT_TIME
    from schemas.records import PersonaJob

    state = MidTermState()
    now = state.advance(MAX_EVENT_TIME + 50_400)
    assert now == MAX_EVENT_TIME
    PersonaJob(user_id="u", segment_id="s", page_ids=["p"], at=now)  # a job it can still send


def test_a_stored_state_is_left_out_of_garbage_collections() -> None:
    """Every user's state stays in the MTM table: its segments, plain values, are not walked by
    each full collection (which pauses the event loop); it reads back as it was written."""
    import gc

    state = MidTermState()
    for index in range(3):
        state.add_page(f"s{index}", f"p{index}", now=100.0 + index, created=True)
    state.add_page("s0", "p9", now=200.0, created=False)
    data = state.to_dict()
    gc.collect()  # a full collection stops tracking a dict of plain values
    segments = data["segments"].values()
    assert not any(map(gc.is_tracked, segments)), "each segment is walked by every collection"
    assert MidTermState.from_dict(json.loads(json.dumps(data))).to_dict() == data
