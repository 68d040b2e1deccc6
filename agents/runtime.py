"""How every agent processes a batch: users concurrently, one user's events in order.

Faust's agent ``concurrency > 1`` can commit offsets past events still in flight
(faust-streaming issue 606), so each agent runs once and takes batches instead; inside a
batch the users' work runs concurrently and each user's events run in order. An event that
fails is retried, then dead-lettered with its reason; it never stops the events after it.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from faust.streams import _current_event
from pydantic import BaseModel

from adapters.metrics import Metrics
from schemas.codec import decode
from schemas.errors import InvalidEvent, LLMQuotaExceeded, MemoryOSError

log = logging.getLogger(__name__)
Model = TypeVar("Model", bound=BaseModel)

# Errors worth another try: a flaky LLM, store or embedder. Bad input is never retried.
PERMANENT = (InvalidEvent, LLMQuotaExceeded)


@dataclass(frozen=True)
class Consumed(Generic[Model]):
    """One decoded event with where it came from (for dead letters and table writes)."""

    record: Model
    raw: bytes
    key: bytes | None
    topic: str
    partition: int
    offset: int
    timestamp: float  # when the record was produced (seconds), to compare with tombstones
    event: Any  # faust EventT: kept so table writes find their source partition


class DeadLetterSink:
    """Writes failed records to ``memoryos.dlq``: the original value, the reason in headers."""

    def __init__(self, send: Callable[..., Awaitable[Any]], metrics: Metrics) -> None:
        self._send = send
        self._metrics = metrics

    async def send(
        self,
        stage: str,
        reason: str,
        raw: bytes,
        key: bytes | None,
        topic: str,
        partition: int,
        offset: int,
        attempts: int,
        kind: str,
    ) -> None:
        headers = {
            "reason": reason[:2000].encode(),
            "error": kind.encode(),
            "stage": stage.encode(),
            "source-topic": topic.encode(),
            "source-partition": str(partition).encode(),
            "source-offset": str(offset).encode(),
            "attempts": str(attempts).encode(),
        }
        await self._send(key=key, value=raw, headers=headers)
        self._metrics.dead_letters.labels(stage=stage, reason=kind).inc()
        log.warning("dead-lettered %s@%s/%s from %s: %s", topic, partition, offset, stage, reason)


def bind_event(consumed: Consumed[Any]) -> None:
    """Make table writes in this task see ``consumed``'s partition.

    Faust finds a table write's partition through the current event, which a batch from
    ``take_events`` does not set; each user's work runs in its own task, so setting the
    context variable here affects only that user's events.
    """
    if consumed.event is not None:
        _current_event.set(weakref.ref(consumed.event))


class Forgetting(Protocol):
    """Deleted users: when each was deleted, and how to delete one again."""

    async def tombstones(self, user_ids: Sequence[str]) -> dict[str, float]: ...

    async def delete_user(self, user_id: str, at: float) -> dict[str, int]: ...


class BatchRunner(Generic[Model]):
    def __init__(
        self,
        stage: str,
        model: type[Model],
        dead_letters: DeadLetterSink,
        metrics: Metrics,
        max_attempts: int,
        forgetting: Forgetting | None = None,
        retry_delay_s: float = 0.2,
    ) -> None:
        self.stage = stage
        self.forgetting = forgetting
        self.model = model
        self.dead_letters = dead_letters
        self.metrics = metrics
        self.max_attempts = max_attempts
        self.retry_delay_s = retry_delay_s

    async def decode_batch(self, events: Sequence[Any]) -> list[Consumed[Model]]:
        """Decode a batch; malformed records go straight to the dead-letter topic."""
        self.metrics.batch_size.labels(stage=self.stage).observe(len(events))
        decoded = []
        for event in events:
            message = event.message
            raw = event.value if isinstance(event.value, bytes) else bytes(event.value or b"")
            try:
                record = decode(self.model, raw)
            except InvalidEvent as exc:
                self.metrics.events.labels(stage=self.stage, outcome="invalid").inc()
                await self.dead_letters.send(
                    self.stage,
                    str(exc),
                    raw,
                    message.key,
                    message.topic,
                    message.partition,
                    message.offset,
                    1,
                    type(exc).__name__,
                )
                continue
            decoded.append(
                Consumed(
                    record,
                    raw,
                    message.key,
                    message.topic,
                    message.partition,
                    message.offset,
                    float(message.timestamp or 0.0),
                    event,
                )
            )
        return decoded

    async def process(
        self,
        events: Sequence[Any],
        user_of: Callable[[Model], str],
        act: Callable[[Model], Awaitable[None]],
    ) -> None:
        """Decode a batch and apply ``act`` to each record: the whole body of most agents."""

        async def handle(item: Consumed[Model]) -> None:
            await act(item.record)

        await self.run(await self.decode_batch(events), user_of, handle)

    async def run(
        self,
        items: Sequence[Consumed[Model]],
        user_of: Callable[[Model], str],
        handle: Callable[[Consumed[Model]], Awaitable[None]],
    ) -> None:
        by_user: dict[str, list[Consumed[Model]]] = {}
        for item in items:
            by_user.setdefault(user_of(item.record), []).append(item)
        stones = await self._tombstones(list(by_user))
        await asyncio.gather(
            *(
                self._run_user(user, queue, stones.get(user), handle)
                for user, queue in by_user.items()
            )
        )

    async def _tombstones(self, users: list[str]) -> dict[str, float]:
        return await self.forgetting.tombstones(users) if self.forgetting and users else {}

    async def _run_user(
        self,
        user_id: str,
        queue: list[Consumed[Model]],
        deleted_at: float | None,
        handle: Callable[[Consumed[Model]], Awaitable[None]],
    ) -> None:
        for item in queue:
            if deleted_at is not None and item.timestamp <= deleted_at:
                # Accepted before the user was deleted: it must not bring them back.
                self.metrics.events.labels(stage=self.stage, outcome="forgotten").inc()
                continue
            await self.run_one(item, handle)
        # A delete that landed while this user's events were in flight: delete again, so
        # what they wrote after the first pass is gone too.
        latest = (await self._tombstones([user_id])).get(user_id)
        if self.forgetting and latest is not None and latest != deleted_at:
            await self.forgetting.delete_user(user_id, latest)

    async def run_one(
        self, item: Consumed[Model], handle: Callable[[Consumed[Model]], Awaitable[None]]
    ) -> None:
        bind_event(item)
        in_flight = self.metrics.in_flight.labels(stage=self.stage)
        in_flight.inc()
        started = time.perf_counter()
        try:
            for attempt in range(1, self.max_attempts + 1):
                try:
                    await handle(item)
                except PERMANENT as exc:
                    await self._dead_letter(item, exc, attempt)
                    return
                except (MemoryOSError, OSError, ValueError, KeyError, TypeError) as exc:
                    if attempt == self.max_attempts:
                        await self._dead_letter(item, exc, attempt)
                        return
                    log.info("%s: attempt %d failed (%s); retrying", self.stage, attempt, exc)
                    await asyncio.sleep(self.retry_delay_s * 2 ** (attempt - 1))
                else:
                    self.metrics.events.labels(stage=self.stage, outcome="ok").inc()
                    return
        finally:
            in_flight.dec()
            self.metrics.stage_seconds.labels(stage=self.stage).observe(
                time.perf_counter() - started
            )

    async def _dead_letter(self, item: Consumed[Model], exc: Exception, attempts: int) -> None:
        self.metrics.events.labels(stage=self.stage, outcome="dead_letter").inc()
        await self.dead_letters.send(
            self.stage,
            f"{type(exc).__name__}: {exc}",
            item.raw,
            item.key,
            item.topic,
            item.partition,
            item.offset,
            attempts,
            type(exc).__name__,
        )
