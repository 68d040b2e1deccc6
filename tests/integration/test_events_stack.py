"""Events out on the embedded stack (`memoryos up`'s defaults, a real broker and the Edge store)
with local receivers over HTTP: turns, a persona update, fact changes and a DELETE each reach
the webhooks as signed CloudEvents in the user's order; a receiver that fails three times gets
each event once; one that never answers a user holds up no other user and no other webhook;
``memory.user.forgotten`` comes only once the user's memory reads empty, also when the DELETE
races the user's turns in flight; `memoryos events tail` prints the stream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import orjson
import pytest
import pytest_asyncio

from streams.commands.events import tail
from streams.stack import Stack
from tests.support.receiver import FLAKY_FAILURES, Receiver, receiving, verified
from tests.support.stacks import eventually, running_stack

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

TALK = [
    ("My name is Dana and I live in Porto.", "Hello Dana."),
    ("I surf in Porto every weekend.", "Porto has good surf."),
    ("My surfboard is a 7 foot funboard.", "A funboard suits Porto's waves."),
    ("I surf at dawn before work in Porto.", "Dawn surf sessions are calm."),
    ("My favourite surf spot is Matosinhos.", "Matosinhos is good for learning."),
]
PICKY_TIMEOUT_S = 60.0  # ann's deliveries to /picky wait this long for an answer that never comes


class Memory:
    """What a receiver sees when it reads the user's memory back at once (set once the
    stack's port is known)."""

    url = ""

    def __call__(self, event: dict[str, Any]) -> Any:
        if event["type"] != "memory.user.forgotten":
            return None
        reply = httpx.get(f"{self.url}/v1/users/{event['subject']}/memory", timeout=30)
        reply.raise_for_status()
        memory = reply.json()
        return [memory[tier] for tier in ("short_term", "mid_term")] + [
            memory["persona"]["user_knowledge"]
        ]


PROBE = Memory()


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with receiving(probe=PROBE) as running:
        yield running


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(
    tmp_path_factory: pytest.TempPathFactory, receiver: Receiver
) -> AsyncIterator[Stack]:
    hooks = [
        receiver.hook("/ok"),
        receiver.hook("/flaky"),
        {**receiver.hook("/picky", ["memory.page.stored"])},
    ]
    async with running_stack(
        tmp_path_factory.mktemp("events"),
        webhooks=orjson.dumps(hooks).decode(),
        webhook_backoff_s=0.05,
        webhook_attempts=5,
        webhook_timeout_s=PICKY_TIMEOUT_S,
        # pages leave STM after two turns, and a segment is hot at once: the persona stage
        # reads it within the test's time
        stm_capacity=2,
        heat_tau=0.5,
    ) as running:
        PROBE.url = f"http://127.0.0.1:{running.port}"
        yield running


def http(stack: Stack) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=f"http://127.0.0.1:{stack.port}", timeout=60)


async def say(stack: Stack, user: str, talk: list[tuple[str, str]]) -> None:
    async with http(stack) as client:
        for query, response in talk:
            reply = await client.post(
                f"/v1/users/{user}/turns", json={"query": query, "response": response}
            )
            assert reply.status_code == 202, reply.text


def types_of(receiver: Receiver, user: str, path: str = "/ok") -> list[str]:
    return [event["type"] for event in receiver.events(path, user)]


def fact_types(receiver: Receiver, user: str, fact_id: str) -> list[str]:
    events = receiver.events("/ok", user)
    return [e["type"] for e in events if e["data"].get("fact_id") == fact_id]


async def test_turns_persona_facts_and_a_delete_arrive_signed_and_in_order(
    stack: Stack, receiver: Receiver
) -> None:
    await say(stack, "dana", TALK)
    async with http(stack) as client:
        for _ in range(3):  # visits heat the segments: the persona stage reads them
            await client.post("/v1/users/dana/retrieve", json={"query": "where does Dana surf"})
    await eventually(lambda: "memory.persona.updated" in types_of(receiver, "dana"), 120)
    async with http(stack) as client:
        added = await client.post(
            "/v1/users/dana/facts", json={"kind": "user_knowledge", "text": "Dana is vegan."}
        )
        assert added.status_code == 202, added.text
        fact_id = added.json()["fact_id"]
        await eventually(lambda: fact_types(receiver, "dana", fact_id), 60)
        edited = await client.patch(
            f"/v1/users/dana/facts/{fact_id}", json={"text": "Dana is vegetarian."}
        )
        assert edited.status_code == 202, edited.text
        await eventually(lambda: len(fact_types(receiver, "dana", fact_id)) == 2, 60)
        deleted = await client.delete("/v1/users/dana")
        assert deleted.status_code in (200, 202), deleted.text
    await eventually(lambda: "memory.user.forgotten" in types_of(receiver, "dana"), 120)

    events = receiver.events("/ok", "dana")
    types = [event["type"] for event in events]
    for kind in ("memory.page.stored", "memory.segment.created", "memory.persona.updated"):
        assert kind in types, kind
    assert types.index("memory.fact.added") < types.index("memory.fact.edited")
    assert types[-1] == "memory.user.forgotten"
    seqs = [event["data"]["seq"] for event in events if event["type"] == "memory.page.stored"]
    assert seqs == sorted(seqs), "in order"
    assert len(seqs) == len(TALK), "each page once"
    mine = [e for e in events if e["data"].get("fact_id") == fact_id]
    assert [e["type"] for e in mine] == ["memory.fact.added", "memory.fact.edited"]
    for received in receiver.at("/ok"):
        verified(received)  # Standard Webhooks' own library: signature and timestamp
    # what a receiver read back when the forgotten event reached it: nothing of dana's
    forgotten = next(r for r in receiver.at("/ok") if r.event["type"].endswith("forgotten"))
    assert receiver.probed[forgotten.webhook_id] == [[], [], []]


async def test_a_receiver_failing_three_times_gets_each_event_once(
    stack: Stack, receiver: Receiver
) -> None:
    await say(stack, "erin", TALK[:2])
    await eventually(lambda: len(receiver.events("/flaky", "erin")) >= 2, 60)
    got = receiver.at("/flaky")
    ids = [r.webhook_id for r in got]
    assert len(ids) == len(set(ids)), "an event delivered twice"
    for received in got:
        assert receiver.attempts[("/flaky", received.webhook_id)] == FLAKY_FAILURES + 1
        verified(received)


async def test_a_receiver_that_never_answers_a_user_holds_up_no_one_else(
    stack: Stack, receiver: Receiver
) -> None:
    """``/picky`` never answers ann's events (each waits PICKY_TIMEOUT_S): bob's reach it, and
    ann's reach the other webhooks, meanwhile."""
    await say(stack, "ann", TALK[:2])
    await say(stack, "bob", TALK[:2])
    await eventually(lambda: len(receiver.events("/picky", "bob")) == 2, 60)
    await eventually(lambda: types_of(receiver, "ann").count("memory.page.stored") == 2, 60)
    asked = [key for key in receiver.attempts if key[0] == "/picky"]
    ann_ids = {e["id"] for e in receiver.events("/ok", "ann") if e["type"].endswith("stored")}
    assert len([key for key in asked if key[1] in ann_ids]) == 1, "ann's second waits its turn"
    assert receiver.events("/picky", "ann") == []


async def test_forgotten_comes_after_memory_is_empty_when_the_delete_races_turns(
    stack: Stack, receiver: Receiver
) -> None:
    async with http(stack) as client:
        sent = [
            client.post("/v1/users/fay/turns", json={"query": q, "response": r})
            for q, r in TALK * 2
        ]
        replies = await asyncio.gather(*sent)
        assert all(reply.status_code == 202 for reply in replies)
        deleted = await client.delete("/v1/users/fay")  # the turns are still in the stages
        assert deleted.status_code in (200, 202), deleted.text
    await eventually(lambda: "memory.user.forgotten" in types_of(receiver, "fay"), 120)
    assert await stack.wait_idle(120)
    forgotten = next(
        r for r in receiver.at("/ok") if r.event["type"].endswith("forgotten") and
        r.event["subject"] == "fay"
    )  # fmt: skip
    assert receiver.probed[forgotten.webhook_id] == [[], [], []]
    assert types_of(receiver, "fay")[-1] == "memory.user.forgotten", "nothing of fay after it"


async def test_events_tail_prints_the_stream_for_one_user_and_type(stack: Stack) -> None:
    lines: list[bytes] = []
    broker = stack.broker_url.removeprefix("kafka://")
    task = asyncio.create_task(
        tail(broker, stack.settings, lines.append, "gus", ["memory.page.stored"], True, 2)
    )
    await say(stack, "gus", TALK[:2])
    await say(stack, "hal", TALK[:1])
    assert await asyncio.wait_for(task, 60) == 2
    events = [orjson.loads(line) for line in lines]
    assert [(e["subject"], e["type"]) for e in events] == [("gus", "memory.page.stored")] * 2
