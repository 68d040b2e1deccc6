"""Pages flowing STM -> MTM -> eviction: none lost, none duplicated (property-based)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from memory.heat import HeatParams
from memory.ids import segment_id
from memory.mtm import AddOutcome, MidTermState
from memory.stm import push_page
from schemas.records import Page
from tests.support.builders import page

T0 = datetime(2024, 1, 1, tzinfo=UTC)
PARAMS = HeatParams(mu=50.0)  # short time constant so recency matters within a test


# One step per pushed page: (replay it right away?, segment choice, segments retrieved).
steps = st.lists(
    st.tuples(st.booleans(), st.integers(-1, 6), st.lists(st.integers(0, 6), max_size=3)),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(steps, st.integers(1, 4), st.integers(1, 4))
def test_every_page_ends_up_exactly_once(
    plan: list[tuple[bool, int, list[int]]], stm_capacity: int, mtm_capacity: int
) -> None:
    window: list[Page] = []
    state = MidTermState()
    evicted_pages: list[str] = []
    for number, (replay, choice, visits) in enumerate(plan):
        now = float(number)
        pushed = page(number, "q", "r", timestamp=T0 + timedelta(seconds=number))
        for _ in range(2 if replay else 1):
            window, leaving = push_page(window, pushed, stm_capacity)
            for old in leaving:
                # the segment agent: join a live segment (by index) or open a new one
                live = sorted(state.segments)
                if 0 <= choice < len(live):
                    target, created = live[choice], False
                else:
                    target, created = segment_id("u1", old.page_id), True
                for _ in range(2 if replay else 1):  # replayed segment events are harmless
                    outcome = state.add_page(target, old.page_id, now, created).outcome
                    assert outcome is not AddOutcome.EVICTED
                for stats in state.evict_over_capacity(mtm_capacity, now, PARAMS):
                    evicted_pages += stats.page_ids
                assert len(state) <= mtm_capacity
        live = sorted(state.segments)
        state.record_visits([live[i] for i in visits if i < len(live)], now)

    held = [p.page_id for p in window]
    held += [pid for stats in state.segments.values() for pid in stats.page_ids]
    held += evicted_pages
    assert sorted(held) == sorted(f"p{n}" for n in range(len(plan)))
    assert len(window) == min(stm_capacity, len(plan))
    for stats in state.segments.values():
        assert stats.l_interaction == len(stats.page_ids)
