"""The app factory: a Faust app with the MemoryOS topology, wired to its dependencies.

messages -> pairing -> turns (a bus's messages paired into turns)
turns -> chain -> pages -> stm -> mtm -> segment assignment + heat -> persona -> (acks) -> mtm
          the response service's retrieval visits ----^
A DELETE's forget marker enters on ``turns`` and passes every stage in the user's order.
No module holds a global app; `create_app` can build several, each with its own deps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import faust

from adapters.deps import Deps
from adapters.journal import Journal
from adapters.settings import Settings
from agents.chain import ChainAgent
from agents.mtm import MidTermAgent
from agents.pairing import PairingAgent
from agents.persona import PersonaAgent
from agents.policy import ErrorPolicy, default_policy
from agents.runtime import BatchRunner, DeadLetterSink
from agents.stm import ShortTermAgent
from schemas.codec import decode, decode_message_input, decode_turn_input
from schemas.records import MidTermInput, PageInput, PersonaInput
from schemas.topics import DLQ, MESSAGES, MTM, PAGES, PERSONA, PIPELINE_TOPICS, TURNS
from streams.faust_transport import ShortWaitApp


class BatchProcessor(Protocol):
    stage: str

    async def process(self, events: Sequence[Any]) -> None: ...


@dataclass
class MemoryApp:
    app: faust.App
    topics: dict[str, faust.TopicT]
    settings: Settings

    async def send(self, topic: str, key: bytes, value: bytes) -> None:
        await self.topics[topic].send(key=key, value=value)


def create_app(
    settings: Settings,
    deps: Deps,
    broker_url: str,
    policy: ErrorPolicy | None = None,
    journal: Journal | None = None,
) -> MemoryApp:
    """``journal``: where the pairing stage journals the turns it makes (embedded mode)."""
    app = ShortWaitApp(
        settings.app_id,
        fetch_max_wait_ms=settings.consumer_fetch_max_wait_ms,
        # one URL per server: Faust reads "kafka://a:9092,b:9092" as a single host
        broker=[f"kafka://{server}" for server in broker_url.removeprefix("kafka://").split(",")],
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
    topics = {
        name: app.topic(
            name, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw"
        )
        for name in (*PIPELINE_TOPICS, DLQ)
    }
    policy = policy or default_policy(settings.dlq_max_attempts)

    def runner(stage: str, decoder: Any, user_of: Any) -> BatchRunner[Any]:
        sink = DeadLetterSink(stage, topics[DLQ].send, deps.metrics)
        return BatchRunner(stage, decoder, user_of, sink, deps.metrics, policy)

    def table(name: str) -> Any:
        return app.Table(
            name,
            default=None,
            partitions=settings.topic_partitions,
            key_type=str,
            value_type=None,
        )

    def by_root(record: Any) -> str:
        return str(record.root.user_id)

    stages: list[tuple[str, BatchProcessor]] = [
        (
            MESSAGES,
            PairingAgent(
                deps,
                table("pairing-pending"),
                topics[TURNS].send,
                runner("pairing", decode_message_input, lambda r: r.user_id),
                journal,
            ),
        ),
        (
            TURNS,
            ChainAgent(
                deps,
                table("chain-tails"),
                topics[PAGES].send,
                runner("chain", decode_turn_input, lambda r: r.user_id),
            ),
        ),
        (
            PAGES,
            ShortTermAgent(
                deps,
                table("stm-windows"),
                topics[MTM].send,
                runner("stm", lambda raw: decode(PageInput, raw), by_root),
            ),
        ),
        (
            MTM,
            MidTermAgent(
                deps,
                table("mtm-heat"),
                topics[PERSONA].send,
                runner("mtm", lambda raw: decode(MidTermInput, raw), by_root),
            ),
        ),
        (
            PERSONA,
            PersonaAgent(
                deps,
                topics[MTM].send,
                runner("persona", lambda raw: decode(PersonaInput, raw), by_root),
            ),
        ),
    ]
    for topic, stage in stages:
        _attach(app, topics[topic], stage, settings)
    return MemoryApp(app, topics, settings)


def _attach(app: faust.App, channel: Any, processor: BatchProcessor, settings: Settings) -> None:
    """Run ``processor`` over batches of ``channel`` as one agent (concurrency 1: issue 606)."""

    async def agent(stream: Any) -> None:
        async for events in stream.take_events(
            settings.batch_size, within=settings.batch_timeout_s
        ):
            await processor.process(events)

    agent.__name__ = agent.__qualname__ = f"memoryos_{processor.stage}"
    app.agent(channel, name=f"memoryos.{processor.stage}")(agent)
