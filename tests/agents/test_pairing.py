"""The pairing stage: a bus's messages (several channels) become turns of one memory."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from adapters.journal import NoJournal, SqliteJournal
from adapters.repository import PAIRING_DOC
from adapters.stores.edge import EdgeStore
from memory.ids import message_turn_id
from memory.pairing import PairingState, message_digest
from schemas.codec import dumps
from schemas.message import MessageEvent
from schemas.records import PairingTick
from schemas.topics import DLQ, MESSAGES, TURNS, user_key
from service.response import ResponseService
from streams.reconciler import Reconciler
from tests.support.builders import msg
from tests.support.fakes import FakeClock, Pipeline, make_deps
from tests.support.pipelines import send_messages

WHATSAPP = [
    msg(1, "user", "My parcel 42 has not arrived.", "wa-1", "whatsapp"),
    msg(2, "assistant", "Sorry! Parcel 42 ships today.", "wa-1", "whatsapp"),
]
EMAIL = [
    msg(3, "user", "Hello, I moved to Bergen.", "mail-7", "email"),
    msg(4, "user", "Please update my address.", "mail-7", "email"),
    msg(5, "assistant", "Done: your address is now in Bergen.", "mail-7", "email"),
]


async def test_two_channels_of_one_user_end_up_in_one_memory() -> None:
    pipeline = Pipeline(await make_deps(stm_capacity=7))
    interleaved = [EMAIL[0], WHATSAPP[0], EMAIL[1], WHATSAPP[1], EMAIL[2]]
    await send_messages(pipeline, interleaved)
    await pipeline.drain()
    pages = await pipeline.deps.repo.stm_pages("ann", with_vectors=False)
    assert [(p.channel, p.query, p.response) for p in pages] == [
        ("whatsapp", "My parcel 42 has not arrived.", "Sorry! Parcel 42 ships today."),
        ("email", "Hello, I moved to Bergen.\nPlease update my address.", EMAIL[2].text),
    ]
    assert [p.turn_id for p in pages] == [
        message_turn_id("ann", "m2"),
        message_turn_id("ann", "m5"),
    ]
    assert pages[1].meta == {"n": 5, "conversation_id": "mail-7", "message_ids": ["m3", "m4", "m5"]}
    assert not pipeline.dead_letters()


async def test_replaying_the_messages_changes_nothing() -> None:
    pipeline = Pipeline(await make_deps(stm_capacity=7))
    await send_messages(pipeline, [*WHATSAPP, *EMAIL])
    await pipeline.drain()
    pipeline.offsets[MESSAGES] = 0
    pipeline.tables["pairing"].clear()  # the stage rebuilds its state from the store
    await pipeline.drain()
    pages = await pipeline.deps.repo.stm_pages("ann", with_vectors=False)
    assert len(pages) == 2
    assert len(pipeline.topics[TURNS]) == 2  # replayed messages made no new turn


async def test_an_unanswered_message_becomes_a_turn_with_an_empty_response_after_the_wait() -> None:
    deps = await make_deps(stm_capacity=7, pairing_wait_s=60)
    clock = deps.clock
    assert isinstance(clock, FakeClock)
    pipeline = Pipeline(deps)
    await send_messages(pipeline, [WHATSAPP[0]])
    await pipeline.drain()
    tick = PairingTick(user_id="ann", at=clock.now() + 30)
    await pipeline.send(MESSAGES, user_key("ann"), dumps(tick))
    await pipeline.drain()
    assert await deps.repo.stm_pages("ann") == []  # still waiting for the reply
    clock.at += 61
    await pipeline.send(MESSAGES, user_key("ann"), dumps(tick.model_copy(update={"at": clock.at})))
    await pipeline.drain()
    [page] = await deps.repo.stm_pages("ann", with_vectors=False)
    assert (page.query, page.response) == (WHATSAPP[0].text, "")
    assert page.turn_id == message_turn_id("ann", "m1")
    # the late reply is a turn of its own, with an empty query
    await send_messages(pipeline, [WHATSAPP[1]])
    await pipeline.drain()
    pages = await deps.repo.stm_pages("ann", with_vectors=False)
    assert [(p.query, p.response) for p in pages][-1] == ("", WHATSAPP[1].text)


@pytest.mark.parametrize("engine", ["edge", "qdrant"])
async def test_the_reconciler_makes_an_unanswered_message_memory_on_every_store(
    engine: str, tmp_path: Path
) -> None:
    """The pairing timeout is a guarantee: within the wait plus one reconcile pass, answered or
    not. On Qdrant Edge the reconciler's boolean filter once found no waiting user."""
    store = EdgeStore(tmp_path / "qdrant") if engine == "edge" else None
    deps = await make_deps(store, stm_capacity=7, pairing_wait_s=5)
    clock = deps.clock
    assert isinstance(clock, FakeClock)
    pipeline = Pipeline(deps)
    reconciler = Reconciler(deps.repo, NoJournal(), pipeline.send, clock=clock)
    await send_messages(pipeline, [WHATSAPP[0]])
    await pipeline.drain()
    assert (await reconciler.run_pass()).ticks == 1  # waiting, not yet due
    await pipeline.drain()
    assert await deps.repo.stm_pages("ann") == []
    clock.at += 5
    await reconciler.run_pass()
    await pipeline.drain()
    [page] = await deps.repo.stm_pages("ann", with_vectors=False)
    assert (page.query, page.response) == (WHATSAPP[0].text, "")
    assert (await reconciler.run_pass()).ticks == 0  # nothing waits any more
    await deps.store.close()


async def test_a_customer_message_long_after_the_last_one_starts_a_new_turn() -> None:
    pipeline = Pipeline(await make_deps(stm_capacity=7, pairing_wait_s=60))
    late = msg(7, "user", "Are you there?", "wa-1", "whatsapp", at=600)
    reply = msg(8, "assistant", "Yes, here.", "wa-1", "whatsapp", at=610)
    await send_messages(pipeline, [WHATSAPP[0], late, reply])
    await pipeline.drain()
    pages = await pipeline.deps.repo.stm_pages("ann", with_vectors=False)
    assert [(p.query, p.response) for p in pages] == [
        (WHATSAPP[0].text, ""),
        ("Are you there?", "Yes, here."),
    ]


async def test_bad_messages_are_dead_lettered_and_the_next_ones_go_on() -> None:
    pipeline = Pipeline(await make_deps(stm_capacity=7))
    bad = dumps(WHATSAPP[0]).replace(b'"user"', b'"customer"')
    await pipeline.send(MESSAGES, user_key("ann"), bad)
    await pipeline.send(MESSAGES, user_key("bob"), dumps(WHATSAPP[0]))  # not the user's key
    await send_messages(pipeline, WHATSAPP)
    await pipeline.drain()
    reasons = [(d.headers["error"], d.headers["stage"]) for d in pipeline.topics[DLQ]]
    assert reasons == [(b"invalid", b"pairing"), (b"invalid", b"pairing")]
    assert b"role" in pipeline.topics[DLQ][0].headers["reason"]
    assert len(await pipeline.deps.repo.stm_pages("ann")) == 1


async def test_a_delete_purges_waiting_messages_and_drops_those_sent_before_it(
    tmp_path: Path,
) -> None:
    pipeline = Pipeline(await make_deps(stm_capacity=7))
    service = ResponseService(pipeline.deps, pipeline)
    await service.add_messages([EMAIL[0]])
    await pipeline.drain()
    assert await pipeline.deps.repo.load_doc("ann", PAIRING_DOC)
    await service.add_messages([EMAIL[1]])  # in flight when the DELETE comes
    await service.forget("ann")
    await pipeline.drain()
    assert await pipeline.deps.repo.load_doc("ann", PAIRING_DOC) is None
    await service.add_messages([msg(9, "user", "I am new here.", "wa-2", "whatsapp")])
    await service.add_messages([msg(10, "assistant", "Welcome!", "wa-2", "whatsapp")])
    await service.add_messages([EMAIL[2]])  # its customer messages were forgotten
    await pipeline.drain()
    pages = await pipeline.deps.repo.stm_pages("ann", with_vectors=False)
    assert [(p.query, p.response) for p in pages] == [
        ("I am new here.", "Welcome!"),
        ("", EMAIL[2].text),
    ]


async def test_a_crash_loses_no_acknowledged_message(tmp_path: Path) -> None:
    journal = SqliteJournal(tmp_path / "journal.sqlite3")
    pipeline = Pipeline(await make_deps(stm_capacity=7), journal=journal)
    service = ResponseService(pipeline.deps, pipeline, journal)
    reconciler = Reconciler(pipeline.deps.repo, journal, pipeline.send, pipeline.deps.clock)
    await service.add_messages([EMAIL[0]])
    await pipeline.drain()  # the customer message waits in the store
    await service.add_messages([EMAIL[1], EMAIL[2]])
    await pipeline.step(MESSAGES)  # paired: the turn is on the topic, not yet placed
    pipeline.crash()  # the embedded broker and the tables forget everything
    await reconciler.start()
    await pipeline.drain()
    [page] = await pipeline.deps.repo.stm_pages("ann", with_vectors=False)
    assert page.query == "Hello, I moved to Bergen.\nPlease update my address."
    await service.add_messages([msg(6, "user", "Thanks", "mail-7", "email")])
    pipeline.crash()  # acknowledged, never consumed
    await reconciler.start()
    await pipeline.drain()
    doc = await pipeline.deps.repo.load_doc("ann", PAIRING_DOC)
    assert doc is not None
    assert [m["message_id"] for m in doc["pending"]["mail-7"]] == ["m6"]
    await reconciler.run_pass()
    assert await journal.pending_messages() == []
    assert await journal.pending() == []


async def test_a_delete_racing_a_message_waits_for_its_send_and_then_wins() -> None:
    """The DELETE started while a message is between its journal entry and its send waits for
    the send, so the message is ahead of the marker and is forgotten with the rest."""
    pipeline = Pipeline(await make_deps(stm_capacity=7))
    racer: asyncio.Task[object] | None = None

    class RacingSink:
        async def send(self, topic: str, key: bytes, value: bytes) -> None:
            nonlocal racer
            if topic == MESSAGES and racer is None and b'"message_id":"m4"' in value:
                racer = asyncio.create_task(service.forget("ann"))
                await asyncio.sleep(0.01)  # give the DELETE every chance to run now
            await pipeline.send(topic, key, value)

    service = ResponseService(pipeline.deps, RacingSink())
    await service.add_messages([EMAIL[0]])
    await service.add_messages([EMAIL[1]])
    assert racer is not None
    await racer
    sent = [s.value for s in pipeline.topics[MESSAGES]]
    marker = next(i for i, value in enumerate(sent) if b'"kind":"forget"' in value)
    assert marker > next(i for i, value in enumerate(sent) if b'"message_id":"m4"' in value)
    await service.add_messages([EMAIL[2]])
    await pipeline.drain()
    pages = await pipeline.deps.repo.stm_pages("ann", with_vectors=False)
    assert [(p.query, p.response) for p in pages] == [("", EMAIL[2].text)]


async def test_a_turn_paired_while_a_delete_deletes_does_not_outlive_it(tmp_path: Path) -> None:
    """Wired as the embedded stack wires it (the pairing stage writes through the service):
    the stage found no tombstone because the DELETE was still deleting the user's points,
    then waited for the user's lock, and journaled the turn behind the marker, where it
    was kept. The write now asks again once it holds the lock (found by review)."""
    journal = SqliteJournal(tmp_path / "journal.sqlite3")
    pipeline = Pipeline(await make_deps(stm_capacity=7), journal=journal)
    service = ResponseService(pipeline.deps, pipeline, journal)
    pipeline.stages[MESSAGES].write_turns = service.write_turns  # as streams/stack.py wires it
    await service.add_messages([EMAIL[0], EMAIL[1]])
    await pipeline.drain()  # the customer's messages wait in the pairing state
    await service.add_messages([EMAIL[2]])  # the reply: pairing will make a turn of the three
    repo = pipeline.deps.repo
    deleting, release = asyncio.Event(), asyncio.Event()
    delete_user = repo.store.delete_user

    async def slow_delete_user(collection: str, user_id: str) -> int:
        deleting.set()
        await release.wait()  # the DELETE holds the user's lock, no tombstone yet
        return await delete_user(collection, user_id)

    repo.store.delete_user = slow_delete_user  # type: ignore[method-assign]
    delete = asyncio.create_task(service.forget("ann"))
    await deleting.wait()
    pairing = asyncio.create_task(pipeline.step(MESSAGES))  # finds no tombstone, pairs
    await asyncio.sleep(0.1)
    release.set()
    await delete
    await pairing
    await pipeline.drain()
    assert await repo.stm_pages("ann", with_vectors=False) == []
    assert not [s for s in pipeline.topics[TURNS] if b'"kind":"forget"' not in s.value], (
        "no turn of the pre-DELETE messages was sent"
    )


async def test_a_message_id_already_journaled_or_paired_is_not_sent_again(
    tmp_path: Path,
) -> None:
    """Ids are unique per user: another user's message with the same id is a message."""
    journal = SqliteJournal(tmp_path / "journal.sqlite3")
    pipeline = Pipeline(await make_deps(stm_capacity=7), journal=journal)
    service = ResponseService(pipeline.deps, pipeline, journal)
    assert await service.add_messages([EMAIL[0]]) == [None]
    changed = EMAIL[0].model_copy(update={"text": "I moved to Oslo."})
    bobs = EMAIL[1].model_copy(update={"user_id": "bob"})
    journaled = await service.add_messages([changed, EMAIL[1], bobs, EMAIL[1]])
    first = message_digest(EMAIL[0])
    assert journaled == [first, None, None, message_digest(EMAIL[1])]  # journal, then this call
    await service.add_messages([EMAIL[2]])
    await pipeline.drain()
    await journal.settle_queued(pipeline.deps.store.flush)
    assert await journal.pending_messages() == []
    paired = await service.add_messages([changed, EMAIL[2]])
    assert paired == [first, message_digest(EMAIL[2])]  # from the pairing document now
    sent = [m for m in pipeline.topics[MESSAGES]]
    assert len(sent) == 4  # m3, m4, bob's m4, m5: no copy went out twice


async def test_concurrent_copies_of_one_message_are_sent_once(tmp_path: Path) -> None:
    journal = SqliteJournal(tmp_path / "journal.sqlite3")
    pipeline = Pipeline(await make_deps(stm_capacity=7), journal=journal)
    service = ResponseService(pipeline.deps, pipeline, journal)
    outcomes = await asyncio.gather(*(service.add_messages([EMAIL[0]]) for _ in range(20)))
    assert sorted(outcome is None for [outcome] in outcomes) == [False] * 19 + [True]
    assert len(pipeline.topics[MESSAGES]) == 1


async def test_a_queued_settle_never_takes_a_later_entry_of_the_same_message_id(
    tmp_path: Path,
) -> None:
    """Paired, then a DELETE, then the same id accepted again before the next flush: the
    settle queued for the first copy must leave the second journaled."""
    journal = SqliteJournal(tmp_path / "journal.sqlite3")
    await journal.append_messages([EMAIL[0]])
    await journal.settle_messages("ann", ["m3"])  # stored by the pairing stage; queued
    await journal.forget_user("ann")
    await journal.append_messages([EMAIL[0]])  # accepted again after the DELETE

    async def flushed() -> None:
        return None

    assert await journal.settle_queued(flushed) == 1
    assert [entry.page_id for entry in await journal.pending_messages()] == ["m3"]


def test_a_turn_keeps_the_conversation_and_the_customers_channel() -> None:
    """The reply may come without a channel: the turn keeps the customer's (and the
    conversation), or a filter on that channel would miss it."""
    state = PairingState()
    asked = msg(1, "user", "Where is my parcel?", "c-7", "web")
    reply = MessageEvent.model_validate(
        msg(2, "assistant", "It ships today.", "c-7", "web").model_dump() | {"channel": None}
    )
    assert state.receive(asked, 0.0, 60.0) == []
    (turn,) = state.receive(reply, 1.0, 60.0)
    assert (turn.channel, turn.conversation_id) == ("web", "c-7")
