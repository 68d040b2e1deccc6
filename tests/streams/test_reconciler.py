"""The reconciler (streams/reconciler.py): what its passes send again and what they settle,
and that a DELETE arriving during a pass or a restart still wins."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from adapters.ports import SEGMENTS
from adapters.repository import LEAVING
from schemas.codec import decode, dumps
from schemas.errors import LLMQuotaExceeded
from schemas.facts import PersonaInput
from schemas.topics import MTM as MTM_TOPIC
from schemas.topics import PAGES, PERSONA, TURNS, user_key
from service.response import ResponseService
from streams import reconciler as reconciler_module
from streams.reconciler import Reconciler
from tests.support.builders import turn
from tests.support.fakes import FakeLLM, Pipeline, make_deps
from tests.support.pipelines import service_for, stored_turn_ids, tiers

pytestmark = pytest.mark.filterwarnings("ignore")


# A restart of a production worker (Kafka keeps the topics, no journal) sends no forget marker
# again: the one the DELETE sent is still on its way.


async def test_a_worker_restart_during_an_open_delete_keeps_the_later_unjournaled_turns() -> None:
    """Production worker restart while the marker has not reached the persona stage yet: the
    start pass must not send the marker again: a second copy would purge a turn accepted after
    the DELETE (already past the chain stage, not journaled with Kafka) for good."""
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


# A DELETE that lands while a reconciler pass is running waits for the pass (they share a lock):
# what the pass decided to send before the DELETE goes out before the DELETE's marker.


async def test_a_delete_during_a_reconciler_pass_forgets_the_stuck_turn_the_pass_resends(
    tmp_path: Path,
) -> None:
    pipeline = Pipeline(await make_deps())
    service = await service_for(pipeline, tmp_path)
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


async def test_a_delete_during_a_reconciler_pass_forgets_the_leaving_page_the_pass_resends(
    tmp_path: Path,
) -> None:
    pipeline = Pipeline(await make_deps())
    service = await service_for(pipeline, tmp_path)
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


# Pages evicted from MTM with their segment stay gone: the journal still holds their turns
# (settled only by a reconciler pass) and their page points are gone, yet the reconciler settles
# them instead of sending them again to be linked as the newest page.


async def test_a_turn_whose_segment_was_evicted_is_not_resent_as_the_newest_page(
    tmp_path: Path,
) -> None:
    pipeline = Pipeline(await make_deps(mtm_capacity=1, theta=2.0))  # one segment per page
    service = await service_for(pipeline, tmp_path)
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


async def test_a_backlog_longer_than_one_read_settles_evicted_turns_before_sending_any(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same window past one reconciler read: the start pass judges the first read only,
    and the stack sends the rest unjudged, so the rule runs over the whole journal first."""
    monkeypatch.setattr(reconciler_module, "JOURNAL_READ", 2)
    pipeline = Pipeline(await make_deps(mtm_capacity=1, theta=2.0))  # one segment per page
    service = await service_for(pipeline, tmp_path)
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


# ``Resume`` (sent for every user when an embedded stack starts) never sends a persona job's
# pages twice: a production worker's restart sends none, Kafka keeps memoryos.persona.


def persona_jobs(pipeline: Pipeline) -> list[tuple[str, tuple[str, ...]]]:
    jobs = []
    for sent in pipeline.topics[PERSONA]:
        record = decode(PersonaInput, sent.value).root
        if record.kind == "persona":
            jobs.append((record.segment_id, tuple(record.page_ids)))
    return jobs


class NoJournalLike:
    """A journal that holds nothing: a production worker's (Kafka keeps what was sent)."""

    async def pending(self, limit: int = 10_000, after: int = 0) -> list[Any]:
        return []

    async def pending_messages(self, limit: int = 10_000, after: int = 0) -> list[Any]:
        return []

    async def pending_fact_edits(self, limit: int = 10_000, after: int = 0) -> list[Any]:
        return []

    async def settle(self, seqs: Any) -> None:
        return None

    async def settle_queued(self, flush: Any) -> int:
        return 0


async def test_a_worker_restart_with_a_persona_job_queued_sends_its_pages_once() -> None:
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


async def test_a_tenant_that_spent_its_tokens_gets_no_copies_of_its_waiting_work(
    tmp_path: Path,
) -> None:
    """While running, acme's turns wait for the next day in the stages already: a pass sends
    no second copy (each would hold a place, and be charged again when the day turns), and
    settles none of them; zeta's owed turns go."""
    pipeline = Pipeline(await make_deps())
    service = await service_for(pipeline, tmp_path)
    await service.add_turns([turn("acme/ann", 1), turn("zeta/bob", 1)])
    spent = {"acme"}
    reconciler = Reconciler(
        pipeline.deps.repo,
        service.journal,
        pipeline.send,
        paused=lambda user: user.split("/")[0] in spent,
    )
    pipeline.topics.clear()  # both copies lost, or waiting: both owed
    await reconciler.run_pass()
    owed = await reconciler.run_pass()  # owed at two passes in a row
    assert owed.turns == 1
    assert [record.key for record in pipeline.topics[TURNS]] == [b"zeta/bob"]
    spent.clear()  # the next day: owed at two passes in a row again, then sent
    await reconciler.run_pass()
    await reconciler.run_pass()
    assert b"acme/ann" in [record.key for record in pipeline.topics[TURNS]]
    assert len(await service.journal.pending()) == 2, "nothing settled while held back"


async def test_a_start_sends_a_spent_tenants_owed_turns_too(tmp_path: Path) -> None:
    """After a crash or a broker roll the broker's copies are gone: a spent tenant's turns are
    sent like any (they wait in the stages again); held back, a later turn stored before them
    would have them settled as passed, and lost."""
    pipeline = Pipeline(await make_deps())
    service = await service_for(pipeline, tmp_path)
    await service.add_turns([turn("acme/ann", 1)])
    pipeline.topics.clear()  # the roll: the broker holds nothing
    reconciler = Reconciler(
        pipeline.deps.repo, service.journal, pipeline.send, paused=lambda _: True
    )
    owed = await reconciler.start()
    assert owed.turns == 1
    await service.add_turns([turn("acme/ann", 2)])
    await pipeline.drain()
    await reconciler.run_pass()
    assert [p.turn_id for p in await pipeline.deps.repo.stm_pages("acme/ann")] == ["t001", "t002"]
