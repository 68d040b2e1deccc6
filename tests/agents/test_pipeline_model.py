"""A property test: turns, retrievals, deletes, partial progress and crashes, interleaved at
random, must leave memory equal to a simple model: every acknowledged turn since the user's
last DELETE, exactly once, the newest in STM and the rest in exactly one live segment."""

from __future__ import annotations

import asyncio
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from adapters.journal import SqliteJournal
from adapters.ports import PAGES, SEGMENTS
from adapters.repository import LEAVING, MTM, STM
from schemas.topics import MTM as MTM_TOPIC
from schemas.topics import PAGES as PAGES_TOPIC
from schemas.topics import PERSONA, TURNS
from service.response import ResponseService
from streams.reconciler import Reconciler
from tests.support.builders import turn
from tests.support.fakes import FakeClock, Pipeline, make_deps

USERS = ("ann", "bob")
TOPICS = (TURNS, PAGES_TOPIC, MTM_TOPIC, PERSONA)
WORDS = ("hiking", "tea", "piano", "paris", "garden", "chess")


class PipelineModel(RuleBasedStateMachine):
    @initialize()
    def start(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.folder = tempfile.TemporaryDirectory()
        self.deps = self.loop.run_until_complete(make_deps(mtm_capacity=3))
        self.pipeline = Pipeline(self.deps)
        journal = SqliteJournal(Path(self.folder.name) / "journal.sqlite3")
        self.service = ResponseService(self.deps, self.pipeline, journal)
        self.reconciler = Reconciler(self.deps.repo, journal, self.pipeline.send)
        self.model: dict[str, list[str]] = {user: [] for user in USERS}
        self.counter = 0

    def run(self, coro: object) -> object:
        return self.loop.run_until_complete(coro)  # type: ignore[arg-type]

    def tick(self) -> None:
        clock = self.deps.clock
        assert isinstance(clock, FakeClock)
        clock.at += 1.0

    @rule(user=st.sampled_from(USERS), word=st.sampled_from(WORDS))
    def add_turn(self, user: str, word: str) -> None:
        self.tick()
        self.counter += 1
        turn_id = f"t{self.counter:04d}"
        said = turn(
            user,
            self.counter,
            f"Tell me about {word} number {self.counter}",
            turn_id=turn_id,
            response=f"{word} is nice",
            timestamp=datetime.fromtimestamp(1_700_000_000 + self.counter, UTC),
        )
        self.run(self.service.add_turns([said]))
        self.model[user].append(turn_id)

    @rule(user=st.sampled_from(USERS), word=st.sampled_from(WORDS))
    def retrieve(self, user: str, word: str) -> None:
        self.tick()
        self.run(self.service.retrieve(user, f"what about {word}?"))

    @rule(user=st.sampled_from(USERS))
    def delete(self, user: str) -> None:
        self.tick()
        self.run(self.service.forget(user))
        self.model[user] = []

    @rule(topic=st.sampled_from(TOPICS))
    def step(self, topic: str) -> None:
        self.run(self.pipeline.step(topic))

    @rule()
    def crash_and_restart(self) -> None:
        self.pipeline.crash()
        self.run(self.reconciler.start())

    @invariant()
    def never_more_than_the_window(self) -> None:
        for user in USERS:
            count = self.run(self.deps.store.count(PAGES, user, {"tier": STM}))
            assert isinstance(count, int)
            assert count <= self.deps.settings.stm_capacity

    def teardown(self) -> None:
        try:
            self.run(self.pipeline.drain())
            self.run(self.reconciler.run_pass(everything=True))
            self.run(self.pipeline.drain())
            for user in USERS:
                self.check_user(user)
        finally:
            self.loop.close()
            self.folder.cleanup()

    def check_user(self, user: str) -> None:
        store = self.deps.store
        expected = self.model[user]
        points = self.run(store.scroll(PAGES, user))
        assert isinstance(points, list)
        assert sorted(str(p.payload["turn_id"]) for p in points) == sorted(expected)
        stm = [p for p in points if p.payload["tier"] == STM]
        mtm = [p for p in points if p.payload["tier"] == MTM]
        assert not [p for p in points if p.payload["tier"] == LEAVING]
        capacity = self.deps.settings.stm_capacity
        assert sorted(str(p.payload["turn_id"]) for p in stm) == sorted(expected[-capacity:])
        segments = self.run(store.scroll(SEGMENTS, user))
        assert isinstance(segments, list)
        for page in mtm:
            holders = [s for s in segments if page.id in s.payload["page_ids"]]
            assert [s.id for s in holders] == [page.payload["segment_id"]]
        assert not self.pipeline.dead_letters()


PipelineModel.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestPipelineModel = PipelineModel.TestCase
