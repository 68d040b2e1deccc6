"""The app factory: a Faust app with the MemoryOS topology, wired to its dependencies.

turns -> chain -> pages -> stm -> stm-evicted -> segment -> segments -> heat -> persona
                                       retrievals (from the response service) -^
control (user deletions, from the service) -> control agent: drops the user's table entries
No module holds a global app; `create_app` can build several, each with its own deps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import faust

from adapters.deps import Deps
from adapters.settings import Settings
from agents.chain import ChainAgent
from agents.control import ControlAgent
from agents.heat import HeatAgent, HeatEvent
from agents.persona import PersonaAgent
from agents.runtime import BatchRunner, DeadLetterSink
from agents.segment import SegmentAgent
from agents.stm import ShortTermAgent
from schemas.records import EvictedPage, PageEvent, PersonaJob, UserForgotten
from schemas.topics import (
    CONTROL,
    DLQ,
    EVICTED,
    PAGES,
    PERSONA,
    PIPELINE_TOPICS,
    RETRIEVALS,
    SEGMENTS,
    TURNS,
)
from schemas.turn import TurnEvent
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


def create_app(settings: Settings, deps: Deps, broker_url: str) -> MemoryApp:
    app = ShortWaitApp(
        settings.app_id,
        fetch_max_wait_ms=settings.consumer_fetch_max_wait_ms,
        broker=broker_url,
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
    dead_letters = DeadLetterSink(topics[DLQ].send, deps.metrics)

    def runner(stage: str, model: type[Any]) -> BatchRunner[Any]:
        return BatchRunner(
            stage,
            model,
            dead_letters,
            deps.metrics,
            settings.dlq_max_attempts,
            forgetting=None if stage == "control" else deps.repo,
        )

    def table(name: str) -> Any:
        return app.Table(
            name,
            default=None,
            partitions=settings.topic_partitions,
            key_type=str,
            value_type=None,
        )

    chain = ChainAgent(deps, table("chain-tails"), topics[PAGES].send, runner("chain", TurnEvent))
    stm = ShortTermAgent(deps, table("stm-windows"), topics[EVICTED].send, runner("stm", PageEvent))
    segment = SegmentAgent(deps, topics[SEGMENTS].send, runner("segment", EvictedPage))
    heat = HeatAgent(deps, table("mtm-heat"), topics[PERSONA].send, runner("heat", HeatEvent))
    persona = PersonaAgent(deps, runner("persona", PersonaJob))
    tables = [chain.tails, stm.windows, heat.states]
    control = ControlAgent(tables, runner("control", UserForgotten))

    _attach(app, topics[TURNS], chain, settings)
    _attach(app, topics[PAGES], stm, settings)
    _attach(app, topics[EVICTED], segment, settings)
    _attach(
        app,
        app.topic(
            SEGMENTS,
            RETRIEVALS,
            key_type=bytes,
            value_type=bytes,
            key_serializer="raw",
            value_serializer="raw",
        ),
        heat,
        settings,
    )
    _attach(app, topics[PERSONA], persona, settings)
    _attach(app, topics[CONTROL], control, settings)
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
