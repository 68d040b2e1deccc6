"""How every stage processes a batch: users concurrently, one user's events in order.

Faust's agent ``concurrency > 1`` can commit offsets past events still in flight
(faust-streaming issue 606), so each stage runs once and takes batches instead; inside a
batch the users' work runs concurrently and each user's events run in order.

Every consumed record ends processed or dead-lettered, whatever its size or the exception:
``process`` never raises (an escaping exception would make Faust ack the whole batch and
restart the agent), and a dead letter that cannot be written is retried until it is, so the
offset never moves past an event that went nowhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import re
import time
import weakref
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import orjson
from faust.streams import _current_event

from adapters import tracing
from adapters.events_out import EventOut
from adapters.keyring import Keyring, Opened, is_sealed
from adapters.metrics import Metrics
from adapters.ports import Clock, SystemClock
from adapters.token_budget import acting_for, setting_aside
from agents.policy import ErrorPolicy, Verdict
from memory.events import dead_lettered
from schemas.accept import Accepted
from schemas.errors import InvalidEvent
from schemas.topics import user_key
from schemas.turn import DEFAULT_PREFIX, USER_REF_PATTERN

log = logging.getLogger(__name__)
Record = TypeVar("Record")
Work = TypeVar("Work")

MAX_RECORD_BYTES = 256 * 1024  # a valid turn is at most ~50 KB; anything far larger is junk
MAX_DEAD_LETTER_BYTES = 900 * 1024  # under the producer's 1 MB request limit
DEAD_LETTER_PREFIX = 1024
DEAD_LETTER_RETRY_S = (0.2, 1.0, 5.0)
# places for work set aside while its tenant's LLM budget is spent, per place of max_pending
PARKED_FACTOR = 8
SHARED, PARKED = "shared", "parked"
_USER_ID = re.compile(USER_REF_PATTERN.strip("^$"))


@dataclass(frozen=True)
class Source:
    """Where a record came from: for dead letters and for table writes."""

    raw: bytes
    key: bytes | None
    topic: str
    partition: int
    offset: int
    event: Any = None  # faust EventT: kept so table writes find their source partition
    headers: tracing.Headers = None  # the record's headers: its trace context
    timestamp: float | None = None  # the record's Kafka timestamp, seconds

    def accepted(self) -> Accepted:
        """The input contract's defaults for a record of a raw topic (``schemas.accept``)."""
        return Accepted.of_record(self.topic, self.partition, self.offset, self.timestamp, self.raw)

    @classmethod
    def of(cls, event: Any) -> Source:
        message = event.message
        value = event.value
        raw = value if isinstance(value, bytes) else bytes(value or b"")
        headers = getattr(message, "headers", None)
        at = getattr(message, "timestamp", None)
        return cls(
            raw,
            message.key,
            message.topic,
            message.partition,
            message.offset,
            event,
            headers,
            at if isinstance(at, int | float) else None,
        )


@dataclass(frozen=True)
class Consumed(Generic[Record]):
    """One decoded record and its source."""

    record: Record
    source: Source
    prepared: Any = None  # what a stage computed for this record in its batch step
    gen: int | None = None  # the key generation it was sealed with (adapters/keyring.py)


def raw_input(
    decode: Callable[[bytes, Accepted], Record],
) -> Callable[[bytes, Source], Record]:
    """A raw topic's decoder, given the input contract's defaults for each record."""
    return lambda raw, source: decode(raw, source.accepted())


class DeadLetterSink:
    """Writes failed records to ``memoryos.dlq``: the original value, the reason in headers.

    A record too large for the topic goes as a reference (topic, partition, offset, size and
    a prefix) with reason ``too_large``. A failing write is retried with backoff until it
    succeeds: losing the dead letter would lose the event.
    """

    def __init__(
        self,
        stage: str,
        send: Callable[..., Awaitable[Any]],
        metrics: Metrics,
        notes: Callable[[str, Source, str, str, int], Awaitable[None]] | None = None,
        keyring: Keyring | None = None,
        events: EventOut | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.stage = stage
        self._send = send
        self._metrics = metrics
        self._notes = notes  # the user's history (agents/history.py): told after the write
        self._keyring = keyring
        self._events = events  # memory.dead_lettered, for a record that names its user
        self._clock = clock or SystemClock()

    async def send(
        self,
        source: Source,
        kind: str,
        reason: str,
        attempts: int,
        extra_headers: dict[str, bytes] | None = None,
    ) -> None:
        value = source.raw
        if len(value) > MAX_DEAD_LETTER_BYTES:
            kind, value = "too_large", _reference(source)
        sealed = await self._sealed_until_done(source, value)
        if sealed is None:
            # The user has an open DELETE and this record may be from before it: no key may
            # be made for it, and a plain copy would outlive the DELETE. Kept without text.
            kind, value = "forgotten", _reference(source, prefix=False)
        else:
            value = sealed
        headers = {
            "reason": reason[:2000].encode(),
            "error": kind.encode(),
            "stage": self.stage.encode(),
            "source-topic": source.topic.encode(),
            "source-partition": str(source.partition).encode(),
            "source-offset": str(source.offset).encode(),
            "attempts": str(attempts).encode(),
            **tracing.context_headers(source.headers),  # the record's trace stays with it
            **(extra_headers or {}),
        }
        for attempt in range(1, 1_000_000):
            try:
                await self._send(key=source.key, value=value, headers=headers)
                break
            except Exception as exc:
                delay = DEAD_LETTER_RETRY_S[min(attempt, len(DEAD_LETTER_RETRY_S)) - 1]
                log.error("dead letter write failed (%r); retrying in %s s", exc, delay)
                await asyncio.sleep(delay)
        self._metrics.dead_letters.labels(stage=self.stage, reason=kind).inc()
        if self._notes is not None:
            await self._notes(self.stage, source, kind, reason, attempts)
        await self._announce(source, kind, reason)
        log.warning(
            "dead-lettered %s@%s/%s from %s (%s): %s",
            source.topic,
            source.partition,
            source.offset,
            self.stage,
            kind,
            reason[:300],
        )

    async def _announce(self, source: Source, kind: str, reason: str) -> None:
        """memory.dead_lettered for the record's user, if it names one; retried as the write
        is, since ``send`` must not raise."""
        user_id = _user_of_letter(source)
        if self._events is None or user_id is None:
            return
        for attempt in range(1, 1_000_000):
            try:
                epoch = await self._epoch(user_id)
                at = self._clock.now()
                event = dead_lettered(
                    user_id, self.stage, kind, source.topic, source.raw, reason, at, epoch
                )
                await self._events.emit([event])
                return
            except Exception as exc:
                delay = DEAD_LETTER_RETRY_S[min(attempt, len(DEAD_LETTER_RETRY_S)) - 1]
                log.error("memory.dead_lettered not sent (%r); retrying in %s s", exc, delay)
                await asyncio.sleep(delay)

    async def _epoch(self, user_id: str) -> int:
        """The user's last DELETE in ms (``MemoryRepository.last_delete``); 0 without a
        keyring (a sink built alone)."""
        return await self._keyring.last_delete(user_id) if self._keyring is not None else 0

    async def _sealed_until_done(self, source: Source, value: bytes) -> bytes | None:
        """Sealing reads the store (the user's tombstone and key): retried like the write,
        since ``send`` must not raise."""
        for attempt in range(1, 1_000_000):
            try:
                return await self._sealed(source, value)
            except Exception as exc:
                delay = DEAD_LETTER_RETRY_S[min(attempt, len(DEAD_LETTER_RETRY_S)) - 1]
                log.error("sealing a dead letter failed (%r); retrying in %s s", exc, delay)
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    async def _sealed(self, source: Source, value: bytes) -> bytes | None:
        """A dead letter from a public topic (plain text) sealed with its user's key, so a
        DELETE makes it unreadable too; one from our own topics is sealed already. None: the
        user's DELETE is open, and the letter may hold text from before it."""
        if self._keyring is None or is_sealed(value):
            return value
        user_id = _user_of_letter(source)
        if user_id is None:
            return value  # no user to forget (and no key made for a junk id): kept as it is
        # As a stage without state of its own sees the user: while a DELETE is open, the
        # record may be from before it, and that generation gets no key.
        gen = await self._keyring.current(user_id)
        return await self._keyring.seal(user_id, gen, value)


def _user_of_letter(source: Source) -> str | None:
    """Whose text a failed record holds: its ``user_id`` if it names one (the record key may
    be missing or wrong: that is why some records fail), else its key if that is an id."""
    try:
        data = orjson.loads(source.raw)
        claimed = data.get("user_id") if isinstance(data, dict) else None
    except orjson.JSONDecodeError:
        claimed = None
    for candidate in (claimed, (source.key or b"").decode("utf-8", "replace")):
        if (
            isinstance(candidate, str)
            and _USER_ID.fullmatch(candidate)
            and not candidate.startswith(DEFAULT_PREFIX)
        ):
            return candidate
    return None


def _reference(source: Source, prefix: bool = True) -> bytes:
    """Where a record was, instead of the record (too large, or its text forgotten)."""
    reference: dict[str, Any] = {
        "too_large": len(source.raw) > MAX_DEAD_LETTER_BYTES,
        "topic": source.topic,
        "partition": source.partition,
        "offset": source.offset,
        "size": len(source.raw),
    }
    if prefix:
        reference["prefix"] = source.raw[:DEAD_LETTER_PREFIX].decode("utf-8", "replace")
    return orjson.dumps(reference)


def bind_event(source: Source) -> None:
    """Make table writes in this task see ``source``'s partition.

    Faust finds a table write's partition through the current event, which a batch from
    ``take_events`` does not set; each user's work runs in its own task, so setting the
    context variable here affects only that user's events.
    """
    if source.event is not None:
        _current_event.set(weakref.ref(source.event))


class BatchRunner(Generic[Record]):
    def __init__(
        self,
        stage: str,
        decode: Callable[[bytes, Source], Record],
        user_of: Callable[[Record], str],
        dead_letters: DeadLetterSink,
        metrics: Metrics,
        policy: ErrorPolicy,
        keyring: Keyring | None = None,
    ) -> None:
        self.stage = stage
        self.decode = decode
        self.user_of = user_of
        self.dead_letters = dead_letters
        self.metrics = metrics
        self.policy = policy
        self.keyring = keyring

    async def decode_batch(self, events: Sequence[Any]) -> list[Consumed[Record]]:
        """Decode a batch; malformed or oversized records go straight to the dead letters."""
        self.metrics.batch_size.labels(stage=self.stage).observe(len(events))
        decoded = []
        for event in events:
            source = Source.of(event)
            try:
                if len(source.raw) > MAX_RECORD_BYTES:
                    raise InvalidEvent(
                        f"record is {len(source.raw)} bytes; at most {MAX_RECORD_BYTES}",
                        field="body",
                    )
                raw, gen, sealed_for = source.raw, None, None
                if is_sealed(raw):
                    opened = await self._open(raw)
                    if opened is None:
                        # Its key is destroyed: a DELETE forgot the user, and its marker
                        # purges whatever this record would have become.
                        self.metrics.events.labels(stage=self.stage, outcome="forgotten").inc()
                        continue
                    raw, gen = opened.plain, opened.gen
                    sealed_for = opened.user_id
                record = self.decode(raw, source)
                if source.key != user_key(self.user_of(record)):
                    # Another key puts the user's events on another partition: no order.
                    raise InvalidEvent(f"record key {source.key!r} is not the user id", field="key")
                if sealed_for is not None and sealed_for != self.user_of(record):
                    raise InvalidEvent("record is sealed for another user", field="body")
                decoded.append(Consumed(record, source, gen=gen))
            except _OpenFailed as failed:
                self.metrics.events.labels(stage=self.stage, outcome="dead_letter").inc()
                await self.dead_letters.send(
                    source, failed.reason, _describe(failed.cause), failed.attempts
                )
            except Exception as exc:
                # Decoding is pure: whatever it raises, retrying the same bytes cannot help.
                kind = "too_large" if len(source.raw) > MAX_RECORD_BYTES else "invalid"
                self.metrics.events.labels(stage=self.stage, outcome="invalid").inc()
                await self.dead_letters.send(source, kind, _describe(exc), 1)
        return decoded

    async def _open(self, raw: bytes) -> Opened | None:
        """Open a sealed record. Unlike decoding this reads the store (the user's key), so a
        failure other than a bad record is retried as the error policy says; what it gives
        up on is raised, and the record dead-lettered."""
        if self.keyring is None:
            raise InvalidEvent("a sealed record, and this stage has no keyring", field="body")
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self.keyring.open(raw)
            except InvalidEvent:
                raise
            except Exception as exc:
                decision = self.policy(exc, attempt)
                if decision.verdict is not Verdict.RETRY:
                    raise _OpenFailed(decision.reason, attempt, exc) from exc
                log.info("%s: opening a record failed (%r); retrying", self.stage, exc)
                await asyncio.sleep(decision.delay_s)

    async def run_one(
        self,
        item: Consumed[Record],
        handle: Callable[[Consumed[Record]], Awaitable[None]],
    ) -> None:
        # The span continues the record's trace; what ``handle`` sends carries it on.
        user = self.user_of(item.record)
        with tracing.stage_span(self.stage, item.source, user), acting_for(user):
            await self._run_one(item, handle)

    async def run_together(
        self,
        items: Sequence[Consumed[Record]],
        handle_all: Callable[[Sequence[Consumed[Record]]], Awaitable[None]],
        handle: Callable[[Consumed[Record]], Awaitable[None]],
    ) -> None:
        """Several of a user's events in one call (one state write for all of them). If that
        call fails, each is run on its own under the retry and dead-letter policy, so none is
        marked done unprocessed and a dead letter names the event it is about."""
        last = items[-1]
        others = [item.source for item in items[:-1]]
        in_flight = self.metrics.in_flight.labels(stage=self.stage)
        in_flight.inc(len(items))
        started = time.perf_counter()
        try:
            user = self.user_of(last.record)
            with tracing.stage_span(self.stage, last.source, user, others), acting_for(user):
                bind_event(last.source)
                await handle_all(items)
        except Exception as exc:
            log.info(
                "%s: %d events together failed (%r); one at a time", self.stage, len(items), exc
            )
        else:
            elapsed = time.perf_counter() - started  # each event waited for the whole call
            for _ in items:
                self.metrics.stage_seconds.labels(stage=self.stage).observe(elapsed)
            self.metrics.events.labels(stage=self.stage, outcome="ok").inc(len(items))
            return
        finally:
            in_flight.dec(len(items))
        for item in items:  # each timed by run_one, once
            await self.run_one(item, handle)

    async def _run_one(
        self,
        item: Consumed[Record],
        handle: Callable[[Consumed[Record]], Awaitable[None]],
    ) -> None:
        bind_event(item.source)
        in_flight = self.metrics.in_flight.labels(stage=self.stage)
        in_flight.inc()
        started = time.perf_counter()
        try:
            attempt = 0
            while True:
                attempt += 1
                try:
                    await handle(item)
                except Exception as exc:
                    decision = self.policy(exc, attempt)
                    if decision.verdict is Verdict.RETRY:
                        log.info("%s: attempt %d failed (%r); retrying", self.stage, attempt, exc)
                        await asyncio.sleep(decision.delay_s)
                        continue
                    if decision.reason == "bug":
                        log.exception("%s: a bug, dead-lettered without retry", self.stage)
                    self.metrics.events.labels(stage=self.stage, outcome="dead_letter").inc()
                    tracing.dead_lettered(decision.reason, _describe(exc))
                    await self.dead_letters.send(
                        item.source, decision.reason, _describe(exc), attempt
                    )
                    return
                self.metrics.events.labels(stage=self.stage, outcome="ok").inc()
                return
        finally:
            in_flight.dec()
            self.metrics.stage_seconds.labels(stage=self.stage).observe(
                time.perf_counter() - started
            )


class _OpenFailed(Exception):
    """Opening a sealed record failed for good (the store, not the record): the policy's
    reason and the attempts made, for the dead letter."""

    def __init__(self, reason: str, attempts: int, cause: BaseException) -> None:
        super().__init__(reason)
        self.reason, self.attempts, self.cause = reason, attempts, cause


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class KeyedDispatcher(Generic[Work]):
    """Key-ordered concurrency: one user's events strictly in order, users independent.

    The model is Confluent's Parallel Consumer in key order. A batch does not wait for its
    slowest user: each user has a queue drained by a task of its own, so a slow LLM call
    holds back only that user. ``max_pending`` bounds the events accepted and not finished
    (backpressure on the consumer). Offsets stay safe because each event is acknowledged to
    Faust only when finished, and Faust commits a partition only up to its first gap.

    ``handle_run`` gets up to ``run_max`` of a key's queued events at once, in order: a stage
    can then share one LLM call among a user's pending pages. Without it each work item is an
    awaitable factory, called in turn.

    Work that waits for its tenant's LLM budget (the next day) is set aside: while it waits,
    it and the events queued behind it give their places back, and the key's new events take
    places of their own (``PARKED_FACTOR`` times ``max_pending`` in all), so a spent tenant
    cannot fill the places every tenant shares. Past that bound the consumer waits, as it does
    when ``max_pending`` is reached.
    """

    def __init__(
        self,
        max_pending: int,
        handle_run: Callable[[list[Work]], Awaitable[None]] | None = None,
        run_max: int = 1,
    ) -> None:
        if run_max < 1:
            raise ValueError(f"run_max must be >= 1, got {run_max}")
        self._slots = asyncio.Semaphore(max_pending)
        self._parked_slots = asyncio.Semaphore(max_pending * PARKED_FACTOR)
        self._parked: set[str] = set()  # keys whose run waits aside
        self._queues: dict[str, deque[tuple[Work, str]]] = {}  # each work with its place
        self._tasks: set[asyncio.Task[None]] = set()
        self._handle_run = handle_run or _call_each
        self._run_max = run_max

    @property
    def pending_users(self) -> int:
        return len(self._queues)

    async def submit(self, key: str, work: Work) -> None:
        if key in self._parked:
            await self._parked_slots.acquire()
            place = PARKED
        else:
            await self._slots.acquire()
            place = SHARED
        queue = self._queues.get(key)
        if queue is not None:
            queue.append((work, place))  # behind the user's earlier events
            return
        self._queues[key] = deque([(work, place)])
        task = asyncio.create_task(self._drain(key))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _drain(self, key: str) -> None:
        queue = self._queues[key]
        try:
            while queue:
                run = [work for work, _ in itertools.islice(queue, self._run_max)]
                try:
                    with setting_aside(lambda: self._aside(key)):
                        await self._handle_run(run)
                except Exception:
                    # The runner dead-letters every failure; reaching here is a bug, and it
                    # must not strand the rest of this user's queue.
                    log.exception("unexpected error in the work of %r", key)
                finally:
                    for _ in run:
                        _, place = queue.popleft()
                        self._release(place)
        finally:
            # No await between the empty check and this: a submit cannot slip in between.
            del self._queues[key]

    def _release(self, place: str) -> None:
        (self._slots if place == SHARED else self._parked_slots).release()

    @contextlib.asynccontextmanager
    async def _aside(self, key: str) -> AsyncIterator[None]:
        """The key's run waits (its tenant's budget): while it waits, its events and those
        queued behind it move from the shared places to the parked ones (as many as are
        free), and the key's new events take parked places. Nested waits of one run (calls
        made together) set it aside once."""
        if key in self._parked:
            yield
            return
        self._parked.add(key)
        queue = self._queues[key]
        for index, (work, place) in enumerate(queue):
            if place == SHARED and not self._parked_slots.locked():
                await self._parked_slots.acquire()  # free: no wait
                queue[index] = (work, PARKED)
                self._slots.release()
        try:
            yield
        finally:
            self._parked.discard(key)

    async def join(self) -> None:
        """Wait until everything submitted so far is finished."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*list(self._tasks), return_exceptions=True)


def _no_ack(_: Consumed[Any]) -> None:
    """Outside Faust there is no offset to acknowledge."""


async def _call_each(run: list[Any]) -> None:
    for work in run:
        try:
            await work()
        except Exception:
            log.exception("unexpected error in queued work")


class OrderedStage:
    """A stage's per-user entry: a run of one user's queued events, handled in order."""

    stage: str
    runner: BatchRunner[Any]
    run_max: int = 1  # events of one user ``handle_run`` takes at once (stages that batch: more)

    async def process(self, events: Sequence[Any]) -> None:
        """A whole batch, users concurrently, each user's events in runs of ``run_max``
        (tests, and runs without the dispatcher)."""
        by_user: dict[str, list[Consumed[Any]]] = {}
        for item in await self.prepare(events):
            by_user.setdefault(self.runner.user_of(item.record), []).append(item)

        async def user_runs(queue: list[Consumed[Any]]) -> None:
            for start in range(0, len(queue), self.run_max):
                await self.handle_run(queue[start : start + self.run_max], _no_ack)

        await asyncio.gather(*(user_runs(queue) for queue in by_user.values()))

    async def prepare(self, events: Sequence[Any]) -> list[Consumed[Any]]:
        return await self.runner.decode_batch(events)

    async def handle(self, item: Consumed[Any]) -> None:
        raise NotImplementedError

    async def handle_run(
        self, items: Sequence[Consumed[Any]], done: Callable[[Consumed[Any]], None]
    ) -> None:
        """Each event processed (or dead-lettered), then ``done``; stages that can share LLM
        work among a user's pending events override this."""
        for item in items:
            await self.runner.run_one(item, self.handle)
            done(item)


class RecordStage(OrderedStage):
    """A stage whose records are RootModel unions: decode the batch, apply each record."""

    async def handle(self, item: Consumed[Any]) -> None:
        await self.apply(item.record.root)

    async def apply(self, event: Any) -> None:
        raise NotImplementedError
