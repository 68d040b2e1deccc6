"""Bounded memory on the embedded stack: topic retention, and the broker's log roll.

A budget of 1 MB makes the stack recycle its broker at every check: a plain restart, writes
refused meanwhile (503 with Retry-After), a fresh broker and worker, the reconciler re-sends
what is owed. Clients keep writing, sending a refused write again.
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from memory.ids import message_turn_id
from memoryos_client.aio import AsyncMemoryClient
from schemas.codec import dumps
from schemas.errors import BrokerError, Restarting
from schemas.message import MessageEvent
from schemas.topics import MESSAGES, user_key
from streams import stack as stack_module
from streams.commands import ingest as ingest_command
from streams.progress import NO_PROGRESS
from streams.reconciler import Owed, Reconciler
from streams.retention import topic_configs
from streams.stack import Stack
from tests.support.builders import make_turns
from tests.support.stacks import eventually, running_stack

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]

USERS = ("roll-a", "roll-b", "roll-c")
PER_USER = 36
STM = 7
# Faust's own leader-election topic carries no user data; it keeps the broker's defaults.
UNMANAGED = ("__consumer_offsets", "memoryos-__assignor-__leader")


async def broker_topic_configs(bootstrap: str) -> dict[str, dict[str, str]]:
    """Every topic on the broker with the configuration the broker reports for it."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        names = [name for name in await admin.list_topics() if name not in UNMANAGED]
        resources = [ConfigResource(ConfigResourceType.TOPIC, name) for name in names]
        found: dict[str, dict[str, str]] = {}
        for response in await admin.describe_configs(resources):
            for resource in response.resources:
                _, _, _, name, entries = resource[:5]
                found[name] = {entry[0]: entry[1] for entry in entries}
        return found
    finally:
        await admin.close()


async def test_every_topic_is_created_with_its_retention_read_back_from_the_broker(
    tmp_path: Path,
) -> None:
    async with running_stack(tmp_path / "data", turns_retention_s=7200) as stack:
        assert stack.broker is not None
        expected = topic_configs(stack.settings)
        found = await eventually(lambda: broker_topic_configs(stack.broker.bootstrap))
        assert set(found) == set(expected), "every topic on the broker has a policy, and only"
        for topic, config in expected.items():
            assert found[topic] == config, topic
        assert found["memoryos.turns"]["retention.ms"] == "7200000"


def message_pair(user: str, said: str, answered: str) -> list[MessageEvent]:
    """A customer's message (m1) and the reply (m2) five seconds later, in conversation c1."""
    at = datetime(2024, 3, 2, 9, 0, tzinfo=UTC)
    return [
        MessageEvent(user_id=user, conversation_id="c1", message_id="m1", role="user",
                     text=said, timestamp=at),
        MessageEvent(user_id=user, conversation_id="c1", message_id="m2", role="assistant",
                     text=answered, timestamp=at + timedelta(seconds=5)),
    ]  # fmt: skip


def memory_summary(memory: dict[str, Any]) -> tuple[list[str], list[str]]:
    short = [p["turn_id"] for p in memory["short_term"]]
    mid = [p["turn_id"] for s in memory["mid_term"] for p in s["pages"]]
    return short, mid


@pytest.mark.slow
async def test_a_broker_roll_mid_ingest_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    turns = {user: make_turns(user, [(f"{user} plans trip {i % 4}, detail {i}",
                                       f"noted detail {i}") for i in range(PER_USER)])
             for user in USERS}  # fmt: skip
    async with running_stack(
        tmp_path / "data", broker_memory_budget_mb=1, broker_check_interval_s=1.0
    ) as stack:
        assert stack.service is not None
        assert stack.watch is not None
        first_pid = stack.broker.pid if stack.broker else None
        first_worker = weakref.ref(stack.memory_app.app)  # Faust's app, frozen at start-up

        refused = 0

        async def ingest() -> None:
            nonlocal refused
            for start in range(0, PER_USER, 4):  # acknowledged before, during and after rolls
                if start == PER_USER // 2:  # this batch while the broker is being recycled
                    await eventually(lambda: stack.service.restarting is not None,
                                     180, every_s=0.005)  # fmt: skip
                batch = [t for user in USERS for t in turns[user][start : start + 4]]
                refused += await add_through_rolls(stack, batch)
                await asyncio.sleep(0.5)

        await asyncio.gather(ingest(), eventually(lambda: stack.watch.rolls >= 2, 180))
        assert refused, "a batch was refused during a roll, and sent again"
        stack.watch.budget_bytes = 1 << 40  # no more rolls: let the pipeline settle
        assert stack.broker is not None
        assert stack.broker.pid != first_pid
        gc.collect()
        assert first_worker() is None, "the first worker outlived its roll (frozen, in cycles)"
        for user in USERS:
            memory = await eventually(lambda u=user: _complete(stack, u), 240, every_s=1.0)
            short, mid = memory_summary(memory)
            expected = [t.turn_id for t in turns[user]]
            assert sorted(short + mid) == expected, "every acknowledged turn, exactly once"
            assert short == expected[-STM:], "the STM window holds the newest turns, in order"
            by_id = {p["page_id"]: p for p in memory["short_term"]}
            by_id |= {p["page_id"]: p for s in memory["mid_term"] for p in s["pages"]}
            for page in by_id.values():  # one chain, in turn order: per-user order kept
                if page["chain"]["prev"]:
                    assert by_id[page["chain"]["prev"]]["turn_id"] < page["turn_id"]
                    assert by_id[page["chain"]["prev"]]["chain"]["next"] == page["page_id"]


@pytest.mark.slow
async def test_memoryos_ingest_across_rolls_keeps_every_turn_once_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`memoryos ingest` into the embedded stack goes through its HTTP API: a request refused
    during a roll (503 with Retry-After, nothing written) is sent again after it, so every
    line is acknowledged. It used to produce straight to the broker, past the roll: a bulk
    ingest, the likeliest cause of a roll, could have its later turns stored before the older
    ones the roll's start pass re-sent, and the reconciler then took those for processed."""
    monkeypatch.setattr(ingest_command, "JOURNAL_CHUNK", 4)  # many requests, across the rolls
    turns = {user: make_turns(user, [(f"{user} sorts shelf {i}", f"shelf {i} noted")
                                     for i in range(PER_USER)])
             for user in USERS}  # fmt: skip
    lines = [turns[user][i] for i in range(PER_USER) for user in USERS]
    path = tmp_path / "history.jsonl"
    path.write_bytes(b"".join(orjson.dumps(t.model_dump(mode="json")) + b"\n" for t in lines))

    holder: dict[str, Stack] = {}
    rolls_at_ack: list[int] = []  # the rolls done when each request was acknowledged

    class Paced(AsyncMemoryClient):
        async def add_turns(self, items: Any) -> Any:
            answer = await super().add_turns(items)
            watch = holder["stack"].watch
            assert watch is not None
            rolls_at_ack.append(watch.rolls)
            if watch.rolls >= rolls_at_ack[0] + 2:  # two rolls mid-file are the case; more
                watch.budget_bytes = 1 << 40  # (one per 5 s at this budget) only slow it
            await asyncio.sleep(0.5)  # a long file: requests keep coming through the rolls
            return answer

    async with running_stack(
        tmp_path / "data", broker_memory_budget_mb=1, broker_check_interval_s=1.0
    ) as stack:
        assert stack.watch is not None
        holder["stack"] = stack
        async with Paced(f"http://127.0.0.1:{stack.port}") as client:
            report = await ingest_command.post_file(path, client, NO_PROGRESS)
        assert report.acknowledged == len(lines), report.first_failure
        assert rolls_at_ack[-1] >= rolls_at_ack[0] + 2, "requests acknowledged across rolls"
        stack.watch.budget_bytes = 1 << 40  # no more rolls: let the pipeline settle
        for user in USERS:
            await each_turn_once_in_order(stack, user, turns[user], 240)
        assert stack.deps is not None
        passed = stack.deps.metrics.journal_settled.labels(how="passed")._value.get()
        assert passed == 0, "no turn settled without its page"


async def add_through_rolls(stack: Stack, batch: list[Any]) -> int:
    """``batch`` acknowledged, sent again after each refusal (a client honouring Retry-After);
    returns how many times it was refused."""
    assert stack.service is not None
    for refusals in range(1000):
        try:
            await stack.service.add_turns(batch)
            return refusals
        except Restarting:
            await asyncio.sleep(0.1)
    raise AssertionError("refused for over 100 s")


async def _complete(stack: Stack, user: str) -> dict[str, Any] | None:
    assert stack.service is not None
    memory = await stack.service.get_memory(user)
    short, mid = memory_summary(memory)
    return memory if len(short) + len(mid) >= PER_USER and len(short) == STM else None


@pytest.mark.slow
async def test_a_write_during_a_roll_is_refused_and_the_turns_after_it_are_kept_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window that lost turns in a soak when a roll accepted writes: a turn acknowledged
    after the reconciler's start pass had read the journal, then later turns of its user.
    A roll now refuses it (Restarting: 503 with Retry-After) with nothing written; sent
    again once the roll is done, it goes out at once through the open gate, in order."""
    user, count = "roll-window", 12
    turns = make_turns(user, [(f"{user} packs box {i}", f"box {i} noted") for i in range(count)])
    holder: dict[str, Stack] = {}
    refused: list[int] = []

    class WritesDuringTheWindow(Reconciler):
        async def start(self) -> Owed:
            owed = await super().start()  # the journal has been read and its turns sent
            stack = holder.get("stack")
            if stack is not None:
                assert stack.service is not None
                with pytest.raises(Restarting) as exc:
                    await stack.service.add_turns(turns[4:6])
                refused.append(exc.value.retry_after_s)
            return owed

    monkeypatch.setattr(stack_module, "Reconciler", WritesDuringTheWindow)
    async with running_stack(tmp_path / "data") as stack:  # periodic passes 60 s apart
        assert stack.service is not None
        assert stack.gate is not None
        await stack.service.add_turns(turns[:4])
        await eventually(lambda: _pages(stack, user, 4), 120, every_s=0.5)
        holder["stack"] = stack
        await stack.recycle_broker()
        assert refused, "the write inside the roll was refused"
        dropped = stack.gate.dropped
        await stack.service.add_turns(turns[4:6])  # sent again, as a client does
        await stack.service.add_turns(turns[6:])
        assert stack.gate.dropped == dropped, "the gate is open as the roll returns"
        await each_turn_once_in_order(stack, user, turns, 90)


async def each_turn_once_in_order(
    stack: Stack, user: str, turns: list[Any], timeout_s: float
) -> None:
    """Every acknowledged turn in memory exactly once, and the STM window the newest, in order."""
    memory = await eventually(lambda: _pages(stack, user, len(turns)), timeout_s, every_s=1.0)
    short, mid = memory_summary(memory)
    expected = [t.turn_id for t in turns]
    assert sorted(short + mid) == expected, "every acknowledged turn, exactly once"
    assert short == expected[-STM:], "the STM window holds the newest turns, in order"


async def _pages(stack: Stack, user: str, count: int) -> dict[str, Any] | None:
    assert stack.service is not None
    memory = await stack.service.get_memory(user)
    short, mid = memory_summary(memory)
    return memory if len(short) + len(mid) >= count else None


@pytest.mark.slow
async def test_a_delete_during_a_roll_is_refused_and_removes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A DELETE inside a roll (after the start pass, where the gate once dropped its markers
    and a catch-up had to send them ahead of the user's later turns) is refused with nothing
    removed; sent again after the roll, it forgets the user, and what the user says after it
    is kept."""
    user = "roll-forgotten"
    before = make_turns(user, [(f"{user} old secret {i}", f"noted {i}") for i in range(2)])
    after = make_turns(user, [(f"{user} fresh start", "welcome back")], prefix="n")
    holder: dict[str, Stack] = {}
    outcome: list[str] = []

    class DeletesAfterThePass(Reconciler):
        async def start(self) -> Owed:
            owed = await super().start()
            stack = holder.get("stack")
            if stack is not None:
                assert stack.service is not None
                with pytest.raises(Restarting):
                    await stack.service.forget(user)
                outcome.append("refused")
            return owed

    monkeypatch.setattr(stack_module, "Reconciler", DeletesAfterThePass)
    async with running_stack(tmp_path / "data") as stack:
        assert stack.service is not None
        service = stack.service
        await service.add_turns(before)
        await eventually(lambda: _pages(stack, user, 2), 120, every_s=0.5)
        holder["stack"] = stack
        await stack.recycle_broker()
        assert outcome == ["refused"]
        assert not await service.forgetting(user), "the refused DELETE opened nothing"
        assert len(memory_summary(await service.get_memory(user))[0]) == 2
        holder.clear()
        await service.forget(user)  # sent again after the roll

        async def complete() -> bool:
            return not await service.forgetting(user)

        await eventually(complete, 60, every_s=0.5)
        await service.add_turns(after)
        await eventually(lambda: _pages(stack, user, 1), 30, every_s=0.5)
        await asyncio.sleep(3)  # time for a wrongly re-sent old turn to be placed
        memory = await service.get_memory(user)
        short, mid = memory_summary(memory)
        assert sorted(short + mid) == [after[0].turn_id], "only what came after"


@pytest.mark.slow
async def test_a_failed_roll_is_tried_again_with_writes_still_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first roll's catch-up fails: the roll is tried again, writes refused meanwhile
    (a turn sent in between is refused, not accepted ahead of the retry's start pass), then
    every turn is placed once, in order."""
    user, count = "roll-retried", 8
    turns = make_turns(user, [(f"{user} step {i}", f"step {i} done") for i in range(count)])
    failures: list[str] = []
    rolling: list[bool] = []  # the start-up catch-up (its gate closed too) is left alone
    catch_up = Stack.catch_up_journal

    async def fails_once(self: Stack) -> int:
        if rolling and not failures:
            assert self.service is not None
            with pytest.raises(Restarting):
                await self.service.add_turns(turns[3:5])
            failures.append("catch-up")
            raise BrokerError("the fresh broker went away")
        return await catch_up(self)

    monkeypatch.setattr(Stack, "catch_up_journal", fails_once)
    async with running_stack(tmp_path / "data") as stack:
        assert stack.service is not None
        assert stack.deps is not None
        await stack.service.add_turns(turns[:3])
        await eventually(lambda: _pages(stack, user, 3), 120, every_s=0.5)
        rolling.append(True)
        await stack.recycle_broker()
        assert failures, "the first try failed"
        assert stack.gate is not None
        assert not stack.gate.closed
        assert stack.service.restarting is None
        await stack.service.add_turns(turns[3:])
        await each_turn_once_in_order(stack, user, turns, 60)
        rolls = stack.deps.metrics.broker_rolls
        assert rolls.labels(outcome="failed")._value.get() == 1
        assert rolls.labels(outcome="done")._value.get() == 1


async def test_a_turn_the_pairing_stage_makes_while_the_gate_is_closed_is_sent_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pairing stage journaled the turns it made and sent them to its own producer, past
    the gate: during a roll the catch-up then read the same journal entry and sent it again,
    and a turn sent twice can be linked twice (found by review). It now writes them as the
    service writes a client's: with the gate closed the send is dropped and the journal
    entry is what goes out, once."""
    user = "roll-paired"
    pair = message_pair(user, "where is my parcel", "it left the depot")
    catch_up, closed_at_catch_up = Stack.catch_up_journal, []

    async def noting(self: Stack) -> int:
        assert self.gate is not None
        closed_at_catch_up.append(self.gate.closed)
        return await catch_up(self)

    monkeypatch.setattr(Stack, "catch_up_journal", noting)
    async with running_stack(tmp_path / "data") as stack:
        assert closed_at_catch_up == [True], "start keeps the gate closed until its catch-up"
        assert stack.service is not None
        assert stack.gate is not None
        assert stack.service.writes is stack._writes, "the catch-up's lock is the writers'"
        gate, journal = stack.gate, stack.journal
        gate.close()  # as a roll does; the messages go past it, as the reconciler sends them
        for message in pair:
            await stack._send(MESSAGES, user_key(user), dumps(message))
        paired = message_turn_id(user, "m2")

        async def journaled() -> bool:
            return any(entry.user_id == user for entry in await journal.pending())

        await eventually(journaled, 60, every_s=0.2)
        assert gate.dropped == 1, "the made turn's own send was dropped by the closed gate"
        assert await stack.catch_up_journal() == 1, "and the journal entry sent, once"
        memory = await eventually(lambda: _pages(stack, user, 1), 60, every_s=0.5)
        short, mid = memory_summary(memory)
        assert short + mid == [paired]
