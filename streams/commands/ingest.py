"""`memoryos ingest FILE.jsonl`: one turn event per line to memoryos.turns (``--messages``: one
message event per line to memoryos.messages, for the pairing stage).

With the embedded broker the lines go through the running stack's HTTP API, its one entry:
the stack journals each request before it answers and sends the journal, in order, across a
broker roll. Produced straight to the embedded broker they would bypass the roll's gate: a
bulk ingest is what pushes the broker past its budget, and turns produced to the fresh broker
before the roll's start pass re-sent the older ones would be stored first, so the reconciler
would take the older ones for processed. With a real Kafka the lines are produced (acks=all).

The file is streamed, never loaded whole: a year of chat logs fits in no memory. Invalid lines
are reported with their number and reason (the first few at once, so a wrong format shows
early) and the valid lines are still sent. ``--wait`` then follows the pipeline until every
acknowledged turn is placed in memory (see ``ingest_wait``).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer

from adapters import event_loop
from adapters.journal import Journal, NoJournal, open_journal
from adapters.settings import Settings
from memoryos_client.aio import AsyncMemoryClient
from memoryos_client.errors import APIError, MemoryOSClientError
from schemas.accept import Accepted
from schemas.codec import decode_accepted, dumps
from schemas.errors import BrokerError, ConfigError, InvalidEvent
from schemas.message import MessageEvent
from schemas.topics import MESSAGES, TURNS, user_key
from schemas.turn import TurnEvent
from streams.commands.ingest_wait import Placed, service_url, wait_placed
from streams.kafka_security import kafka_client_options
from streams.progress import Progress, amount, open_progress

SHOWN_INVALID = 10  # enough to see what is wrong with a file, not a screen per bad line
DETAIL_EVERY_LINES = 500
JOURNAL_CHUNK = 256  # turns journaled per fsynced transaction before they are sent
RESTART_WAIT_S = 600.0  # the longest a request waits out the embedded broker's restarts
# Half the API's default body limit (MEMORYOS_MAX_BODY_BYTES, 1 MiB): 256 long turns can pass it.
MAX_REQUEST_BYTES = 512 * 1024


@dataclass
class Sent:
    """What happened to the file's lines: the facts the summary reports."""

    path: Path
    lines: int = 0  # non-blank lines read
    sent: int = 0
    acknowledged: int = 0
    invalid: int = 0
    failed: int = 0
    first_failure: str = ""
    bytes: int = 0
    seconds: float = 0.0
    track: bool = False  # keep the acknowledged turn ids (for --wait; a big file's worth)
    by: str = "the broker"  # who acknowledges: the broker, or the stack's HTTP API
    turns: dict[str, set[str]] = field(default_factory=dict)  # user -> acknowledged turn ids

    def bad_line(self, number: int, reason: str) -> None:
        self.invalid += 1
        if self.invalid <= SHOWN_INVALID:
            print(f"{self.path}:{number}: {reason}", file=sys.stderr, flush=True)

    def acked(self, turn: TurnEvent | MessageEvent, future: asyncio.Future[Any]) -> None:
        if future.cancelled():
            self.failure("cancelled")
        elif future.exception() is not None:
            self.failure(repr(future.exception()))
        else:
            self.accepted(turn)

    def accepted(self, turn: TurnEvent | MessageEvent) -> None:
        self.acknowledged += 1
        if self.track and isinstance(turn, TurnEvent):
            self.turns.setdefault(turn.user_id, set()).add(turn.turn_id)

    def failure(self, reason: str) -> None:
        self.failed += 1
        self.first_failure = self.first_failure or reason

    def detail(self) -> str:
        rate = self.lines / self.seconds if self.seconds > 0 else 0.0
        return f"{self.lines:,} lines ({rate:,.0f}/s), {self.invalid:,} invalid"


async def send_file(
    path: Path,
    bootstrap: str,
    settings: Settings,
    progress: Progress,
    track: bool = False,
    journal: Journal | None = None,
    messages: bool = False,
) -> Sent:
    """Send every valid line of ``path``; each send is counted when the broker acknowledges it.

    ``track`` keeps the ids of the acknowledged turns, for following them into memory. With
    a ``journal`` (the embedded stack's, whose broker keeps nothing on disk) every chunk of
    turns is on disk before it is sent, so a reported acknowledgement survives a crash.
    """
    journal = journal or NoJournal()
    report = Sent(path, track=track)
    # No idempotent producer: Tansu does not implement InitProducerId; replays are harmless
    # anyway, because every stage de-duplicates by deterministic ids.
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", **kafka_client_options(settings)
    )
    try:
        await producer.start()
    except Exception as exc:
        await producer.stop()
        raise BrokerError(f"cannot reach the broker at {bootstrap}: {exc}") from exc
    started = time.monotonic()
    in_flight: set[asyncio.Future[Any]] = set()
    try:
        async for chunk in _chunks(path, report, progress, messages, started):
            await _send_chunk(producer, journal, chunk, report, in_flight)
        # The acknowledgements still to come are counted by their callbacks.
        await asyncio.gather(*in_flight, return_exceptions=True)
    finally:
        await producer.stop()
    report.seconds = time.monotonic() - started
    progress.detail(report.detail())
    return report


async def post_file(
    path: Path,
    client: AsyncMemoryClient,
    progress: Progress,
    track: bool = False,
    messages: bool = False,
    max_bytes: int = MAX_REQUEST_BYTES,
) -> Sent:
    """Send every valid line of ``path`` to the stack's HTTP API, a chunk per request (split
    further so that no request passes ``max_bytes`` of JSON, under the API's body limit); a line
    is acknowledged when the stack accepted it (journaled, so it survives a crash and a
    roll). A request that fails counts its lines as failed: not sent again, because a turn
    sent twice while the first copy is still on its way could be linked twice. A request
    refused while the embedded broker restarts (503 with Retry-After) had nothing written,
    so it is sent again once the restart is over."""
    report = Sent(path, track=track, by="the stack")
    started = time.monotonic()
    async for chunk in _chunks(path, report, progress, messages, started):
        for request in _requests(chunk, max_bytes):
            await _post_request(client, request, report, messages)
    report.seconds = time.monotonic() - started
    progress.detail(report.detail())
    return report


def _requests(
    chunk: list[TurnEvent | MessageEvent], max_bytes: int
) -> Iterator[list[tuple[TurnEvent | MessageEvent, dict[str, Any]]]]:
    """The chunk as requests of at most ``max_bytes`` of JSON each (a larger line alone)."""
    request: list[tuple[TurnEvent | MessageEvent, dict[str, Any]]] = []
    size = 2  # the list's brackets
    for event in chunk:
        item = event.model_dump(mode="json")
        item_size = len(dumps(item)) + 1  # and its comma
        if request and size + item_size > max_bytes:
            yield request
            request, size = [], 2
        request.append((event, item))
        size += item_size
    if request:
        yield request


async def _post_request(
    client: AsyncMemoryClient,
    request: list[tuple[TurnEvent | MessageEvent, dict[str, Any]]],
    report: Sent,
    messages: bool,
) -> None:
    items = [item for _, item in request]
    report.sent += len(request)
    try:
        answer = await _post_through_restarts(client, items, messages)
    except APIError as exc:
        if exc.status in (401, 403):  # every later request would be refused the same way
            raise ConfigError(
                f"the stack refused the API key ({exc}); set MEMORYOS_API_KEYS to a key it "
                f"accepts ({report.acknowledged} lines were acknowledged before this)"
            ) from exc
        for _ in request:
            report.failure(str(exc))
        return
    except MemoryOSClientError as exc:
        for _ in request:
            report.failure(str(exc))
        return
    for (event, _), result in zip(request, answer.results, strict=True):
        if result.error is not None:
            report.failure(result.error)
        else:
            report.accepted(event)


async def _post_through_restarts(
    client: AsyncMemoryClient, items: list[dict[str, Any]], messages: bool
) -> Any:
    """The request's answer; refused while the embedded broker restarts (a log roll, a few
    seconds), it is sent again after the Retry-After the stack gave, for a while."""
    waited = 0.0
    while True:
        try:
            return await (client.add_messages(items) if messages else client.add_turns(items))
        except APIError as exc:
            after = exc.retry_after_s
            if exc.status != 503 or after is None or waited + after > RESTART_WAIT_S:
                raise
            await asyncio.sleep(after)
            waited += after


async def _chunks(
    path: Path, report: Sent, progress: Progress, messages: bool, started: float
) -> AsyncIterator[list[TurnEvent | MessageEvent]]:
    """The file's valid lines, decoded, ``JOURNAL_CHUNK`` at a time; invalid ones reported."""
    size = (await asyncio.to_thread(path.stat)).st_size
    progress.phase("send", total=size, unit="bytes")
    chunk: list[TurnEvent | MessageEvent] = []
    with path.open("rb") as lines:
        for number, line in enumerate(lines, start=1):
            report.bytes += len(line)
            progress.advance(len(line))
            if not line.strip():
                continue
            report.lines += 1
            if report.lines % DETAIL_EVERY_LINES == 0:
                report.seconds = time.monotonic() - started
                progress.detail(report.detail())
            try:
                # the input contract's defaults (schemas.accept): an id from the line's place
                # and bytes, so running the same file again adds nothing
                digest = hashlib.sha256(line).hexdigest()[:32]
                accepted = Accepted.now(f"ingest/{path.name}/{number}/{digest}")
                if messages:
                    chunk.append(decode_accepted(MessageEvent, line, "message_id", accepted))
                else:
                    chunk.append(decode_accepted(TurnEvent, line, "turn_id", accepted))
            except InvalidEvent as exc:
                report.bad_line(number, str(exc))
                continue
            if len(chunk) >= JOURNAL_CHUNK:
                yield chunk
                chunk = []
    if chunk:
        yield chunk


async def _send_chunk(
    producer: AIOKafkaProducer,
    journal: Journal,
    chunk: list[TurnEvent | MessageEvent],
    report: Sent,
    in_flight: set[asyncio.Future[Any]],
) -> None:
    # one fsynced transaction per chunk, not per line
    await journal.append([e for e in chunk if isinstance(e, TurnEvent)])
    await journal.append_messages([e for e in chunk if isinstance(e, MessageEvent)])
    for turn in chunk:
        await _send(producer, turn, report, in_flight)


async def _send(
    producer: AIOKafkaProducer,
    event: TurnEvent | MessageEvent,
    report: Sent,
    in_flight: set[asyncio.Future[Any]],
) -> None:
    topic = TURNS if isinstance(event, TurnEvent) else MESSAGES
    try:
        # Returns once the message is buffered (waiting while the buffer is full, which bounds
        # the memory a huge file takes); the broker's acknowledgement resolves the future.
        future: asyncio.Future[Any] = await producer.send(
            topic, dumps(event), key=user_key(event.user_id)
        )
    except Exception as exc:
        report.failure(repr(exc))
        return
    report.sent += 1
    in_flight.add(future)
    future.add_done_callback(in_flight.discard)
    future.add_done_callback(lambda done: report.acked(event, done))


def summary(report: Sent, messages: bool = False) -> list[str]:
    """The lines a script can parse: one fact per line, each starting with its name."""
    rate = report.sent / report.seconds if report.seconds > 0 else 0.0
    what, topic = ("messages", MESSAGES) if messages else ("turns", TURNS)
    lines = [
        f"sent {report.sent} {what} to {topic} in {report.seconds:.1f} s "
        f"({rate:.1f} {what}/s, {amount(report.bytes / max(report.seconds, 1e-9), 'bytes')}/s)",
        f"acknowledged {report.acknowledged} of {report.sent} {what} by {report.by}",
        f"invalid {report.invalid} of {report.lines} lines",
    ]
    if report.failed:
        lines.append(f"failed {report.failed} sends; first: {report.first_failure}")
    return lines


def placed_summary(placed: Placed) -> str:
    line = (
        f"placed {placed.placed} of {placed.expected} turns in {placed.seconds:.1f} s "
        f"({placed.short_term} short-term, {placed.mid_term} mid-term)"
    )
    if placed.gave_up:
        line += f"; gave up: {placed.gave_up}"
    return line


def follow(
    args: argparse.Namespace, settings: Settings, report: Sent, progress: Progress
) -> Placed:
    """``--wait``: how many of the acknowledged turns the pipeline has placed in memory."""
    placed = Placed.expecting(report.turns)
    keys = settings.api_key_list
    url = args.url or service_url(settings)
    try:
        event_loop.run(
            wait_placed(url, keys[0] if keys else None, placed, progress, args.wait_timeout)
        )
    except KeyboardInterrupt:  # the turns are sent: the summary still tells what is known
        placed.gave_up = "interrupted"
    return placed


async def _post(args: argparse.Namespace, settings: Settings, progress: Progress) -> Sent:
    keys = settings.api_key_list
    url = args.url or service_url(settings)
    async with AsyncMemoryClient(url, keys[0] if keys else None) as client:
        try:
            await client.health()
        except MemoryOSClientError as exc:
            raise BrokerError(
                f"the embedded broker is reached through its stack, and no memoryos stack "
                f"answers at {url} ({exc}); start it with `memoryos up`, or name it with --url"
            ) from exc
        # half the stack's body limit (JSON of the same lines may be written a little longer)
        max_bytes = min(MAX_REQUEST_BYTES, settings.max_body_bytes // 2)
        return await post_file(args.file, client, progress, args.wait, args.messages, max_bytes)


def main(args: argparse.Namespace, settings: Settings) -> int:
    if not args.file.is_file():
        print(f"memoryos ingest: no such file: {args.file}", file=sys.stderr)
        return 2
    if args.messages and args.wait:
        # a message's turn exists only once its reply came: nothing to count per line
        print("memoryos ingest: --wait counts turns; it cannot follow --messages", file=sys.stderr)
        return 2
    placed: Placed | None = None
    with open_progress("ingest", quiet=args.quiet) as progress:
        if settings.broker_url is None:  # the embedded broker: through the stack
            report = event_loop.run(_post(args, settings, progress))
        else:
            bootstrap = settings.broker_url.removeprefix("kafka://")
            journal = open_journal(settings, embedded=False)
            try:
                sending = send_file(
                    args.file, bootstrap, settings, progress, args.wait, journal, args.messages
                )
                report = event_loop.run(sending)
            finally:
                journal.close()
        if args.wait and report.acknowledged:
            placed = follow(args, settings, report, progress)
    if report.invalid > SHOWN_INVALID:
        print(f"{args.file}: {report.invalid - SHOWN_INVALID} more invalid lines not shown",
              file=sys.stderr)  # fmt: skip
    for line in summary(report, args.messages) + ([placed_summary(placed)] if placed else []):
        print(line, flush=True)
    complete = report.acknowledged == report.lines and (placed is None or not placed.missing)
    return 0 if complete else 1
