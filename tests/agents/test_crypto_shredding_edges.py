"""Crypto-shredding at its edges (adapters/keyring.py and its use by the stages): crafted
record keys, a store error while opening a sealed record, dead letters and pairing ticks around
a DELETE, and two known limits that predate crypto-shredding (strict ``xfail``, named in
docs/architecture.md, "Crypto-shredding: the text left on the broker").

"Readable" means: after the DELETE completed (its marker passed every stage, the tombstone is
closed), a copy on one of our topics, tables or dead letters is in plain text or opens with a
fresh ``Keyring`` over the store.
"""

from __future__ import annotations

import base64
import binascii
from pathlib import Path
from typing import Any

import orjson
import pytest

from adapters.keyring import KEY_DOC, Keyring, is_sealed
from adapters.ports import PERSONAS
from adapters.repository import PAIRING_DOC
from schemas.codec import dumps
from schemas.errors import InvalidEvent, StoreError
from schemas.records import PairingTick
from schemas.topics import DLQ, MESSAGES, PAGES, PERSONA, TURNS
from schemas.topics import MTM as MTM_TOPIC
from service.response import ResponseService
from streams.reconciler import Reconciler
from tests.support.builders import msg, turn
from tests.support.fakes import FakeLLM, Pipeline, Sent, make_deps
from tests.support.pipelines import send_messages, service_for, stored_turn_ids

pytestmark = pytest.mark.asyncio


@pytest.fixture
async def pipeline() -> Pipeline:
    # The LLM at every stage, continuity included: a test fails the chain stage's calls.
    return Pipeline(await make_deps(continuity_llm="always"))


async def readable(pipeline: Pipeline, needle: bytes) -> list[bytes]:
    """Every copy of ``needle`` on our topics, dead letters and tables that can be read now:
    in plain text, or opened with a fresh keyring (a new process, keys from the store)."""
    values = [s.value for topic in (PAGES, MTM_TOPIC, PERSONA, DLQ) for s in pipeline.topics[topic]]
    for table in pipeline.tables.values():
        for value in table.values():
            inner = value.get("tail") if isinstance(value, dict) and "gen" in value else value
            if isinstance(inner, str):
                try:
                    values.append(base64.b64decode(inner, validate=True))
                    continue
                except (ValueError, binascii.Error):
                    pass
            values.append(orjson.dumps(inner))
    fresh = Keyring(pipeline.deps.repo)
    found = []
    for value in values:
        if not is_sealed(value):
            found += [value] if needle in value else []
            continue
        try:
            opened = await fresh.open(value)
        except InvalidEvent:
            continue
        if opened is not None and needle in opened.plain:
            found.append(opened.plain)
    return found


async def delete_done(pipeline: Pipeline, user: str) -> bool:
    tombstone = await pipeline.deps.repo.tombstone(user)
    return tombstone is not None and not tombstone[1]


async def down(task: str) -> None:
    raise OSError("llm down")


# ---------------------------------------------------------------------------------------------
# Crafted records on the public topics
# ---------------------------------------------------------------------------------------------


async def test_a_record_key_over_65535_bytes_is_dead_lettered_and_other_users_go_on(
    pipeline: Pipeline,
) -> None:
    """A junk record on memoryos.turns whose Kafka key is 70,000 bytes is dead-lettered like any
    junk; the stage does not raise, and the valid turn of bob in the same batch is linked
    (docs/operations.md, Security: "no stage raises, every valid turn's page is stored"). The
    dead-letter sink once sealed it under the key's "user", and ``Keyring.seal`` packs the id's
    length as an unsigned short: ``struct.error`` escaped ``decode_batch``."""
    await pipeline.send(TURNS, b"x" * 70_000, b"{}")
    await pipeline.send(TURNS, b"bob", dumps(turn("bob", 1)))
    raised: Exception | None = None
    try:
        await pipeline.drain()
    except Exception as exc:  # what Faust's agent would see
        raised = exc
    bob = [p.turn_id for p in await pipeline.deps.repo.stm_pages("bob")]
    assert (repr(raised), bob, len(pipeline.dead_letters())) == ("None", ["t001"], 1)


async def test_junk_record_keys_leave_no_data_key_document_in_the_store(
    pipeline: Pipeline,
) -> None:
    """Invalid records on memoryos.turns whose key is no user id (here: with a space, which the
    id rules refuse) are dead-lettered without a data key made for that "user": no DELETE can
    name such an id, so its key document would be kept for good. (Before crypto-shredding a
    non-id key left nothing in the store either: adapters/history.py skips it.)"""
    for n in range(5):
        await pipeline.send(TURNS, f"not a user {n}".encode(), b"{}")
    await pipeline.drain()
    assert len(pipeline.dead_letters()) == 5
    keys = await pipeline.deps.store.scroll(PERSONAS, None, {KEY_DOC: 1})
    assert sorted(str(p.payload["user_id"]) for p in keys) == []


# ---------------------------------------------------------------------------------------------
# Opening a sealed record reads the store: a transient failure there is retried, not bad input
# ---------------------------------------------------------------------------------------------


async def test_a_transient_store_error_while_opening_a_sealed_page_loses_no_turn(
    pipeline: Pipeline, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker restarted (empty key cache) reads a sealed page while the store has a hiccup.
    Opening it reads the store, so the error is retried under the error policy like any store
    error, not taken as bad input: treated as ``invalid``, the page was dead-lettered at once,
    the next turn's page stored, and the reconciler settled the lost turn as processed."""
    service = await service_for(pipeline, tmp_path)
    await service.add_turns([turn("ann", 0), turn("ann", 1)])
    await pipeline.drain(until=TURNS)
    pipeline.deps.keyring.forget("ann")  # the STM stage's process restarted
    repo = pipeline.deps.repo
    load_doc, failed = repo.load_doc, list[str]()

    async def flaky(user_id: str, kind: str) -> dict[str, Any] | None:
        if kind.startswith(KEY_DOC) and not failed:
            failed.append(kind)
            raise StoreError("qdrant: retrieve from personas failed: timed out")
        return await load_doc(user_id, kind)

    monkeypatch.setattr(repo, "load_doc", flaky)
    await pipeline.drain()
    reconciler = Reconciler(repo, service.journal, pipeline.send, keyring=pipeline.deps.keyring)
    await reconciler.start()
    await pipeline.drain()
    errors = [d.headers["error"] for d in pipeline.dead_letters()]
    assert (await stored_turn_ids(pipeline, "ann"), errors) == (["t000", "t001"], [])


# ---------------------------------------------------------------------------------------------
# Dead letters: no pre-DELETE text outlives the DELETE
# ---------------------------------------------------------------------------------------------


async def test_a_turn_dead_lettered_while_its_delete_is_open_stays_forgotten_after_a_replay(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    """A pre-DELETE turn whose processing fails (LLM down) after the DELETE was accepted but
    before its marker reached the chain stage is dead-lettered as a reference without its text
    (reason ``forgotten``): nothing of it is readable, and ``memoryos dlq replay`` (the same
    bytes back to memoryos.turns) does not put the deleted turn back into the user's memory."""
    service = await service_for(pipeline, tmp_path)
    llm = pipeline.deps.llm
    assert isinstance(llm, FakeLLM)
    await service.add_turns([turn("ann", 0, "my secret diagnosis is lupus")])
    await service.forget("ann")
    llm.hook = down
    await pipeline.step(TURNS)  # the turn fails and is dead-lettered; then the marker
    llm.hook = None
    await pipeline.drain()
    assert await delete_done(pipeline, "ann")
    [dead] = pipeline.dead_letters()
    left = await readable(pipeline, b"lupus")
    await pipeline.send(TURNS, dead.key or b"", dead.value)  # memoryos dlq replay
    await pipeline.drain()
    remembered = [p.query for p in await pipeline.deps.repo.stm_pages("ann")]
    assert (remembered, left) == ([], [])


async def test_a_delete_landing_between_latest_and_seal_leaves_no_readable_dead_letter(
    pipeline: Pipeline, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``DeadLetterSink._sealed`` reads the user's generation, then seals; a DELETE may land in
    between (the service and the worker are separate processes), after which no key may be
    made for the generation read. The dead letter is then not written in plain (fail-open,
    readable for the DLQ's whole retention): nothing of the user's text is readable after the
    DELETE."""
    service = await service_for(pipeline, tmp_path)
    llm = pipeline.deps.llm
    assert isinstance(llm, FakeLLM)
    await service.add_turns([turn("ann", 0, "my secret diagnosis is lupus")])
    keyring = pipeline.deps.keyring
    latest = keyring.latest

    async def latest_then_delete(user_id: str) -> int:
        gen = await latest(user_id)
        if await pipeline.deps.repo.tombstone(user_id) is None:
            await service.forget(user_id)  # DELETE /v1/users/ann, from the service process
        return gen

    monkeypatch.setattr(keyring, "latest", latest_then_delete)
    llm.hook = down
    await pipeline.step(TURNS)
    llm.hook = None
    await pipeline.drain()
    assert await delete_done(pipeline, "ann")
    assert await readable(pipeline, b"lupus") == []


async def test_a_users_turn_without_the_user_as_record_key_is_unreadable_after_her_delete(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    """A producer that sends ann's turns with no key, or keyed by something else (a
    conversation id), gets them dead-lettered (right: no order). The dead letter is sealed for
    the user its body names, not the record key's "user" (or nothing without a key), so ann's
    DELETE makes these copies of her text unreadable too (docs/architecture.md,
    Crypto-shredding: every dead letter is sealed for its user)."""
    service = await service_for(pipeline, tmp_path)
    keyless = dumps(turn("ann", 0, "my secret diagnosis is lupus"))
    pipeline.topics[TURNS].append(Sent(None, keyless))  # a producer that sets no key
    await pipeline.send(TURNS, b"conversation-7", dumps(turn("ann", 1, "lupus again")))
    await pipeline.drain()
    assert len(pipeline.dead_letters()) == 2
    await service.forget("ann")
    await pipeline.drain()
    assert await delete_done(pipeline, "ann")
    assert await readable(pipeline, b"lupus") == []


# ---------------------------------------------------------------------------------------------
# The pairing stage: no pre-DELETE message outlives the DELETE under the new key
# ---------------------------------------------------------------------------------------------


async def test_a_tick_queued_before_the_marker_makes_no_pre_delete_message_a_memory(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    """A ``PairingTick`` (the reconciler's, or anyone's: memoryos.messages is public) queued
    before a DELETE's marker does not turn the waiting pre-DELETE message into a turn while the
    DELETE is open. (The root cause predates crypto-shredding: the tick path had no open-DELETE
    check, and the message, sent to memoryos.turns behind the marker, was linked under the new
    generation: in ann's memory and on memoryos.pages after the DELETE completed.)"""
    service = await service_for(pipeline, tmp_path)
    await send_messages(
        pipeline, [msg(1, "user", "my secret diagnosis is lupus", "wa-1", "whatsapp")]
    )
    await pipeline.drain()
    clock = pipeline.deps.clock
    clock.at += 3_600  # type: ignore[attr-defined]  # FakeClock: the message is overdue
    await pipeline.send(MESSAGES, b"ann", dumps(PairingTick(user_id="ann", at=clock.now())))
    await service.forget("ann")
    await pipeline.drain()
    assert await delete_done(pipeline, "ann")
    remembered = [p.query for p in await pipeline.deps.repo.stm_pages("ann")]
    assert (remembered, await readable(pipeline, b"lupus")) == ([], [])


@pytest.mark.xfail(
    strict=True,
    reason="known limit, predates crypto-shredding: the marker's two paths (turns, messages) "
    "are independent; docs/architecture.md, Crypto-shredding: the text left on the broker",
)
async def test_pre_delete_messages_are_forgotten_when_the_pairing_marker_arrives_after_the_delete(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    """A known limit (the root cause predates crypto-shredding; the sealing under the new key
    is new). The marker goes down two independent paths: memoryos.turns (to the persona stage,
    which completes the DELETE) and memoryos.messages (pairing only). If the pairing stage
    lags, the DELETE completes first; the pre-DELETE message ahead of pairing's marker then
    meets a closed tombstone, is taken as new (``Keyring.current`` gives the new generation),
    stored in the pairing document and table sealed under the surviving key; the marker itself
    is skipped ("its DELETE is complete"). A later tick makes it a memory."""
    service = await service_for(pipeline, tmp_path)
    await send_messages(
        pipeline, [msg(1, "user", "my secret diagnosis is lupus", "wa-1", "whatsapp")]
    )
    await service.forget("ann")
    for topic in (TURNS, PAGES, MTM_TOPIC, PERSONA):  # the turns path first
        await pipeline.step(topic)
    assert await delete_done(pipeline, "ann")
    await pipeline.drain()  # now pairing: the message, then its marker
    left = await readable(pipeline, b"lupus")
    doc = await pipeline.deps.repo.load_doc("ann", PAIRING_DOC)
    clock = pipeline.deps.clock
    clock.at += 3_600  # type: ignore[attr-defined]
    await pipeline.send(MESSAGES, b"ann", dumps(PairingTick(user_id="ann", at=clock.now())))
    await pipeline.drain()
    remembered = [p.query for p in await pipeline.deps.repo.stm_pages("ann")]
    assert (left, doc, remembered) == ([], None, [])


# ---------------------------------------------------------------------------------------------
# Redelivery of the public topic (a known limit that predates crypto-shredding)
# ---------------------------------------------------------------------------------------------


@pytest.mark.xfail(
    strict=True,
    reason="known limit, predates crypto-shredding: a replay of the public topic from an old "
    "offset after the DELETE completed is new input; docs/operations.md, Security",
)
async def test_pre_delete_turns_redelivered_after_the_delete_completed_are_not_remembered(
    pipeline: Pipeline,
) -> None:
    """A known limit (it predates crypto-shredding). A chain worker that crashed before
    committing re-reads memoryos.turns from an offset before the DELETE once the DELETE has
    completed (the marker is skipped, as it should be). The pre-DELETE turns are plain on that
    topic; the chain stage links them under the new generation, so the deleted text is in the
    store again and on memoryos.pages under a key that survives the DELETE. (The same happened
    before crypto-shredding, in plain.)"""
    service = ResponseService(pipeline.deps, pipeline)  # Kafka: NoJournal
    await service.add_turns([turn("ann", i, f"my secret diagnosis {i}") for i in range(2)])
    await service.forget("ann")
    await service.add_turns([turn("ann", 100, "A fresh start")])
    await pipeline.drain()
    assert await delete_done(pipeline, "ann")
    pipeline.offsets[TURNS] = 0  # uncommitted offsets are delivered again
    await pipeline.drain()
    remembered = [p.query for p in await pipeline.deps.repo.stm_pages("ann")]
    assert (remembered, await readable(pipeline, b"diagnosis")) == (["A fresh start"], [])
