"""The pipeline on the embedded stack: real Tansu broker, real Faust agents, real Qdrant Edge."""

from __future__ import annotations

import asyncio
import base64
import itertools
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
import pytest_asyncio
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from adapters.keyring import Keyring, is_sealed
from memory.chain import ContinuityVerdict
from schemas.errors import LLMError
from schemas.records import Page
from schemas.topics import DLQ, MTM, PAGES, TURNS
from service.response import ResponseService
from streams.stack import Stack
from tests.support.builders import make_turns
from tests.support.stacks import eventually, running_stack, strip_volatile

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

HIKING = [
    (f"I went hiking in the Alps, day {i}, and my boots held up.", f"Great hike on day {i}!")
    for i in range(10)
]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    # The chain stage asks the LLM for every page: tests fail and slow its continuity calls.
    async with running_stack(
        tmp_path_factory.mktemp("pipeline"), stm_capacity=3, continuity_llm="always"
    ) as running:
        yield running


def service(stack: Stack) -> ResponseService:
    assert stack.service is not None
    return stack.service


def pages_of(memory: dict[str, Any]) -> list[dict[str, Any]]:
    return memory["short_term"] + [p for s in memory["mid_term"] for p in s["pages"]]


async def test_turns_reach_every_tier_exactly_once(stack: Stack) -> None:
    await service(stack).add_turns(make_turns("hiker", HIKING))
    assert await stack.wait_idle(120)
    memory = await service(stack).get_memory("hiker")
    assert [p["turn_id"] for p in memory["short_term"]] == ["t007", "t008", "t009"]
    turn_ids = sorted(p["turn_id"] for p in pages_of(memory))
    assert turn_ids == [f"t{i:03d}" for i in range(10)]
    assert memory["mid_term"], "evicted pages must land in segments"
    by_id = {p["page_id"]: p for p in pages_of(memory)}
    for page in by_id.values():  # chain links point at real pages, both ways
        if page["chain"]["prev"]:
            assert by_id[page["chain"]["prev"]]["chain"]["next"] == page["page_id"]


async def test_replaying_turns_changes_nothing(stack: Stack) -> None:
    turns = make_turns("replayer", HIKING[:6])
    await service(stack).add_turns(turns)
    assert await stack.wait_idle(120)
    before = strip_volatile(await service(stack).get_memory("replayer"))
    await service(stack).add_turns(turns)
    assert await stack.wait_idle(120)
    after = strip_volatile(await service(stack).get_memory("replayer"))
    assert after == before


async def test_bad_events_are_dead_lettered_and_the_rest_flows(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert stack.deps is not None
    llm = stack.deps.llm
    real = llm.continuity

    async def failing(previous: Page | None, current: Page) -> ContinuityVerdict:
        if "POISON" in current.query:
            raise LLMError("the model keeps failing on this turn")
        return await real(previous, current)

    monkeypatch.setattr(llm, "continuity", failing)
    bootstrap = stack.broker_url.removeprefix("kafka://")
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(TURNS, b"{not json", key=b"dlq-user")
        await producer.send_and_wait(TURNS, orjson.dumps({"user_id": "dlq-user"}), key=b"dlq-user")
    finally:
        await producer.stop()
    poison, healthy = make_turns("dlq-user", [("POISON pill", "no"), ("I like tea.", "Noted.")])
    await service(stack).add_turns([poison, healthy])
    assert await stack.wait_idle(120)
    memory = await service(stack).get_memory("dlq-user")
    assert [p["turn_id"] for p in pages_of(memory)] == [healthy.turn_id]

    records = await read_topic(bootstrap, DLQ, expected=3)
    reasons = [dict(r.headers) for r in records]
    assert all(h["source-topic"] == TURNS.encode() for h in reasons)
    assert any(b"not valid JSON" in h["reason"] for h in reasons)
    assert any(b"query: Field required; response: Field required" in h["reason"] for h in reasons)
    failed = next(h for h in reasons if h["error"] == b"exhausted")
    assert b"LLMError" in failed["reason"]
    assert int(failed["attempts"]) == stack.settings.dlq_max_attempts
    # the original value is kept, sealed with the user's key (crypto-shredding)
    keyring = Keyring(stack.deps.repo)
    opened = [await keyring.open(r.value) for r in records]
    assert any(o is not None and o.plain == b"{not json" for o in opened)


async def read_topic(bootstrap: str, topic: str, expected: int) -> list[Any]:
    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", group_id=None
    )
    await consumer.start()
    records: list[Any] = []
    try:
        deadline = time.monotonic() + 30
        while len(records) < expected and time.monotonic() < deadline:
            batch = await consumer.getmany(timeout_ms=500)
            for messages in batch.values():
                records.extend(messages)
    finally:
        await consumer.stop()
    return records


async def test_users_overlap_while_each_user_keeps_order(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert stack.deps is not None
    llm = stack.deps.llm
    real = llm.continuity
    calls: list[tuple[str, int, float, float]] = []

    async def slow(previous: Page | None, current: Page) -> ContinuityVerdict:
        started = time.monotonic()
        # A slow model; the blocker holds the agent so the next turns queue up into one batch.
        await asyncio.sleep(2.0 if current.user_id == "para-blocker" else 0.3)
        verdict = await real(previous, current)
        calls.append((current.user_id, int(current.turn_id[1:]), started, time.monotonic()))
        return verdict

    monkeypatch.setattr(llm, "continuity", slow)
    await service(stack).add_turns(make_turns("para-blocker", HIKING[:1]))
    await asyncio.sleep(0.5)
    a_turns, b_turns = make_turns("para-a", HIKING[:4]), make_turns("para-b", HIKING[:4])
    await service(stack).add_turns([t for pair in zip(a_turns, b_turns, strict=True) for t in pair])
    assert await stack.wait_idle(120)
    for user in ("para-a", "para-b"):
        mine = [c for c in calls if c[0] == user]
        assert [c[1] for c in mine] == [0, 1, 2, 3], "one user's turns run in order"
        assert all(a[3] <= b[2] for a, b in itertools.pairwise(mine)), "never overlapping"
    a_calls = [c for c in calls if c[0] == "para-a"]
    b_calls = [c for c in calls if c[0] == "para-b"]
    overlaps = sum(1 for a in a_calls for b in b_calls if a[2] < b[3] and b[2] < a[3])
    assert overlaps >= 2, "different users' LLM calls run concurrently"


async def test_metrics_endpoint_shows_the_work(stack: Stack) -> None:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{stack.port}") as client:

        async def scraped() -> dict[str, float] | None:
            text = (await client.get("/metrics")).text
            values = {
                s.name + str(sorted(s.labels.items())): s.value
                for family in text_string_to_metric_families(text)
                for s in family.samples
            }
            lag_seen = any(key.startswith("memoryos_consumer_lag") for key in values)
            return values if lag_seen else None  # the lag gauge is refreshed every few seconds

        values = await eventually(scraped, 30, every_s=1.0)

    def total(prefix: str) -> float:
        return sum(v for k, v in values.items() if k.startswith(prefix))

    for name in (
        "memoryos_events_total",
        "memoryos_stage_duration_seconds_count",
        "memoryos_stage_batch_size_count",
        "memoryos_memory_transitions_total",
        "memoryos_llm_requests_total",
        "memoryos_llm_request_duration_seconds_count",
        "memoryos_embedding_batch_size_sum",
        "memoryos_embedding_duration_seconds_count",
        "memoryos_store_operation_duration_seconds_count",
    ):
        assert total(name) > 0, f"{name} shows no work"
    assert total("memoryos_dead_letters_total") >= 1  # from the dead-letter test


async def test_forgetting_a_user_leaves_nothing_and_in_flight_turns_do_not_return(
    stack: Stack,
) -> None:
    assert stack.deps is not None
    assert stack.memory_app is not None
    await service(stack).add_turns(make_turns("leaver", HIKING[:6]))
    assert await stack.wait_idle(120)
    assert pages_of(await service(stack).get_memory("leaver"))
    # Accepted just before the delete: still in flight when it happens.
    await service(stack).add_turns(make_turns("leaver", HIKING[6:], prefix="late"))
    deleted = await service(stack).forget("leaver")
    assert deleted["short_term"] + deleted["mid_term_pages"] >= 6
    assert await stack.wait_idle(120)
    assert await stack.deps.repo.count_user("leaver") == dict.fromkeys(deleted, 0)
    memory = await service(stack).get_memory("leaver")
    assert memory["short_term"] == []
    assert memory["mid_term"] == []
    assert memory["persona"]["user_knowledge"] == []
    tables = stack.memory_app.app.tables
    assert tables["chain-tails"]["leaver"]["tail"] is None  # "starts afresh", no text
    for name in ("stm-windows", "mtm-heat"):
        assert "leaver" not in tables[name], f"{name} still holds the user"
    # The user may come back: turns accepted after the delete are remembered afresh.
    await service(stack).add_turns(make_turns("leaver", HIKING[:1], prefix="new"))
    assert await stack.wait_idle(120)
    memory = await service(stack).get_memory("leaver")
    assert [p["turn_id"] for p in memory["short_term"]] == ["new000"]
    assert memory["short_term"][0]["chain"]["prev"] is None


async def test_a_query_of_stop_words_only_still_retrieves(stack: Stack) -> None:
    await service(stack).add_turns(make_turns("quiet", HIKING[:5]))
    assert await stack.wait_idle(120)
    memory = await service(stack).retrieve("quiet", "the and of?")
    assert memory.short_term, "STM is returned whatever the query"
    assert memory.mid_term, "dense search still ranks mid-term pages"


async def read_everything(bootstrap: str) -> dict[str, list[Any]]:
    """Every record of every topic on the broker, changelogs included."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    await consumer.start()
    try:
        names = sorted(await consumer.topics())
        partitions = [
            TopicPartition(name, p)
            for name in names
            for p in consumer.partitions_for_topic(name) or ()
        ]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        ends = await consumer.end_offsets(partitions)
        records: dict[str, list[Any]] = {name: [] for name in names}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            behind = [tp for tp, end in ends.items() if await consumer.position(tp) < end]
            if not behind:
                break
            for tp, batch in (await consumer.getmany(timeout_ms=500)).items():
                records[tp.topic].extend(batch)
        return records
    finally:
        await consumer.stop()


async def test_a_deleted_users_text_left_on_the_broker_is_unreadable(stack: Stack) -> None:
    """Crypto-shredding: our topics and changelogs carry the user's text
    sealed with their data key, and DELETE destroys the key. Only the public input topic,
    ``memoryos.turns``, holds plain text: it is what clients write, kept one day."""
    assert stack.deps is not None
    secret = "Zanzibar marmalade 7731"
    talk = [(f"My locker code is {secret}, day {i}.", f"Noted, day {i}.") for i in range(6)]
    await service(stack).add_turns(make_turns("shredded", talk))
    assert await stack.wait_idle(120)
    bootstrap = stack.broker_url.removeprefix("kafka://")
    before = await read_everything(bootstrap)
    assert any(secret.encode() in r.value for r in before[TURNS])
    for topic, records in before.items():
        if topic != TURNS:
            assert not any(secret.encode() in (r.value or b"") for r in records), topic
    sealed: dict[str, list[bytes]] = {}  # topic -> the user's sealed records
    for topic, records in before.items():
        for r in records:
            if r.key not in (b"shredded", b'"shredded"') or not r.value:
                continue  # a changelog's key is JSON: the user id in quotes
            if is_sealed(r.value):
                sealed.setdefault(topic, []).append(r.value)
                continue
            value = orjson.loads(r.value)  # a table value: base64 text in JSON, or a chain tail
            if isinstance(value, dict):
                value = value.get("tail")
            if isinstance(value, str):
                sealed.setdefault(topic, []).append(base64.b64decode(value))
    assert {PAGES, MTM, "memoryos-chain-tails-changelog"} <= set(sealed)
    everything = [value for values in sealed.values() for value in values]
    fresh = Keyring(stack.deps.repo)  # no cached key: what anyone with the store could read
    readable = [await fresh.open(value) for value in everything]
    assert all(o is not None for o in readable)
    assert any(o is not None and secret.encode() in o.plain for o in readable)

    await service(stack).forget("shredded")
    assert await stack.wait_idle(120)
    fresh = Keyring(stack.deps.repo)
    assert [await fresh.open(value) for value in everything] == [None] * len(everything)
