"""`memoryos dlq list` and `memoryos dlq replay`: what was dead-lettered, and sending it back.

A dead letter keeps the original record and, in headers, the stage, the reason (``error``:
invalid, permanent, bug, exhausted, too_large, webhook), the message and where it came from;
a webhook's failure also names the webhook, and its replay is delivered to that one only. Replay
sends the original bytes back to their source topic with their key; every stage is
idempotent, so replaying twice is harmless. ``too_large`` records are references, not the
record, and are never replayed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass

import orjson
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from adapters.keyring import describe_sealed, is_sealed
from adapters.settings import Settings
from agents.webhooks import WEBHOOK_HEADER
from schemas.topics import DLQ
from streams.kafka_security import kafka_client_options

PREVIEW_CHARS = 160


@dataclass(frozen=True)
class DeadLetter:
    offset: int
    partition: int
    key: bytes | None
    value: bytes
    headers: dict[str, str]

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
    await consumer.start()
    try:
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
                        DeadLetter(record.offset, tp.partition, record.key, record.value, headers)
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


def bootstrap_of(settings: Settings) -> str:
    broker = settings.broker_url or f"kafka://127.0.0.1:{settings.broker_port}"
    return broker.removeprefix("kafka://")


def main(args: argparse.Namespace, settings: Settings) -> int:
    bootstrap = bootstrap_of(settings)
    letters = asyncio.run(read_dead_letters(bootstrap, settings, args.reason))
    if args.action == "list":
        for letter in letters:
            sys.stdout.write(orjson.dumps(letter.summary()).decode() + "\n")
        print(f"{len(letters)} dead letters", file=sys.stderr)
        return 0
    replayed, skipped = asyncio.run(replay(bootstrap, settings, letters))
    print(f"replayed {replayed} dead letters; skipped {skipped} too large to replay")
    return 0
