"""`memoryos ingest FILE.jsonl`: one turn event per line to memoryos.turns.

Invalid lines are reported with their number and reason; valid lines are still sent; the
exit status is 1 when any line was invalid.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from aiokafka import AIOKafkaProducer

from adapters.settings import Settings
from schemas.codec import decode, dumps
from schemas.errors import BrokerError, InvalidEvent
from schemas.topics import TURNS, user_key
from schemas.turn import TurnEvent


def read_turns(path: Path) -> tuple[list[TurnEvent], list[tuple[int, str]]]:
    turns: list[TurnEvent] = []
    errors: list[tuple[int, str]] = []
    with path.open("rb") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                turns.append(decode(TurnEvent, line))
            except InvalidEvent as exc:
                errors.append((number, str(exc)))
    return turns, errors


async def send_turns(bootstrap: str, turns: list[TurnEvent]) -> None:
    # No idempotent producer: Tansu does not implement InitProducerId; replays are harmless
    # anyway, because every stage de-duplicates by deterministic ids.
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        await producer.start()
    except Exception as exc:
        await producer.stop()
        raise BrokerError(f"cannot reach the broker at {bootstrap}: {exc}") from exc
    try:
        sends = [
            await producer.send(TURNS, dumps(turn), key=user_key(turn.user_id)) for turn in turns
        ]
        await asyncio.gather(*sends)
    finally:
        await producer.stop()


def main(args: argparse.Namespace, settings: Settings) -> int:
    if not args.file.is_file():
        print(f"memoryos ingest: no such file: {args.file}", file=sys.stderr)
        return 2
    turns, errors = read_turns(args.file)
    for number, reason in errors:
        print(f"{args.file}:{number}: {reason}", file=sys.stderr)
    broker = settings.broker_url or f"kafka://127.0.0.1:{settings.broker_port}"
    if turns:
        asyncio.run(send_turns(broker.removeprefix("kafka://"), turns))
    print(f"sent {len(turns)} turns to {TURNS}; {len(errors)} invalid lines")
    return 1 if errors else 0
