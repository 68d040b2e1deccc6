"""`memoryos events tail`: the memoryos.events stream as it goes by, one JSON event per line."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable

import orjson
from aiokafka import AIOKafkaConsumer

from adapters import event_loop
from adapters.keyring import is_sealed
from adapters.settings import Settings
from schemas.topics import EVENTS
from streams.dead_letters import bootstrap_of
from streams.kafka_security import kafka_client_options


async def tail(
    bootstrap: str,
    settings: Settings,
    write: Callable[[bytes], None],
    user: str | None = None,
    types: list[str] | None = None,
    from_beginning: bool = False,
    limit: int | None = None,
) -> int:
    """Write each event that matches (the user, any of the types) until ``limit`` are written
    or the task is cancelled; how many were written."""
    consumer = AIOKafkaConsumer(
        EVENTS,
        bootstrap_servers=bootstrap,
        group_id=None,  # an operator's view: no offsets committed, no group joined
        enable_auto_commit=False,
        auto_offset_reset="earliest" if from_beginning else "latest",
        **kafka_client_options(settings),
    )
    await consumer.start()
    written = 0
    try:
        async for record in consumer:
            value = record.value or b""
            if is_sealed(value):  # a dead letter replayed: not for an operator's eyes
                continue
            try:
                event = orjson.loads(value)
            except orjson.JSONDecodeError:
                continue
            if not isinstance(event, dict):
                continue
            if user is not None and event.get("subject") != user:
                continue
            if types and event.get("type") not in types:
                continue
            write(orjson.dumps(event) + b"\n")  # one line, whatever the record's spacing
            written += 1
            if limit is not None and written >= limit:
                break
    finally:
        await consumer.stop()
    return written


def main(args: argparse.Namespace, settings: Settings) -> int:
    def write(line: bytes) -> None:
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()

    with contextlib.suppress(KeyboardInterrupt):
        event_loop.run(
            tail(
                bootstrap_of(settings),
                settings,
                write,
                args.user,
                args.type,
                args.from_beginning,
                args.max,
            )
        )
    return 0
