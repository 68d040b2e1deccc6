"""`memoryos up`: broker (embedded or given), Faust worker and HTTP service on one event loop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, Literal

import uvicorn
from aiokafka import AIOKafkaProducer

from adapters.deps import Deps
from adapters.journal import Journal, NoJournal, SqliteJournal
from adapters.settings import Settings
from adapters.wiring import build_deps, close_deps
from schemas.errors import ConfigError
from schemas.topics import PIPELINE_TOPICS
from service.http import create_http_app
from service.response import ResponseService
from streams.app import MemoryApp, create_app
from streams.broker import EmbeddedBroker
from streams.lag import LagProbe
from streams.progress import NO_PROGRESS, Progress
from streams.reconciler import Reconciler

log = logging.getLogger(__name__)


def journal_path(settings: Settings) -> Path:
    """Where the embedded stack and `memoryos ingest` keep accepted turns until placed."""
    return settings.data_dir / "journal.sqlite3"


class FaustSink:
    """The service's writes go through the worker's own producer when they share a process."""

    def __init__(self, memory_app: MemoryApp) -> None:
        self.memory_app = memory_app

    async def send(self, topic: str, key: bytes, value: bytes) -> None:
        await self.memory_app.send(topic, key, value)


class KafkaSink:
    """A service replica without a worker writes with its own idempotent producer."""

    def __init__(self, bootstrap: str) -> None:
        # acks=all without idempotence: Tansu lacks InitProducerId, and a retried send is a
        # harmless replay because every stage de-duplicates by deterministic ids.
        self.producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")

    async def start(self) -> None:
        await self.producer.start()

    async def stop(self) -> None:
        await self.producer.stop()

    async def send(self, topic: str, key: bytes, value: bytes) -> None:
        await self.producer.send_and_wait(topic, value, key=key)


Role = Literal["all", "worker", "service"]
LAG_INTERVAL_S = 5.0


class Stack:
    """One process of MemoryOS. ``all``: embedded everything (`memoryos up`); ``worker``: the
    Faust agents plus health and metrics; ``service``: the stateless HTTP API only."""

    def __init__(
        self,
        settings: Settings,
        role: Role = "all",
        serve_http: bool = True,
        deps: Deps | None = None,
    ) -> None:
        """``deps`` lets two roles share one store in a test process; the stack then
        leaves closing them to the caller."""
        if role != "all" and not settings.broker_url:
            raise ConfigError(f"memoryos {role} needs MEMORYOS_BROKER_URL (or --broker)")
        self.settings = settings
        self.role = role
        self.serve_http = serve_http
        self.broker: EmbeddedBroker | None = None
        self.deps: Deps | None = deps
        self._owns_deps = deps is None
        self.memory_app: MemoryApp | None = None
        self.service: ResponseService | None = None
        self.lag: LagProbe | None = None
        self._server: uvicorn.Server | None = None
        self._server_task: asyncio.Task[None] | None = None
        self._lag_task: asyncio.Task[None] | None = None
        self._kafka_sink: KafkaSink | None = None
        self._reconcile_task: asyncio.Task[None] | None = None
        self.journal: Journal = NoJournal()
        self.reconciler: Reconciler | None = None
        self.port = settings.port

    @property
    def broker_url(self) -> str:
        if self.settings.broker_url:
            return self.settings.broker_url
        assert self.broker is not None
        return self.broker.url

    async def start(self, steps: Progress = NO_PROGRESS) -> None:
        """``steps`` hears of each start-up step (broker, model, worker or producer, http)."""
        settings = self.settings
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        if not settings.broker_url:
            steps.phase("broker")
            self.broker = EmbeddedBroker(settings.broker_port, settings.data_dir / "broker.log")
            await asyncio.to_thread(self.broker.start)
        steps.phase("model")
        if self.deps is None:
            self.deps = await build_deps(settings)
        if settings.journal == "on" or (settings.journal == "auto" and self.broker is not None):
            self.journal = SqliteJournal(journal_path(settings))
        # Load the embedding model now, not inside the first request or batch.
        await self.deps.embedder.embed(["memoryos warm-up"])
        bootstrap = self.broker_url.removeprefix("kafka://")
        steps.phase("producer" if self.role == "service" else "worker")
        if self.role == "service":
            self._kafka_sink = KafkaSink(bootstrap)
            await self._kafka_sink.start()
            self.service = ResponseService(self.deps, self._kafka_sink, self.journal)
        else:
            self.memory_app = create_app(settings, self.deps, self.broker_url, journal=self.journal)
            sink = FaustSink(self.memory_app)
            self.service = ResponseService(self.deps, sink, self.journal)
            await self.memory_app.app.start()
            self.reconciler = Reconciler(self.deps.repo, self.journal, sink.send, self.deps.clock)
            await self.reconciler.start()
            self._reconcile_task = asyncio.create_task(
                self.reconciler.run_forever(settings.reconcile_interval_s)
            )
            self.lag = LagProbe(bootstrap, settings.app_id, PIPELINE_TOPICS)
            await self.lag.start()
            self._lag_task = asyncio.create_task(self._export_lag())
        if self.serve_http:
            steps.phase("http")
            await self._start_http()
        log.info(
            "memoryos is up: broker %s, http %s:%s, llm %s, store %s",
            self.broker_url,
            settings.host,
            self.port,
            self.deps.llm.backend,
            settings.store,
        )

    async def _start_http(self) -> None:
        assert self.service is not None
        assert self.deps is not None
        http = create_http_app(
            self.service,
            self.settings,
            self.deps.metrics,
            self.health,
            self.ready,
            api=self.role != "worker",
        )
        config = uvicorn.Config(
            http,
            host=self.settings.host,
            port=self.settings.port,
            log_level="warning",
            lifespan="off",
        )
        self._server = uvicorn.Server(config)
        self._server_task = asyncio.create_task(self._server.serve())
        while not self._server.started:
            if self._server_task.done():
                self._server_task.result()  # raises why it could not start
            await asyncio.sleep(0.02)
        sockets = [s for server in self._server.servers for s in server.sockets]
        self.port = int(sockets[0].getsockname()[1]) if sockets else self.settings.port

    async def health(self) -> dict[str, Any]:
        assert self.deps is not None
        # /healthz is unauthenticated: the status only, no configuration (issue 11)
        return {"status": "ok"}

    async def ready(self) -> dict[str, Any]:
        if self.role == "service":
            return {"ready": self._kafka_sink is not None and self.deps is not None}
        running = self.memory_app is not None and self.memory_app.app.started
        return {"ready": bool(running)}

    async def _export_lag(self) -> None:
        assert self.lag is not None
        assert self.deps is not None
        gauge = self.deps.metrics.consumer_lag
        while True:
            await asyncio.sleep(LAG_INTERVAL_S)
            try:
                for (topic, partition), lag in (await self.lag.lag()).items():
                    gauge.labels(topic=topic, partition=str(partition)).set(lag)
            except Exception as exc:
                log.debug("consumer lag probe failed: %s", exc)

    async def wait_idle(self, timeout_s: float = 120.0) -> bool:
        assert self.lag is not None
        return await self.lag.wait_idle(timeout_s)

    async def stop(self, drain_timeout_s: float | None = None) -> None:
        """Stop in order: HTTP, drain, worker, ports, broker.

        Every step is bounded and a failing step does not skip the later ones, so the broker
        child is always stopped and the process always exits.
        """
        drain_s = self.settings.drain_timeout_s if drain_timeout_s is None else drain_timeout_s
        try:
            if self._server is not None:
                self._server.should_exit = True
                await self._bounded("http", self._server_task)
            for task in (self._lag_task, self._reconcile_task):
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
            if self._kafka_sink is not None:
                await self._bounded("producer", self._kafka_sink.stop())
            if self.lag is not None:
                if self.broker is not None:  # it forgets everything: finish work in flight
                    await self._bounded("drain", self._drain(drain_s), drain_s + 5)
                await self._bounded("lag probe", self.lag.stop())
            if self.memory_app is not None:
                await self._bounded("worker", self.memory_app.app.stop(), 30)
            if self.deps is not None and self._owns_deps:
                await self._bounded("ports", close_deps(self.deps))
            self.journal.close()
        finally:
            if self.broker is not None:
                await asyncio.to_thread(self.broker.stop)

    async def _drain(self, timeout_s: float) -> None:
        assert self.lag is not None
        if not await self.lag.wait_idle(timeout_s):
            log.warning("stopping with work still in flight after %s s", timeout_s)

    @staticmethod
    async def _bounded(what: str, step: Awaitable[Any] | None, timeout_s: float = 15) -> None:
        if step is None:
            return
        try:
            await asyncio.wait_for(step, timeout_s)
        except Exception as exc:
            log.warning("stop: %s failed or timed out: %r", what, exc)
