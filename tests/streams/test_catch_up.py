"""Stack.catch_up_journal: what a start (and a roll, which starts as a start does) sends from
the journal before its gate opens; and a roll's refusal of the clients' writes."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from adapters.journal import NoJournal, SqliteJournal
from adapters.metrics import Metrics
from adapters.settings import Settings
from schemas.codec import dumps
from schemas.errors import BrokerError, Restarting
from schemas.message import MessageEvent
from schemas.topics import TURNS, user_key
from schemas.turn import TurnEvent
from service.response import ResponseService
from streams.reconciler import Reconciler
from streams.roll import GatedSink
from streams.stack import Stack
from tests.support.builders import make_turns
from tests.support.fakes import Pipeline, make_deps

pytestmark = pytest.mark.asyncio
MESSAGE = MessageEvent(
    user_id="u",
    conversation_id="c",
    message_id="m",
    role="user",
    text="hello",
    timestamp=datetime(2024, 3, 1, 9, 0, tzinfo=UTC),
)


def stack_with(
    tmp_path: Path, read_through: int, fail_once: bool = True
) -> tuple[Stack, list[bytes], GatedSink]:
    """``fail_once``: the first send fails (a fresh producer not ready yet)."""
    stack = Stack(Settings(data_dir=tmp_path))
    stack.deps = SimpleNamespace(metrics=Metrics())  # type: ignore[assignment]
    sent: list[bytes] = []
    failures = [BrokerError("the fresh producer is not ready yet")] if fail_once else []

    async def send(topic: str, key: bytes, value: bytes) -> None:
        if failures:
            raise failures.pop()
        sent.append(value)

    stack._send = send  # type: ignore[method-assign]
    stack.gate = GatedSink(send, journaled=True, timeout_s=30)
    stack.gate.close()
    stack.reconciler = SimpleNamespace(  # type: ignore[assignment]
        read_through=read_through, messages_read_through=0, embedded=True
    )
    return stack, sent, stack.gate


async def test_the_catch_up_sends_what_the_start_pass_did_not_read_in_order(
    tmp_path: Path,
) -> None:
    turns = make_turns("u", [(f"step {i}", f"ok {i}") for i in range(5)])
    stack, sent, _ = stack_with(tmp_path, read_through=2)  # the start pass read seq 1 and 2
    stack.journal = SqliteJournal(tmp_path / "journal.sqlite3")
    await stack.journal.append(turns)
    assert await stack.catch_up_journal() == 3
    assert sent == [dumps(t) for t in turns[2:]], (
        "after the read, oldest first; a failed send retried"
    )


async def test_the_catch_up_opens_the_gate_itself_and_nothing_after_it_is_dropped(
    tmp_path: Path,
) -> None:
    """The gate opens in the step of the last empty read: a turn acknowledged right after the
    catch-up returns is sent, not dropped (a roll's `wait_for` let such a batch in while the
    gate was still closed, and a soak lost it)."""
    turns = make_turns("u", [(f"step {i}", f"ok {i}") for i in range(3)])
    stack, sent, gate = stack_with(tmp_path, read_through=0)
    stack.journal = SqliteJournal(tmp_path / "journal.sqlite3")
    await stack.journal.append(turns[:1])
    assert await stack.catch_up_journal() == 1
    assert not gate.closed, "open as the catch-up returns"
    await stack.journal.append(turns[1:])  # acknowledged right after it
    for turn in turns[1:]:
        await gate.send(TURNS, user_key("u"), dumps(turn))
    assert gate.dropped == 0
    assert sent == [dumps(t) for t in turns]


class AcksAfterTheLastRead(SqliteJournal):
    """When a catch-up read finds nothing, a client's turn is written as the service writes
    one (journal, then send, holding the writers' lock shared), as a task of its own: it
    runs at the catch-up's next suspension, whatever that is."""

    def __init__(self, path: Path, late: TurnEvent, stack: Stack) -> None:
        super().__init__(path)
        self.late, self.stack, self.empty = late, stack, False
        self.tasks: list[asyncio.Task[None]] = []

    async def pending(self, limit: int = 10_000, after: int = 0):  # type: ignore[no-untyped-def]
        found = await super().pending(limit, after)
        self.empty = not found
        return found

    async def pending_messages(self, limit: int = 10_000, after: int = 0):  # type: ignore[no-untyped-def]
        found = await super().pending_messages(limit, after)
        if self.empty and not self.tasks:
            self.tasks.append(asyncio.get_running_loop().create_task(self.write()))
        return found

    async def write(self) -> None:
        assert self.stack.gate is not None
        async with self.stack._writes.reader:
            await self.append([self.late])
            await self.stack.gate.send(TURNS, b"u", dumps(self.late))


async def test_a_send_queued_behind_the_last_empty_read_is_not_dropped(tmp_path: Path) -> None:
    """A turn written while the catch-up makes its last read is either wholly before that
    read (journaled, its send dropped, the read finds it) or after the gate opened (sent):
    never dropped with no read to come. (From a review: the gate once opened after an
    await, which let such a send run against the closed gate.)"""
    turns = make_turns("u", [(f"step {i}", f"ok {i}") for i in range(2)])
    stack, sent, _ = stack_with(tmp_path, read_through=0)
    journal = AcksAfterTheLastRead(tmp_path / "journal.sqlite3", turns[1], stack)
    stack.journal = journal
    await journal.append(turns[:1])
    await stack.catch_up_journal()
    await asyncio.gather(*journal.tasks)
    assert journal.tasks, "the write raced the catch-up"
    assert sent == [dumps(t) for t in turns]


async def test_the_catch_up_ends_under_steady_concurrent_writes(tmp_path: Path) -> None:
    """Eight writers write as fast as they can through the service while the catch-up runs
    (in the stack only the pairing stage writes then; clients are not served or refused).
    The catch-up holds the writers' lock alone, so it ends while they still write, and every
    turn is sent once, after its user's earlier turns."""
    stack, sent, gate = stack_with(tmp_path, read_through=0)
    stack.journal = SqliteJournal(tmp_path / "journal.sqlite3")
    deps = SimpleNamespace(repo=None, settings=Settings(data_dir=tmp_path), metrics=Metrics())
    service = ResponseService(deps, gate, stack.journal)  # type: ignore[arg-type]
    service.writes = stack._writes
    done = asyncio.Event()
    cap = 3_000  # writes per client before the test gives up on the catch-up ending

    async def client(user: str) -> int:
        for n in range(cap):
            if done.is_set():
                return n
            turn = make_turns(user, [(f"q {n}", f"a {n}")], prefix=f"{user}-{n:05d}-")[0]
            await service.add_turns([turn])
        return cap

    clients = [asyncio.create_task(client(f"user{i}")) for i in range(8)]
    for _ in range(1000):  # until the clients write, their sends dropped by the gate
        if gate.dropped:
            break
        await asyncio.sleep(0.01)
    assert gate.dropped > 0
    await stack.catch_up_journal()
    done.set()
    written = await asyncio.gather(*clients)
    assert max(written) < cap, "the catch-up ended while the clients still wrote"
    by_user: dict[str, list[str]] = {}
    for value in sent:
        turn = TurnEvent.model_validate_json(value)
        by_user.setdefault(turn.user_id, []).append(turn.turn_id)
    for i, count in enumerate(written):
        user = f"user{i}"
        assert by_user[user] == [f"{user}-{n:05d}-000" for n in range(count)], user


async def test_a_cancelled_roll_leaves_the_gate_closed_and_writes_refused(tmp_path: Path) -> None:
    """A stop cancels a roll mid-way: writes stay refused and the gate closed, so a turn the
    pairing stage journals then is sent by the next start, not to a half-started worker ahead
    of earlier turns of its user still unsent in the journal (found by review)."""
    stack, _, gate = stack_with(tmp_path, read_through=0)
    stack.service = SimpleNamespace(restarting=None)  # type: ignore[assignment]
    stack.broker = SimpleNamespace()  # type: ignore[assignment]
    entered = asyncio.Event()

    async def stuck_roll() -> None:
        entered.set()
        await asyncio.Event().wait()

    stack._roll = stuck_roll  # type: ignore[method-assign]
    roll = asyncio.create_task(stack.recycle_broker())
    await entered.wait()
    roll.cancel()
    with pytest.raises(asyncio.CancelledError):
        await roll
    assert gate.closed
    assert stack.service.restarting is not None
    await gate.send(TURNS, user_key("u"), b"a journaled turn")
    assert gate.dropped == 1, "dropped: the journal has it for the next start"


async def test_without_the_journal_the_catch_up_does_not_wait_for_writes_held_at_the_gate(
    tmp_path: Path,
) -> None:
    """MEMORYOS_JOURNAL=off: the closed gate holds a turn's send (nothing journaled to send it
    from) while the write holds the writers' lock shared. Waiting for that lock alone waited
    out the gate's timeout, and the write failed with 503 (found by review)."""
    stack, sent, _ = stack_with(tmp_path, read_through=0)

    async def send(topic: str, key: bytes, value: bytes) -> None:
        sent.append(value)

    stack._send = send  # type: ignore[method-assign]
    gate = stack.gate = GatedSink(send, journaled=False, timeout_s=30)
    gate.close()
    deps = SimpleNamespace(repo=None, settings=Settings(data_dir=tmp_path), metrics=Metrics())
    service = ResponseService(deps, gate)  # type: ignore[arg-type]
    service.writes = stack._writes
    turn = make_turns("u", [("held", "at the gate")])[0]
    write = asyncio.create_task(service.add_turns([turn]))
    await asyncio.sleep(0.05)
    assert not write.done(), "held at the closed gate"
    catching_up = asyncio.create_task(stack.catch_up_journal())
    done, _ = await asyncio.wait({catching_up}, timeout=10)  # the gate waits 30 s
    assert done, "the catch-up did not wait for the held write"
    assert await write == [turn.turn_id]
    assert sent == [dumps(turn)]


async def test_a_turn_written_during_the_start_up_catch_up_is_sent_once(tmp_path: Path) -> None:
    """`Stack.start` makes its gate closed, as a roll closes it: a turn the pairing stage
    wrote during the start-up catch-up went through an open gate and was sent by the catch-up
    again, from the journal (found by review)."""
    stack, sent, _ = stack_with(tmp_path, read_through=0)

    async def send(topic: str, key: bytes, value: bytes) -> None:
        sent.append(value)

    stack._send = send  # type: ignore[method-assign]
    stack.gate = GatedSink(send, journaled=True, timeout_s=30, closed=True)  # as Stack.start
    stack.journal = SqliteJournal(tmp_path / "journal.sqlite3")
    deps = SimpleNamespace(repo=None, settings=Settings(data_dir=tmp_path), metrics=Metrics())
    service = ResponseService(deps, stack.gate, stack.journal)  # type: ignore[arg-type]
    service.writes = stack._writes
    turn = make_turns("u", [("paired at start", "from a re-sent message")])[0]
    await service.add_turns([turn])  # before the catch-up's read
    await stack.catch_up_journal()
    assert sent == [dumps(turn)]
    assert not stack.gate.closed


async def test_a_worker_start_keeps_what_a_user_said_after_a_replicas_delete() -> None:
    """A worker on a real Kafka (no journal, DELETEs served by separate service replicas) sends
    no DELETE marker from its start-up catch-up. A DELETE served by a replica between the start
    pass's read and the catch-up's read sent its own marker; a second copy behind the user's
    next turn would be honoured while the tombstone is open and purge that turn, which no
    journal sends again. Only the embedded broker's catch-up sends markers (its gate drops
    them)."""
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


class SlowJournal(SqliteJournal):
    """A journal whose turn appends wait until ``go`` is set."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.go, self.appending = asyncio.Event(), asyncio.Event()

    async def append(self, turns):  # type: ignore[no-untyped-def]
        self.appending.set()
        await self.go.wait()
        await super().append(turns)


def serving(stack: Stack, tmp_path: Path, journal: SqliteJournal) -> ResponseService:
    """The service as `Stack.start` wires it: the stack's gate, journal and locks."""
    assert stack.gate is not None
    stack.journal = journal
    deps = SimpleNamespace(repo=None, settings=Settings(data_dir=tmp_path), metrics=Metrics())
    service = ResponseService(deps, stack.gate, journal)  # type: ignore[arg-type]
    service.writes, service.forget_lock = stack._writes, stack._forget_lock
    stack.service = service
    stack.broker = SimpleNamespace()  # type: ignore[assignment]
    return service


async def test_a_roll_refuses_clients_writes_with_nothing_written_then_accepts_them(
    tmp_path: Path,
) -> None:
    """During a roll a client's turn, message or DELETE is refused (Restarting: 503 with
    Retry-After) before anything of it is journaled or sent, so sending it again is safe;
    the pairing stage's turns are not refused (journaled, the closed gate drops their send,
    the catch-up sends them). Once the roll is done, writes are accepted and sent."""
    stack, sent, gate = stack_with(tmp_path, read_through=0)
    journal = SqliteJournal(tmp_path / "journal.sqlite3")
    service = serving(stack, tmp_path, journal)
    gate.open(stack._send)
    turns = make_turns("u", [(f"step {i}", f"ok {i}") for i in range(4)])
    inside, release = asyncio.Event(), asyncio.Event()

    async def roll() -> None:  # as `Stack._roll`: stop, start, then the catch-up opens the gate
        inside.set()
        await release.wait()
        await stack.catch_up_journal()

    stack._roll = roll  # type: ignore[method-assign]
    rolling = asyncio.create_task(stack.recycle_broker())
    await inside.wait()
    for write in (
        service.add_turns(turns[:1]),
        service.add_messages([MESSAGE]),
        service.forget("u"),
    ):
        with pytest.raises(Restarting) as refused:
            await write
        assert refused.value.retry_after_s >= 1
    assert await journal.pending() == [], "nothing of a refused turn was written"
    assert await journal.pending_messages() == []
    assert await service.write_turns(turns[1:2]) == [turns[1].turn_id], "the pairing stage's"
    assert gate.dropped == 1
    release.set()
    await rolling
    assert service.restarting is None
    assert await service.add_turns(turns[2:]) == [t.turn_id for t in turns[2:]]
    assert sent == [dumps(t) for t in turns[1:]], "the pairing stage's turn, then the rest"


async def test_a_write_in_flight_when_a_roll_begins_is_finished_not_refused(
    tmp_path: Path,
) -> None:
    """The roll takes the writers' lock alone to start refusing: a write already journaling
    is finished first (journaled and sent through the open gate), never left half done."""
    stack, sent, gate = stack_with(tmp_path, read_through=0, fail_once=False)
    journal = SlowJournal(tmp_path / "journal.sqlite3")
    service = serving(stack, tmp_path, journal)
    gate.open(stack._send)
    turn = make_turns("u", [("in flight", "as the roll begins")])[0]
    write = asyncio.create_task(service.add_turns([turn]))
    await journal.appending.wait()
    inside = asyncio.Event()

    async def roll() -> None:
        inside.set()
        read = await journal.pending()  # as the start pass: it re-sends these if not stored
        stack.reconciler.read_through = max(e.seq for e in read)  # type: ignore[union-attr]
        await stack.catch_up_journal()

    stack._roll = roll  # type: ignore[method-assign]
    rolling = asyncio.create_task(stack.recycle_broker())
    await asyncio.sleep(0.05)
    assert service.restarting is None, "the roll waits for the write in flight"
    assert not inside.is_set()
    journal.go.set()
    assert await write == [turn.turn_id]
    await rolling
    assert sent == [dumps(turn)], "sent once, through the gate before it closed"
