"""`memoryos up`: broker (embedded or given), Faust worker and HTTP service on one event loop."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import itertools
import logging
import socket
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

import aiorwlock
import uvicorn
from aiokafka import AIOKafkaProducer

from adapters import tracing
from adapters.api_keys import ApiKeys
from adapters.deps import Deps
from adapters.disk_space import DiskGuard, NoGuard, disk_guard
from adapters.embedders.batching import MicroBatchingEmbedder
from adapters.events_out import NoOutbox, Outbox, open_outbox
from adapters.journal import Entry, Journal, NoJournal, open_journal
from adapters.native_memory import limit_arenas, release_forever
from adapters.settings import LOOPBACK, Settings
from adapters.store_vacuum import vacuum_forever
from adapters.stores import unshared_store
from adapters.token_budget import TokenBudget
from adapters.wiring import build_deps, close_deps
from schemas.errors import ConfigError
from schemas.tenants import tenant_of
from schemas.topics import MESSAGES, PIPELINE_TOPICS, TURNS, user_key
from service.http import create_http_app
from service.response import ResponseService
from streams import heap_freeze
from streams.app import MemoryApp, create_app
from streams.broker import EmbeddedBroker
from streams.dead_letters import KafkaDeadLetters
from streams.kafka_reach import reach_kafka
from streams.kafka_security import kafka_client_options
from streams.lag import LagProbe
from streams.progress import NO_PROGRESS, Progress
from streams.reconciler import Reconciler
from streams.retention import ensure_topics
from streams.roll import BrokerWatch, GatedSink

log = logging.getLogger(__name__)
CATCH_UP_ATTEMPTS = 5  # 0.5 + 1 + 2 + 4 s of backoff before a catch-up gives up on a send
ROLL_RETRY_MAX_S = 30.0  # the longest wait between two tries of a failed roll
ROLL_BOUND_S = 180.0  # a roll's try: a hung stop or start counts as failed
ROLL_RETRY_AFTER_S = 2  # what a write refused during a roll is told (a roll takes ~5 s)


def bind_http(host: str, port: int) -> socket.socket:
    """The API's listening socket, bound before the broker and the model start."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        taken = exc.errno == errno.EADDRINUSE
        raise ConfigError(
            f"cannot listen on {host}:{port} ({exc.strerror}): "
            + (
                "another process has it; set MEMORYOS_PORT (or --port) to a free port"
                if taken
                else "set MEMORYOS_HOST (or --host) to an address of this machine"
            )
        ) from None
    return sock


class KafkaSink:
    """A service replica without a worker writes with its own idempotent producer."""

    def __init__(self, bootstrap: str, settings: Settings) -> None:
        # acks=all without idempotence: Tansu lacks InitProducerId, and a retried send is a
        # harmless replay because every stage de-duplicates by deterministic ids.
        self.producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, acks="all", **kafka_client_options(settings)
        )

    async def start(self) -> None:
        await self.producer.start()

    async def stop(self) -> None:
        await self.producer.stop()

    async def send(self, topic: str, key: bytes, value: bytes) -> None:
        headers = tracing.inject(None)  # the request's trace continues in the stages
        await self.producer.send_and_wait(topic, value, key=key, headers=_as_list(headers))


def _as_list(headers: tracing.Headers) -> list[tuple[str, bytes]] | None:
    if headers is None:
        return None
    return list(headers.items()) if isinstance(headers, Mapping) else list(headers)


Role = Literal["all", "worker", "service"]
LAG_INTERVAL_S = 5.0
VISITS_CLOSE_S = 5.0


@dataclasses.dataclass
class _CatchUp:
    """How far a catch-up has sent: the journal's turn and message sequence numbers."""

    seq: int
    message_seq: int
    sent: int = 0


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
        open_api = serve_http and role != "worker" and not settings.api_key_list
        if open_api and settings.host not in LOOPBACK:
            raise ConfigError(
                f"MEMORYOS_HOST={settings.host}: serving the API beyond loopback needs "
                "MEMORYOS_API_KEYS (one or more long random keys, e.g. openssl rand -hex 32), "
                "or anyone who reaches the port reads and deletes every user's memory"
            )
        # A caller that passes ``deps`` shares one store between roles itself (tests do).
        if role != "all" and deps is None and (problem := unshared_store(settings)):
            raise ConfigError(f"memoryos {'serve' if role == 'service' else role}: {problem}")
        self.settings = settings
        self.role = role
        self.serve_http = serve_http
        self.broker: EmbeddedBroker | None = None
        self.deps: Deps | None = deps
        self._owns_deps = deps is None
        self.memory_app: MemoryApp | None = None
        self._stopped = False
        self.service: ResponseService | None = None
        self.lag: LagProbe | None = None
        self._server: uvicorn.Server | None = None
        self._server_task: asyncio.Task[None] | None = None
        self._lag_task: asyncio.Task[None] | None = None
        self._kafka_sink: KafkaSink | None = None
        self._reconcile_task: asyncio.Task[None] | None = None
        self.journal: Journal = NoJournal()
        self.outbox: Outbox = NoOutbox()
        self.disk: DiskGuard | NoGuard = NoGuard()
        self._http_socket: socket.socket | None = None
        self.reconciler: Reconciler | None = None
        self._forget_lock = asyncio.Lock()
        self._writes = aiorwlock.RWLock()  # shared by writers, taken alone by the catch-up
        self.gate: GatedSink | None = None
        self.watch: BrokerWatch | None = None
        self._watch_task: asyncio.Task[None] | None = None
        self._trim_task: asyncio.Task[None] | None = None
        self._vacuum_task: asyncio.Task[None] | None = None
        self.port = settings.port
        self._tracing = False  # whether this stack switched tracing on (and so switches it off)
        self._frozen = False  # whether this stack froze the start-up heap (and so unfreezes it)

    @property
    def broker_url(self) -> str:
        if self.settings.broker_url:
            return self.settings.broker_url
        assert self.broker is not None
        return self.broker.url

    async def start(self, steps: Progress = NO_PROGRESS) -> None:
        """``steps`` hears of each start-up step (broker, model, worker or producer, http)."""
        settings = self.settings
        limit_arenas()  # before the stack's threads first allocate
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        self.disk = disk_guard(settings, self.role)
        self.disk.check()  # before anything maps a file there
        if self.serve_http:  # taken now: a busy port fails the start before anything runs
            self._http_socket = bind_http(settings.host, settings.port)
        # before the broker and the model: a journal that cannot open fails the start at once
        self.journal = open_journal(settings, embedded=not settings.broker_url)
        self.outbox = open_outbox(settings, embedded=not settings.broker_url)
        if settings.broker_url:  # before the model: a wrong address fails in seconds
            await reach_kafka(self.broker_url.removeprefix("kafka://"), settings)
        self._tracing = tracing.setup(settings, self.role)
        if self._tracing:
            log.info("tracing on: spans are exported over OTLP/HTTP")
        if not settings.broker_url:
            steps.phase("broker")
            self.broker = EmbeddedBroker(settings.broker_port, settings.data_dir / "broker.log")
            await asyncio.to_thread(self.broker.start)
        steps.phase("model")
        if self.deps is None:
            self.deps = await build_deps(settings)
        if isinstance(self.disk, DiskGuard):
            self.disk.on_reading = self.deps.metrics.disk_free.set
            self.deps.metrics.disk_floor.set(self.disk.floor_bytes)
            self.disk.free_bytes()
        # Load the embedding model now, not inside the first request or batch.
        await self.deps.embedder.embed(["memoryos warm-up"])
        bootstrap = self.broker_url.removeprefix("kafka://")
        steps.phase("producer" if self.role == "service" else "worker")
        if self.role == "service":
            self._kafka_sink = KafkaSink(bootstrap, settings)
            await self._kafka_sink.start()
            self.service = ResponseService(
                self._service_deps(), self._kafka_sink, self.journal, self.disk
            )
        else:
            journaled = not isinstance(self.journal, NoJournal)
            # Closed until the start-up catch-up opens it, as in a roll: a turn the pairing
            # stage makes meanwhile (from a message the reconciler re-sends) is journaled
            # above the reconciler's read, and sent through an open gate the catch-up would
            # have sent it again.
            timeout_s = settings.drain_timeout_s + 60
            self.gate = GatedSink(self._send, journaled, timeout_s, closed=True)
            self.service = ResponseService(self._service_deps(), self.gate, self.journal, self.disk)
            self.service.forget_lock = self._forget_lock
            self.service.writes = self._writes
            await self._start_pipeline()
            # a backlog beyond one reconciler read, before any client can add a later turn
            await self.catch_up_journal()
            self._start_reconciling()
            self._start_watch()
        # every role: native code frees memory each turn and glibc keeps it
        self._trim_task = asyncio.create_task(release_forever())
        if settings.store_vacuum_interval_s > 0:
            vacuum = vacuum_forever(self.deps.store, settings.store_vacuum_interval_s)
            self._vacuum_task = asyncio.create_task(vacuum)
        if self.serve_http:
            steps.phase("http")
            await self._start_http()
        heap_freeze.freeze()  # shorter full collections: the loop pauses less
        self._frozen = True
        log.info(
            "memoryos is up: broker %s, http %s:%s, llm %s, store %s",
            self.broker_url,
            settings.host,
            self.port,
            self.deps.llm.backend,
            settings.store,
        )

    def _service_deps(self) -> Deps:
        """The service's dependencies: its query embeddings are micro-batched, so concurrent
        retrieves share one embedding call (the stages batch their own)."""
        assert self.deps is not None
        batching = MicroBatchingEmbedder(self.deps.embedder)
        return dataclasses.replace(self.deps, embedder=batching)

    # --- the pipeline (worker, reconciler, lag probe), and recycling the broker (roll.py) ---

    async def _send(self, topic: str, key: bytes, value: bytes) -> None:
        assert self.memory_app is not None
        await self.memory_app.send(topic, key, value)

    async def _start_pipeline(self) -> None:
        assert self.deps is not None
        settings = self.settings
        # every topic with its retention before a consumer's metadata request auto-creates it
        await ensure_topics(self.broker_url.removeprefix("kafka://"), settings)
        # With the journal and the gate, the turns the pairing stage makes are written as a
        # client's are: a direct send beside a roll's catch-up, which reads the same journal
        # entry and sends it too, could link a turn twice.
        write_turns = None
        if self.service is not None and self.gate is not None and self.gate.journaled:
            write_turns = self.service.write_turns
        self.memory_app = create_app(
            settings,
            self.deps,
            self.broker_url,
            journal=self.journal,
            write_turns=write_turns,
            outbox=self.outbox,
        )
        await self.memory_app.app.start()
        self.reconciler = Reconciler(
            self.deps.repo,
            self.journal,
            self._send,
            embedded=self.broker is not None,
            lock=self._forget_lock,  # one lock across log rolls, shared with DELETE
            clock=self.deps.clock,
            keyring=self.deps.keyring,
            metrics=self.deps.metrics,
            paused=_spent(self.deps.budget),
            outbox=self.outbox,
        )
        await self.reconciler.start()
        self.lag = LagProbe(
            self.broker_url.removeprefix("kafka://"), settings.app_id, PIPELINE_TOPICS, settings
        )
        await self.lag.start()
        self._lag_task = asyncio.create_task(self._export_lag())

    async def _stop_pipeline(self, drain_s: float) -> None:
        for task in (self._lag_task, self._reconcile_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self.lag is not None:
            if self.broker is not None and drain_s > 0:  # it forgets all: finish work in flight
                await self._bounded("drain", self._drain(drain_s), drain_s + 5)
            await self._bounded("lag probe", self.lag.stop())
        if self.memory_app is not None:
            # Faust's own wait for every event in flight is unbounded and cannot be cancelled
            # (its consumer runs on a thread), so a stage stuck on a slow call held the stop,
            # and the process, forever. The bounded wait is the drain above (embedded broker)
            # or none (Kafka). Faust then commits only below the first unfinished event: that
            # work is redelivered (Kafka) or re-driven by the reconciler (embedded), and every
            # stage is idempotent by deterministic ids.
            self.memory_app.app.conf.stream_wait_empty = False
            await self._bounded("worker", self.memory_app.app.stop(), 30)

    def _start_reconciling(self) -> None:
        """Periodic passes, once the journal is caught up: a pass meanwhile would send a turn
        the catch-up sends too, or settle one it is about to send."""
        assert self.reconciler is not None
        interval_s = self.settings.reconcile_interval_s
        self._reconcile_task = asyncio.create_task(self.reconciler.run_forever(interval_s))

    def _start_watch(self) -> None:
        budget = self.settings.broker_memory_budget_mb << 20
        if self.broker is None or budget == 0:
            return
        broker = self.broker
        self.watch = BrokerWatch(lambda: broker.pid, budget, self.settings.broker_check_interval_s,
                                 self.recycle_broker)  # fmt: skip
        self._watch_task = asyncio.create_task(self.watch.run_forever())

    async def recycle_broker(self) -> None:
        """A log roll as a plain restart (streams/roll.py): refuse client writes (503 with
        Retry-After), stop the worker and the broker as a crash would (no drain), start fresh
        ones as `start` does (the reconciler's start pass re-sends what is owed, the catch-up
        opens the gate), then accept writes again. A roll that fails, or hangs past its bound,
        is tried again until one succeeds; writes stay refused meanwhile. A roll cancelled
        (the stack stopping) leaves them refused: the next start sends what is journaled."""
        assert self.broker is not None
        assert self.gate is not None
        assert self.deps is not None
        assert self.service is not None
        rolls = self.deps.metrics.broker_rolls
        began = asyncio.get_running_loop().time()
        # Taken alone, so no write is half done: each one is wholly before (journaled and
        # sent) or refused with nothing written. A DELETE too (the forget lock).
        async with self._forget_lock, self._writes.writer:
            self.service.restarting = ROLL_RETRY_AFTER_S
        for attempt in itertools.count():
            self.gate.close()  # each try: a catch-up may have opened it before a failure
            try:
                await asyncio.wait_for(self._roll(), ROLL_BOUND_S)
            except Exception:
                rolls.labels(outcome="failed").inc()
                log.exception("a log roll failed (attempt %d); trying it again", attempt + 1)
                await asyncio.sleep(min(ROLL_RETRY_MAX_S, 2.0**attempt))
                continue
            self.service.restarting = None
            rolls.labels(outcome="done").inc()
            took = asyncio.get_running_loop().time() - began
            log.info("log roll done in %.2f s (%d tries)", took, attempt + 1)
            return

    async def _roll(self) -> None:
        assert self.broker is not None
        # No drain: writes are refused meanwhile, so it would be time refused. What the worker
        # leaves unfinished is re-driven by the reconciler's start pass, as after a crash.
        await self._stop_pipeline(0)
        if self._frozen:
            # The old worker was frozen with the start-up heap; handed back now, its cycles
            # are collected even if this attempt fails and the next one is long in coming.
            heap_freeze.thaw()
        await asyncio.to_thread(self.broker.stop)
        await asyncio.to_thread(self.broker.start)
        await self._start_pipeline()
        await self.catch_up_journal()
        self._start_reconciling()
        if self._frozen:
            heap_freeze.refreeze()  # the old worker collected, the new one frozen

    async def catch_up_journal(self) -> int:
        """Send the turns and bus messages journaled after the reconciler's start pass read the
        journal (turns the pairing stage made meanwhile, from messages that pass re-sent: the
        closed gate dropped their sends) or past that read's limit (a backlog), oldest first,
        then open the gate. Returns how many were sent.

        No client writes meanwhile: at start the API is not served yet, and during a roll a
        client's write is refused. The pairing stage's writes hold the writers' lock shared
        from their journal entry to their send; the catch-up holds it alone, so its last read
        sees every turn whose send the gate dropped, and the gate opens before it lets go (an
        await between the two would let a send be dropped with no read to come)."""
        assert self.gate is not None
        assert self.reconciler is not None
        catch_up = _CatchUp(
            seq=self.reconciler.read_through, message_seq=self.reconciler.messages_read_through
        )
        log.info("catching up from the journal: turns and messages the gate held back")
        # Without the journal the gate holds writes instead of dropping them, holding the
        # writers' lock: waiting for it alone would wait out the gate.
        alone = self._writes.writer if self.gate.journaled else contextlib.nullcontext()
        async with alone:
            while any(found := await self._catch_up_read(catch_up)):  # a read is capped
                await self._catch_up_send(catch_up, *found)
            self.gate.open(self._send)
        if catch_up.sent:
            log.info("sent %d more journaled turns past the reconciler's read", catch_up.sent)
        return catch_up.sent

    async def _catch_up_read(self, catch_up: _CatchUp) -> tuple[list[Entry], list[Entry]]:
        """The turns and messages journaled since the last read."""
        entries = await self.journal.pending(after=catch_up.seq)
        messages = await self.journal.pending_messages(after=catch_up.message_seq)
        return entries, messages

    async def _catch_up_send(
        self, catch_up: _CatchUp, entries: list[Entry], messages: list[Entry]
    ) -> None:
        for entry in entries:
            await self._send_patiently(TURNS, user_key(entry.user_id), entry.value)
            catch_up.seq, catch_up.sent = entry.seq, catch_up.sent + 1
        for entry in messages:
            await self._send_patiently(MESSAGES, user_key(entry.user_id), entry.value)
            catch_up.message_seq, catch_up.sent = entry.seq, catch_up.sent + 1

    async def _send_patiently(self, topic: str, key: bytes, value: bytes) -> None:
        """A catch-up send, retried with backoff: giving up opens the gate with the turn unsent,
        and a later turn of its user, stored first, would make the reconciler settle it."""
        for attempt in range(CATCH_UP_ATTEMPTS):
            try:
                await self._send(topic, key, value)
                return
            except Exception as exc:
                if attempt == CATCH_UP_ATTEMPTS - 1:
                    raise
                log.warning("a catch-up send failed (%r); trying again", exc)
                await asyncio.sleep(0.5 * 2**attempt)

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
            tenant_keys=ApiKeys(self.deps.repo),
            dead_letters=KafkaDeadLetters(self.settings, self.deps.repo.tombstone),
        )
        config = uvicorn.Config(
            http,
            host=self.settings.host,
            port=self.settings.port,
            log_level="warning",
            lifespan="off",
        )
        self._server = uvicorn.Server(config)
        sockets = [self._http_socket] if self._http_socket is not None else None
        self._server_task = asyncio.create_task(self._server.serve(sockets=sockets))
        while not self._server.started:
            if self._server_task.done():
                self._server_task.result()  # raises why it could not start
            await asyncio.sleep(0.02)
        sockets = [s for server in self._server.servers for s in server.sockets]
        self.port = int(sockets[0].getsockname()[1]) if sockets else self.settings.port

    async def health(self) -> dict[str, Any]:
        assert self.deps is not None
        # /healthz is unauthenticated: the status only, no configuration
        return {"status": "ok"}

    async def ready(self) -> dict[str, Any]:
        """Whether a write would be acknowledged now: the pipeline or producer, the journal,
        and the data folder's free space; each failing part is named."""
        if self.role == "service":
            running = self._kafka_sink is not None and self.deps is not None
        else:
            running = self.memory_app is not None and self.memory_app.app.started
        problems = [] if running else ["starting"]
        if self.service is not None and self.service.restarting is not None:
            problems.append("restarting the broker")
        if problem := await self.journal.problem():
            problems.append(problem)
        if not self.disk.room():
            problems.append("disk full")
        status: dict[str, Any] = {"ready": not problems}
        if problems:
            status["reasons"] = problems
        return status

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
        if self._stopped:
            return  # a second stop (a test's fixture after the test stopped it) has nothing to do
        self._stopped = True
        drain_s = self.settings.drain_timeout_s if drain_timeout_s is None else drain_timeout_s
        try:
            if self._server is not None:
                self._server.should_exit = True
                await self._bounded("http", self._server_task)
            if self.service is not None:  # retrieval visits still in flight, before the sink
                await self._bounded("visits", self.service.visits.close(VISITS_CLOSE_S))
            for task in (self._watch_task, self._trim_task, self._vacuum_task):
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
            if self._kafka_sink is not None:
                await self._bounded("producer", self._kafka_sink.stop())
            await self._stop_pipeline(drain_s)
            if self.deps is not None and self._owns_deps:
                await self._bounded("ports", close_deps(self.deps))
            self.journal.close()
            self.outbox.close()
        finally:
            if self._http_socket is not None:
                self._http_socket.close()
            if self._frozen:
                heap_freeze.release()
                self._frozen = False
            if self.broker is not None:
                await asyncio.to_thread(self.broker.stop)
            if self._tracing:
                await asyncio.to_thread(tracing.shutdown)  # flushes buffered spans, bounded

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


def _spent(budget: TokenBudget | None) -> Callable[[str], bool]:
    """Whether a user's tenant has spent its LLM tokens of the day."""
    if budget is None:
        return lambda _: False
    return lambda user: budget.over(tenant_of(user))
