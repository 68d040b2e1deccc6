"""A worker on a real Kafka (no journal, DELETEs served by separate service replicas) sends no
DELETE marker from its start-up catch-up. A DELETE served by a replica between the start pass's
read and the catch-up's read sent its own marker; a second copy behind the user's next turn was
honoured while the tombstone was open and purged that turn, which no journal sends again
(found by an attacking review; failed before the catch-up's markers were limited to the
embedded broker, whose gate drops them)."""

from __future__ import annotations

import pytest

from adapters.journal import NoJournal
from adapters.settings import Settings
from schemas.topics import TURNS
from service.response import ResponseService
from streams.reconciler import Reconciler
from streams.roll import GatedSink
from streams.stack import Stack
from tests.support.fakes import Pipeline, make_deps
from tests.support.stacks import make_turns

pytestmark = pytest.mark.asyncio


async def test_a_worker_start_keeps_what_a_user_said_after_a_replicas_delete() -> None:
    pipeline = Pipeline(await make_deps(stm_capacity=7))
    deps = pipeline.deps
    stack = Stack(Settings(broker_url="kafka://kafka:9092"), role="worker", serve_http=False,
                  deps=deps)  # fmt: skip
    stack.journal = NoJournal()
    stack.gate = GatedSink(pipeline.send, journaled=False, timeout_s=30)
    stack._send = pipeline.send  # type: ignore[method-assign]
    replica = ResponseService(deps, pipeline)  # a service replica: its own process and locks
    await replica.add_turns(make_turns("u", [("old secret", "noted")]))
    await pipeline.drain()

    # the worker starts: its start pass reads the tombstones (none yet) ...
    stack.reconciler = Reconciler(deps.repo, stack.journal, pipeline.send, embedded=False,
                                  lock=stack._forget_lock)  # fmt: skip
    await stack.reconciler.start()
    # ... a replica serves a DELETE and the user's next turn meanwhile ...
    await replica.forget("u")
    fresh = make_turns("u", [("fresh start", "welcome back")], prefix="n")
    await replica.add_turns(fresh)
    # ... and the worker's start goes on to the catch-up
    await stack.catch_up_journal()
    markers = [s for s in pipeline.topics[TURNS] if b'"kind":"forget"' in s.value]
    await pipeline.drain()
    pages = await deps.repo.stm_pages("u", with_vectors=False)
    assert [p.turn_id for p in pages] == ["n000"], (
        "the turn said after the DELETE is kept" + f" ({len(markers)} markers sent)"
    )
