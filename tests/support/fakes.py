"""Fakes for unit tests of the stages (bytewax's ``testing.py`` is the model).

- ``FakeClock``: time that moves only when told;
- ``FakeLLM``: deterministic answers, with an optional hook to fail or block one task;
- ``BagEmbedder``: a bag-of-words vector, so similar texts are similar;
- ``Pipeline``: the five stages over dict tables, with in-memory topics drained in order,
  on the real qdrant-client ``:memory:`` store; ``crash()`` loses what an embedded broker
  loses (topics and tables), nothing else.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import orjson

from adapters import tracing
from adapters.deps import Deps
from adapters.events_out import EventOut, NoOutbox
from adapters.history import DeadLetterNotes
from adapters.journal import Journal
from adapters.metrics import Metrics
from adapters.ports import Answer, PersonaFacts, PromptMemory, Topic, VectorStore
from adapters.repository import MemoryRepository
from adapters.settings import Settings
from adapters.stores.qdrant import QdrantStore
from agents.chain import ChainAgent
from agents.mtm import MidTermAgent
from agents.pairing import PairingAgent
from agents.persona import PersonaAgent
from agents.policy import ErrorPolicy, default_policy
from agents.runtime import BatchRunner, DeadLetterSink, raw_input
from agents.stm import ShortTermAgent
from memory.chain import ContinuityVerdict
from memory.text import tokenize as tokens
from schemas.codec import decode, decode_message_input, decode_turn_input
from schemas.facts import PersonaInput
from schemas.records import MidTermInput, Page, PageInput, Trait
from schemas.topics import DLQ, EVENTS, MESSAGES, MTM, PAGES, PERSONA, TURNS

Hook = Callable[[str], Awaitable[None]]


class FakeClock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.at = now

    def now(self) -> float:
        return self.at


class BagEmbedder:
    name = "bag"
    dim = 32

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self._one(text) for text in texts]

    def _one(self, text: str) -> list[float]:
        vector = [0.0] * self.dim
        for word in tokens(text) or ["empty"]:
            vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dim] += 1.0
        norm = math.sqrt(sum(x * x for x in vector))
        return [x / norm for x in vector]

    async def close(self) -> None:
        return None


def _summary(previous_summary: str, dialogue: str) -> str:
    """The fake's summary: the previous one and the start of each user line it was given."""
    said = [line[:40] for line in dialogue.splitlines() if line.startswith("User: ")]
    return " | ".join([previous_summary, *(said or [dialogue[:40]])])


class FakeLLM:
    """Answers by rule; ``hook(task)`` runs first in every call (to fail or to block)."""

    backend = "fake"

    def __init__(self) -> None:
        self.hook: Hook | None = None
        self.calls: list[str] = []

    async def _enter(self, task: str) -> None:
        self.calls.append(task)
        if self.hook is not None:
            await self.hook(task)

    async def continuity(self, previous: Page | None, current: Page) -> ContinuityVerdict:
        await self._enter("continuity")
        return ContinuityVerdict(False, current.query[:80])

    async def topics(self, dialogue: str) -> list[Topic]:
        await self._enter("topics")
        words = sorted(set(tokens(dialogue)))[:5]
        return [Topic("talk", words, dialogue[:80])]

    async def topics_many(self, dialogues: Sequence[str]) -> list[list[Topic]]:
        await self._enter("topics_batch")
        return [[Topic("talk", sorted(set(tokens(d)))[:5], d[:80])] for d in dialogues]

    async def topics_summary(self, dialogue: str, previous_summary: str) -> tuple[list[Topic], str]:
        await self._enter("topics_summary")
        return [Topic("talk", sorted(set(tokens(dialogue)))[:5], dialogue[:80])], _summary(
            previous_summary, dialogue
        )

    async def segment_summary(self, previous_summary: str, dialogue: str) -> str:
        await self._enter("summary")
        return _summary(previous_summary, dialogue)

    async def user_traits(self, known: Mapping[str, Trait], dialogue: str) -> dict[str, Trait]:
        await self._enter("user_traits")
        return {}

    async def user_knowledge(self, dialogue: str) -> list[str]:
        await self._enter("user_knowledge")
        return [f"I said: {dialogue.splitlines()[0][6:60]}"]

    async def agent_traits(self, dialogue: str) -> list[str]:
        await self._enter("agent_traits")
        return []

    async def persona(
        self,
        known: Mapping[str, Trait],
        dialogue: str,
        facts: Sequence[str] = (),
        summary: str = "",
    ) -> PersonaFacts:
        await self._enter("persona")
        return PersonaFacts(dict(known), [f"I said: {dialogue.splitlines()[0][6:60]}"], [])

    async def respond(self, system: str, user: str, memory: PromptMemory) -> Answer:
        await self._enter("respond")
        return Answer(f"answer to {memory.query}")

    async def close(self) -> None:
        return None


async def make_deps(store: VectorStore | None = None, **overrides: Any) -> Deps:
    """Fakes around a real store: qdrant-client's in-memory one unless ``store`` is given."""
    settings = Settings(**{"stm_capacity": 3, "heat_tau": 2.5, **overrides})
    store = store or QdrantStore(":memory:")
    await store.ensure_collections(BagEmbedder.dim)
    return Deps(
        settings=settings,
        llm=FakeLLM(),
        embedder=BagEmbedder(),
        store=store,
        repo=MemoryRepository(store),
        clock=FakeClock(),
        metrics=Metrics(),
    )


@dataclass(eq=False)
class FakeEvent:
    """What ``take_events`` yields: a message and a value (weak-referenceable, like faust's)."""

    message: Any
    value: bytes


@dataclass
class Sent:
    key: bytes | None
    value: bytes
    headers: dict[str, bytes] = field(default_factory=dict)


class Pipeline:
    """The stages wired as `streams/app.py` wires them, over in-memory topics."""

    ORDER = (MESSAGES, TURNS, PAGES, MTM, PERSONA)

    def __init__(
        self, deps: Deps, policy: ErrorPolicy | None = None, journal: Journal | None = None
    ) -> None:
        self.deps = deps
        self.journal = journal
        self.topics: dict[str, list[Sent]] = defaultdict(list)
        self.offsets: dict[str, int] = defaultdict(int)
        self.tables: dict[str, dict[str, Any]] = defaultdict(dict)
        self.policy = policy or default_policy(2, base_delay_s=0.0)
        # memoryos.events, as the app sends them (no outbox: the fake topics do not crash)
        self.events = EventOut(self._send(EVENTS), NoOutbox(), deps.metrics)
        self.stages = self._build()

    def _send(self, topic: str) -> Callable[..., Awaitable[None]]:
        async def send(key: bytes | None, value: bytes, headers: Any = None) -> None:
            headers = tracing.inject(headers)  # as streams/app.py's senders do
            self.topics[topic].append(Sent(key, value, dict(headers or {})))

        return send

    async def send(self, topic: str, key: bytes, value: bytes) -> None:
        """The response service's and the reconciler's sink."""
        await self._send(topic)(key=key, value=value)

    def _runner(self, stage: str, decoder: Any, user_of: Any) -> BatchRunner[Any]:
        notes = DeadLetterNotes(self.deps.repo, self.deps.clock)
        keyring = self.deps.keyring
        sink = DeadLetterSink(
            stage, self._send(DLQ), self.deps.metrics, notes, keyring, self.events, self.deps.clock
        )
        return BatchRunner(stage, decoder, user_of, sink, self.deps.metrics, self.policy, keyring)

    def _build(self) -> dict[str, Any]:
        deps = self.deps

        def by_root(record: Any) -> str:
            return str(record.root.user_id)

        return {
            MESSAGES: PairingAgent(
                deps,
                self.tables["pairing"],
                self._send(TURNS),
                self._runner("pairing", raw_input(decode_message_input), lambda r: r.user_id),
                self.journal,
            ),
            TURNS: ChainAgent(
                deps,
                self.tables["chain"],
                self._send(PAGES),
                self._runner("chain", raw_input(decode_turn_input), lambda r: r.user_id),
            ),
            PAGES: ShortTermAgent(
                deps,
                self.tables["stm"],
                self._send(MTM),
                self._runner("stm", lambda raw, _: decode(PageInput, raw), by_root),
                self.events,
            ),
            MTM: MidTermAgent(
                deps,
                self.tables["mtm"],
                self._send(PERSONA),
                self._runner("mtm", lambda raw, _: decode(MidTermInput, raw), by_root),
                self.events,
            ),
            PERSONA: PersonaAgent(
                deps,
                self._send(MTM),
                self._runner("persona", lambda raw, _: decode(PersonaInput, raw), by_root),
                self.journal,
                self.events,
            ),
        }

    def pending(self, topic: str) -> list[Sent]:
        return self.topics[topic][self.offsets[topic] :]

    async def step(self, topic: str) -> int:
        """Process everything pending on ``topic`` as one batch; how many events."""
        batch = self.pending(topic)
        start = self.offsets[topic]
        self.offsets[topic] += len(batch)
        events = [
            FakeEvent(
                SimpleNamespace(
                    key=s.key, topic=topic, partition=0, offset=start + i, headers=s.headers
                ),
                s.value,
            )
            for i, s in enumerate(batch)
        ]
        if events:
            await self.stages[topic].process(events)
        return len(events)

    async def drain(self, until: str | None = None) -> None:
        """Run the stages until no topic (up to ``until``) has anything pending."""
        order = self.ORDER if until is None else self.ORDER[: self.ORDER.index(until) + 1]
        while True:
            moved = 0
            for topic in order:
                moved += await self.step(topic)
            if not moved:
                return

    def crash(self) -> None:
        """What the embedded broker loses: every topic and every table changelog."""
        self.topics.clear()
        self.offsets.clear()
        for table in self.tables.values():
            table.clear()

    def dead_letters(self) -> list[Sent]:
        return self.topics[DLQ]

    def memory_events(self, user: str | None = None) -> list[dict[str, Any]]:
        """What went out on memoryos.events (for ``user``), in order."""
        sent = [orjson.loads(s.value) for s in self.topics[EVENTS]]
        return [e for e in sent if user is None or e["subject"] == user]


async def gate() -> tuple[asyncio.Event, Hook]:
    """A hook that blocks its task until the event is set: holds a race window open."""
    release = asyncio.Event()

    async def wait(task: str) -> None:
        await release.wait()

    return release, wait
