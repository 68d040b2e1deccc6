"""Feeding and reading the stages with fakes (``Pipeline`` in tests/support/fakes.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.journal import SqliteJournal
from adapters.ports import PAGES as PAGE_POINTS
from adapters.repository import LEAVING, MTM, STM
from schemas.codec import dumps
from schemas.message import MessageEvent
from schemas.topics import MESSAGES, TURNS, user_key
from schemas.turn import TurnEvent
from service.response import ResponseService
from tests.support.builders import turn
from tests.support.fakes import FakeLLM, Pipeline, make_deps

TOPICS = ["hiking boots", "sourdough bread", "violin lessons", "tax forms", "garden roses"]
THEMES = ("hiking in the alps", "baking sourdough bread", "hiking boots for the alps")


async def ingest(pipeline: Pipeline, user: str, count: int, start: int = 0) -> None:
    """Sends ``count`` turns of ``user`` (the builder's defaults) from turn ``start`` on."""
    for index in range(start, start + count):
        await pipeline.send(TURNS, user_key(user), dumps(turn(user, index)))


async def send_messages(pipeline: Pipeline, messages: list[MessageEvent]) -> None:
    for message in messages:
        await pipeline.send(MESSAGES, user_key(message.user_id), dumps(message))


async def service_for(pipeline: Pipeline, tmp_path: Path) -> ResponseService:
    """The service in front of ``pipeline``, with a journal as the embedded stack has."""
    return ResponseService(pipeline.deps, pipeline, SqliteJournal(tmp_path / "journal.sqlite3"))


async def tiers(pipeline: Pipeline, user: str) -> dict[str, int]:
    """How many of ``user``'s pages the store holds in each tier."""
    store = pipeline.deps.store
    return {
        tier: await store.count(PAGE_POINTS, user, {"tier": tier}) for tier in (STM, LEAVING, MTM)
    }


async def stored_turn_ids(pipeline: Pipeline, user: str) -> list[str]:
    """The turn ids of every page of ``user`` the store holds, sorted."""
    points = await pipeline.deps.store.scroll(PAGE_POINTS, user)
    return sorted(str(p.payload["turn_id"]) for p in points)


def themed_turn(user: str, index: int) -> TurnEvent:
    """Turn ``index`` on one of three themes in turn, two of them close (hiking)."""
    theme = THEMES[index % len(THEMES)]
    return turn(
        user,
        index,
        f"Note {index}: tell me more about {theme}",
        response=f"Here is something on {theme}.",
    )


async def placed(
    run_max: int, combine: bool = True, turns: int = 14, heat_tau: float = 1000.0
) -> tuple[Pipeline, FakeLLM]:
    """``turns`` themed turns of ann through every stage, with an STM of two pages: most pages
    are placed in segments, in runs of at most ``run_max``."""
    pipeline = Pipeline(
        await make_deps(
            stm_capacity=2,
            llm_run_max=run_max,
            llm_combine=combine,
            theta=0.3,
            heat_tau=heat_tau,
        )
    )
    for index in range(turns):
        await pipeline.send(TURNS, user_key("ann"), dumps(themed_turn("ann", index)))
    await pipeline.drain()
    llm = pipeline.deps.llm
    assert isinstance(llm, FakeLLM)
    return pipeline, llm


class NullSink:
    """A sink that sends nowhere: a service whose writes must not reach the pipeline."""

    async def send(self, topic: str, key: bytes, value: bytes) -> None:
        return None


@pytest.fixture
async def service() -> ResponseService:
    """Ann's ten turns on five TOPICS, every stage run; the service reads them, sends nowhere."""
    pipeline = Pipeline(await make_deps())  # STM window of 3 pages
    for index in range(10):
        topic = TOPICS[index % 5]
        said = turn(
            "ann",
            index,
            f"Tell me about {topic} please",
            response=f"Here is note {index} on {topic}.",
        )
        await pipeline.send(TURNS, user_key("ann"), dumps(said))
    await pipeline.drain()
    return ResponseService(pipeline.deps, NullSink())
