"""The memory view shows the heat the MTM stage decides with: recency at the latest event time
the stage has seen, not at the wall clock, so dated history is not shown as cold."""

from __future__ import annotations

from datetime import UTC, datetime

from memory.heat import heat
from memory.mtm import MidTermState
from schemas.codec import dumps
from schemas.topics import TURNS, user_key
from schemas.turn import TurnEvent
from service.response import ResponseService
from tests.support.fakes import Pipeline, make_deps
from tests.support.pipelines import NullSink


async def test_the_view_shows_the_heat_the_stage_decides_with() -> None:
    deps = await make_deps(stm_capacity=2)
    deps.clock.at = datetime(2026, 12, 4, tzinfo=UTC).timestamp()  # type: ignore[attr-defined]
    pipeline = Pipeline(deps)
    for day in range(1, 7):  # a history from 2020, years before the wall clock
        turn = TurnEvent(
            user_id="ann",
            turn_id=f"t{day}",
            query=f"my garden tomatoes, day {day}",
            response="Nice.",
            timestamp=datetime(2020, 5, day, tzinfo=UTC),
        )
        await pipeline.send(TURNS, user_key("ann"), dumps(turn))
    await pipeline.drain()
    memory = await ResponseService(deps, NullSink()).get_memory("ann")
    assert memory["mid_term"], "pages were placed in segments"
    state = MidTermState.from_dict(await deps.repo.load_doc("ann", "heat"))
    for shown in memory["mid_term"]:
        stats = state.segments[shown["segment_id"]]
        decided = heat(stats.n_visit, stats.l_interaction, stats.last_access, state.clock,
                       deps.settings.heat_params)  # fmt: skip
        assert shown["heat"] == decided
        assert shown["heat"] - stats.n_visit - stats.l_interaction > 0.9, "recent, at event time"
