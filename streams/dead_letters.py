"""The dead-letter topic read, and its records sent back: `memoryos dlq`, and the API's replay of
one user's dead letters (``KafkaDeadLetters``).

A dead letter keeps the original record and, in headers, the stage, the reason (``error``:
invalid, permanent, bug, exhausted, too_large, webhook), the message and where it came from;
a webhook's failure also names the webhook, and its replay is delivered to that one only. Replay
sends the original bytes back to their source topic with their key; every stage is
idempotent, so replaying twice is harmless. ``too_large`` records are references, not the
record, and are never replayed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import NamedTuple

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError

from adapters.keyring import describe_sealed, is_sealed
from adapters.settings import Settings
from agents.webhooks import WEBHOOK_HEADER
from schemas.errors import BrokerError, Conflict
from schemas.topics import DLQ, user_key
from streams.kafka_security import kafka_client_options

PREVIEW_CHARS = 160
READ_TIMEOUT_S = 30.0  # the whole topic read, for the API's replay: a 503 past it
Tombstone = Callable[[str], Awaitable[tuple[float, bool] | None]]  # (deleted_at, still open)


class Source(NamedTuple):
    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class DeadLetter:
    offset: int
    partition: int
    key: bytes | None
    value: bytes
    headers: dict[str, str]
    at: float = 0.0  # when it was dead-lettered (the record's time, epoch seconds)

    @property
    def source(self) -> Source:
        """Where the record came from: what a user's history lists for it."""
        offset = self.headers.get("source-offset", "")
        partition = self.headers.get("source-partition", "")
        return Source(
            self.headers.get("source-topic", ""),
            int(partition) if partition.isdigit() else -1,
            int(offset) if offset.isdigit() else -1,
        )

    @property
    def reason(self) -> str:
        return self.headers.get("error", "")

    def summary(self) -> dict[str, object]:
        return {
            "partition": self.partition,
            "offset": self.offset,
            "key": (self.key or b"").decode("utf-8", "replace"),
            **self.headers,
            "value": describe_sealed(self.value)
            if is_sealed(self.value)  # its text is for the user's key only
            else self.value[:PREVIEW_CHARS].decode("utf-8", "replace"),
        }


async def read_dead_letters(
    bootstrap: str, settings: Settings, reason: str | None = None
) -> list[DeadLetter]:
    """Every record on the dead-letter topic now, oldest first per partition."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, **kafka_client_options(settings)
    )
    try:
        await consumer.start()
        partitions = [TopicPartition(DLQ, p) for p in consumer.partitions_for_topic(DLQ) or ()]
        if not partitions:
            return []
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        ends = await consumer.end_offsets(partitions)
        letters: list[DeadLetter] = []
        while await _behind(consumer, ends):
            batches = await consumer.getmany(*partitions, timeout_ms=1000)
            for tp, records in batches.items():
                for record in records:
                    if record.offset >= ends[tp]:
                        continue
                    headers = {k: v.decode("utf-8", "replace") for k, v in record.headers}
                    letters.append(
                        DeadLetter(
                            record.offset,
                            tp.partition,
                            record.key,
                            record.value,
                            headers,
                            record.timestamp / 1000.0,
                        )
                    )
        return [letter for letter in letters if reason is None or letter.reason == reason]
    finally:
        await consumer.stop()


async def _behind(consumer: AIOKafkaConsumer, ends: dict[TopicPartition, int]) -> bool:
    for tp, end in ends.items():
        if await consumer.position(tp) < end:
            return True
    return False


async def replay(bootstrap: str, settings: Settings, letters: list[DeadLetter]) -> tuple[int, int]:
    """Send each letter back to its source topic; (replayed, skipped as too large)."""
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", **kafka_client_options(settings)
    )
    await producer.start()
    replayed = skipped = 0
    try:
        for letter in letters:
            topic = letter.headers.get("source-topic")
            if letter.reason in ("too_large", "forgotten") or not topic:
                skipped += 1
                continue
            # a webhook's failure goes back to that webhook only (agents/webhooks.py)
            webhook = letter.headers.get(WEBHOOK_HEADER)
            headers = [(WEBHOOK_HEADER, webhook.encode())] if webhook else None
            await producer.send_and_wait(topic, letter.value, key=letter.key, headers=headers)
            replayed += 1
    finally:
        await producer.stop()
    return replayed, skipped


class KafkaDeadLetters:
    """One user's dead letters sent back, for ``POST /v1/users/{id}/dead-letters/replay``: only
    records keyed by that user (so by that tenant) are read, whatever the request names.

    A letter dead-lettered before the user's last DELETE is never sent back: the public topics
    are not sealed, and the stages take a pre-DELETE turn replayed after the DELETE as new input.
    While a DELETE is still going through the stages, nothing is replayed."""

    def __init__(self, settings: Settings, tombstone: Tombstone) -> None:
        self.settings = settings
        self.tombstone = tombstone

    async def replay_user(
        self, user_ref: str, wanted: Collection[tuple[str, int, int]] | None
    ) -> dict[str, int]:
        stone = await self.tombstone(user_ref)
        if stone is not None and stone[1]:
            raise Conflict("the user is being forgotten: replay once the DELETE is complete")
        deleted_at = stone[0] if stone is not None else float("-inf")
        bootstrap = bootstrap_of(self.settings)
        try:
            letters = [
                letter
                for letter in await asyncio.wait_for(
                    read_dead_letters(bootstrap, self.settings), READ_TIMEOUT_S
                )
                if letter.key == user_key(user_ref) and (wanted is None or letter.source in wanted)
            ]
            since = [letter for letter in letters if letter.at > deleted_at]
            replayed, skipped = await replay(bootstrap, self.settings, since) if since else (0, 0)
        except (KafkaError, TimeoutError) as exc:
            raise BrokerError(f"the dead-letter topic cannot be read or replayed: {exc!r}") from exc
        found = {letter.source for letter in letters}
        missing = 0 if wanted is None else len(set(wanted) - found)
        skipped += len(letters) - len(since)
        return {"replayed": replayed, "skipped": skipped, "missing": missing}


def bootstrap_of(settings: Settings) -> str:
    broker = settings.broker_url or f"kafka://127.0.0.1:{settings.broker_port}"
    return broker.removeprefix("kafka://")
