"""The app factory: a Faust app with the MemoryOS topology, wired to its dependencies.

messages -> pairing -> turns (a bus's messages paired into turns)
turns -> chain -> pages -> stm -> mtm -> segment assignment + heat -> persona -> (acks) -> mtm
          the response service's retrieval visits ----^
stm, mtm, persona (and the dead letters) -> events -> webhooks (when MEMORYOS_WEBHOOKS is set)
A DELETE's forget marker enters on ``turns`` and passes every stage in the user's order.
No module holds a global app; `create_app` can build several, each with its own deps.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import faust
from faust.streams import current_event

from adapters import tracing
from adapters.deps import Deps, Send
from adapters.events_out import EventOut, NoOutbox, Outbox
from adapters.history import DeadLetterNotes
from adapters.journal import Journal, NoJournal
from adapters.settings import Settings
from adapters.webhook_http import HttpPoster, Poster
from agents.chain import ChainAgent
from agents.mtm import MidTermAgent
from agents.pairing import PairingAgent, WriteTurns
from agents.persona import PersonaAgent
from agents.policy import ErrorPolicy, default_policy
from agents.runtime import BatchRunner, Consumed, DeadLetterSink, KeyedDispatcher, raw_input
from agents.stm import ShortTermAgent
from agents.webhooks import WebhookStage
from schemas.codec import decode, decode_message_input, decode_turn_input
from schemas.errors import BrokerError
from schemas.events import MemoryEvent
from schemas.facts import PersonaInput
from schemas.records import MidTermInput, PageInput
from schemas.topics import DLQ, EVENTS, MESSAGES, MTM, PAGES, PERSONA, PIPELINE_TOPICS, TURNS
from streams.counted_table import CountedTable
from streams.faust_transport import ShortWaitApp
from streams.kafka_security import faust_credentials
from streams.retention import changelog_topic, compacted, topic_configs

# What the service acknowledges (and a roll re-sends) goes out only once delivered; a
# retrieval's visit (to MTM) does not hold its request for the broker's round trip.
DELIVERED = frozenset({TURNS, MESSAGES})
DELIVERY_TIMEOUT_S = 40.0  # as `memoryos serve`'s producer: aiokafka's request timeout


class Stage(Protocol):
    stage: str
    runner: BatchRunner[Any]
    run_max: int

    async def prepare(self, events: Sequence[Any]) -> list[Consumed[Any]]: ...

    async def handle_run(
        self, items: Sequence[Consumed[Any]], done: Callable[[Consumed[Any]], None]
    ) -> None: ...


@dataclass
class MemoryApp:
    app: faust.App
    topics: dict[str, faust.TopicT]
    settings: Settings

    senders: dict[str, Send]
    # With no journal the broker is what makes a turn durable, so the service's sends wait
    # for it; with the journal they are buffered, as the journal covers a crash.
    await_delivery: bool = True

    async def send(self, topic: str, key: bytes, value: bytes) -> None:
        """From outside the stages (the service, the reconciler, a roll's catch-up).

        Without a journal (a real Kafka, `memoryos up --broker`) a turn, a bus message or a
        DELETE's marker returns once the broker has it (acks=all), within
        ``DELIVERY_TIMEOUT_S``: Faust's send hands back the delivery's future unawaited, and
        an acknowledged turn could be lost with the process. With the journal (the embedded
        broker) sends stay buffered: waiting for each one would make a roll's catch-up send one
        record per round trip, slower than a bulk ingest journals them."""
        durable = self.await_delivery and topic in DELIVERED and current_event() is None
        try:
            delivery = await self.senders[topic](key=key, value=value)
            if durable and inspect.isawaitable(delivery):
                # shielded: a late delivery still completes Faust's own future and callback
                await asyncio.wait_for(asyncio.shield(delivery), DELIVERY_TIMEOUT_S)
        except Exception as exc:
            if not durable:
                raise
            raise BrokerError(f"the broker did not take a record for {topic}: {exc!r}") from exc


def create_app(
    settings: Settings,
    deps: Deps,
    broker_url: str,
    policy: ErrorPolicy | None = None,
    journal: Journal | None = None,
    write_turns: WriteTurns | None = None,
    outbox: Outbox | None = None,
    poster: Poster | None = None,
) -> MemoryApp:
    """``journal``: where the pairing stage journals the turns it makes (embedded mode); with
    one, the service's sends are not awaited to the broker (``MemoryApp.await_delivery``).
    ``write_turns``: how the pairing stage writes them instead (``PairingAgent``).
    ``outbox``: where events wait for the webhooks (embedded mode, ``adapters.events_out``);
    ``poster``: how webhooks are called (HTTP by default)."""
    app = ShortWaitApp(
        settings.app_id,
        fetch_max_wait_ms=settings.consumer_fetch_max_wait_ms,
        # one URL per server: Faust reads "kafka://a:9092,b:9092" as a single host
        broker=[f"kafka://{server}" for server in broker_url.removeprefix("kafka://").split(",")],
        broker_credentials=faust_credentials(settings),  # TLS/SASL (MEMORYOS_KAFKA_*)
        store="memory://",
        web_enabled=False,  # our own HTTP server serves health and metrics; no /table endpoint
        topic_partitions=settings.topic_partitions,
        topic_replication_factor=settings.topic_replication_factor,
        producer_acks=-1,
        consumer_auto_offset_reset="earliest",
        broker_session_timeout=settings.consumer_session_timeout_s,
        broker_heartbeat_interval=max(1.0, settings.consumer_session_timeout_s / 10),
        broker_rebalance_timeout=settings.consumer_rebalance_timeout_s,
        broker_commit_interval=1.0,
        datadir=str(settings.data_dir / "faust"),
        table_cleanup_interval=300.0,
    )
    configs = topic_configs(settings)  # retention per topic (streams/retention.py)
    topics = {
        name: app.topic(
            name,
            key_type=bytes,
            value_type=bytes,
            key_serializer="raw",
            value_serializer="raw",
            config=configs[name],
        )
        for name in (*PIPELINE_TOPICS, DLQ, EVENTS)
    }
    policy = policy or default_policy(settings.dlq_max_attempts)
    senders = {name: _counted(topic, deps) for name, topic in topics.items()}
    outbox = outbox or NoOutbox()
    events = EventOut(senders[EVENTS], outbox, deps.metrics, settings.events_include_text)

    notes = DeadLetterNotes(deps.repo, deps.clock)  # each user's recent dead letters

    def runner(stage: str, decoder: Any, user_of: Any, announce: bool = True) -> BatchRunner[Any]:
        sink = DeadLetterSink(
            stage,
            senders[DLQ],
            deps.metrics,
            notes,
            deps.keyring,
            events if announce else None,
            deps.clock,
        )
        return BatchRunner(stage, decoder, user_of, sink, deps.metrics, policy, deps.keyring)

    def table(name: str) -> Any:
        made = app.Table(
            name,
            default=None,
            partitions=settings.topic_partitions,
            key_type=str,
            value_type=None,
            extra_topic_configs=compacted(settings),  # retention per topic
        )
        changelog = changelog_topic(settings.app_id, name)
        metrics = deps.metrics
        return CountedTable(
            made,
            metrics.produced_records.labels(topic=changelog),
            metrics.produced_bytes.labels(topic=changelog),
        )

    def by_root(record: Any) -> str:
        return str(record.root.user_id)

    stages: list[tuple[str, Stage]] = [
        (
            MESSAGES,
            PairingAgent(
                deps,
                table("pairing-pending"),
                senders[TURNS],
                runner("pairing", raw_input(decode_message_input), lambda r: r.user_id),
                journal,
                write_turns,
            ),
        ),
        (
            TURNS,
            ChainAgent(
                deps,
                table("chain-tails"),
                senders[PAGES],
                runner("chain", raw_input(decode_turn_input), lambda r: r.user_id),
            ),
        ),
        (
            PAGES,
            ShortTermAgent(
                deps,
                table("stm-windows"),
                senders[MTM],
                runner("stm", lambda raw, _: decode(PageInput, raw), by_root),
                events,
            ),
        ),
        (
            MTM,
            MidTermAgent(
                deps,
                table("mtm-heat"),
                senders[PERSONA],
                runner("mtm", lambda raw, _: decode(MidTermInput, raw), by_root),
                events,
            ),
        ),
        (
            PERSONA,
            PersonaAgent(
                deps,
                senders[MTM],
                runner("persona", lambda raw, _: decode(PersonaInput, raw), by_root),
                journal,
                events,
            ),
        ),
    ]
    for topic, stage in stages:
        _attach(app, topics[topic], stage, settings)
    if settings.webhook_list:
        # its own failures are dead-lettered without a memory.dead_lettered: a webhook that
        # takes every type would otherwise be sent the news of its own failure, and fail again
        webhooks = WebhookStage(
            settings.webhook_list,
            poster or HttpPoster(),
            runner("webhooks", lambda raw, _: decode(MemoryEvent, raw), _subject, False),
            settings,
            deps.metrics,
            deps.clock,
            outbox,
            _acknowledge,
            deps.repo.last_delete,
        )
        _attach_webhooks(app, topics[EVENTS], webhooks, settings)
    journaled = journal is not None and not isinstance(journal, NoJournal)
    return MemoryApp(app, topics, settings, senders, await_delivery=not journaled)


def _counted(topic: Any, deps: Deps) -> Send:
    """The topic's send, counting the records and bytes it puts on the broker (the bench),
    and carrying the current trace context in the record's headers (traceparent)."""
    name = topic.get_topic_name()
    size = deps.metrics.produced_bytes.labels(topic=name)
    records = deps.metrics.produced_records.labels(topic=name)

    async def send(key: bytes | None, value: bytes, headers: Any = None) -> Any:
        size.inc(len(value))
        records.inc()
        headers = tracing.inject(headers)
        return await topic.send(key=key, value=value, headers=headers)

    return send


def _attach(app: faust.App, channel: Any, stage: Stage, settings: Settings) -> None:
    """Run ``stage`` over ``channel`` as one agent (concurrency 1: faust-streaming issue 606),
    with key-ordered concurrency inside it.

    Batches are only the unit of decoding (and of the chain stage's embedding); each event
    then goes to its user's queue, and is acknowledged to Faust when finished, not when the
    next batch is taken: ``incref`` keeps ``take_events``' own ack from being the last one.
    """
    runner = stage.runner

    async def agent(stream: Any) -> None:
        dispatcher: KeyedDispatcher[Consumed[Any]] = KeyedDispatcher(
            settings.max_pending_events,
            functools.partial(stage.handle_run, done=_acknowledge),
            stage.run_max,
        )

        async def submit(item: Consumed[Any]) -> None:
            await dispatcher.submit(runner.user_of(item.record), item)

        try:
            await _take(stream, settings, stage.prepare, submit)
        finally:
            await dispatcher.close()

    agent.__name__ = agent.__qualname__ = f"memoryos_{stage.stage}"
    app.agent(channel, name=f"memoryos.{stage.stage}")(agent)


def _attach_webhooks(app: faust.App, channel: Any, stage: WebhookStage, settings: Settings) -> None:
    """The webhooks' deliveries as one agent over memoryos.events: an event's deliveries
    queue per webhook and user, and it is acknowledged when the last of them ends."""

    async def agent(stream: Any) -> None:
        dispatcher: KeyedDispatcher[Any] = KeyedDispatcher(settings.max_pending_events)
        stage.reset()
        try:
            await _take(
                stream, settings, stage.prepare, functools.partial(stage.submit, dispatcher)
            )
        finally:
            await dispatcher.close()
            await stage.poster.close()

    agent.__name__ = agent.__qualname__ = "memoryos_webhooks"
    app.agent(channel, name="memoryos.webhooks")(agent)


async def _take(
    stream: Any,
    settings: Settings,
    prepare: Callable[[Sequence[Any]], Awaitable[list[Consumed[Any]]]],
    submit: Callable[[Consumed[Any]], Awaitable[None]],
) -> None:
    """Batches from the stream, decoded, each record handed on; the agent's whole loop."""
    async for events in stream.take_events(settings.batch_size, within=settings.batch_timeout_s):
        for event in events:
            event.message.incref()
        items = await prepare(events)
        prepared = {id(item.source.event) for item in items}
        for event in events:
            if id(event) not in prepared:  # dead-lettered while decoding
                event.ack()
        for item in items:
            await submit(item)


def _subject(event: MemoryEvent) -> str:
    return event.subject


def _acknowledge(item: Consumed[Any]) -> None:
    item.source.event.ack()  # processed or dead-lettered: now its offset may be committed
