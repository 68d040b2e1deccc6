"""One input contract at every entry: a JSONL line, an HTTP body and a raw-topic record with
the same content are accepted or refused alike, with the same defaults (schemas.accept)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest

from schemas.accept import Accepted
from schemas.codec import decode_accepted, decode_turn_input
from schemas.errors import InvalidEvent
from schemas.topics import TURNS, user_key
from schemas.turn import TurnEvent
from tests.support.fake_service import AUTH, FakeMemory, build
from tests.support.fakes import Pipeline, make_deps

LINES: list[tuple[dict[str, Any], str | None]] = [
    ({"user_id": "ann", "query": "My cat is Pixel.", "response": "Cute!"}, None),
    ({"user_id": "ann", "query": "q", "response": "r", "turn_id": "t1", "timestamp": None}, None),
    ({"user_id": "ann", "query": "q"}, "response"),
    ({"user_id": "ann", "response": "r", "turn_id": 5}, "query"),
    ({"user_id": "bad id", "query": "q", "response": "r"}, "user_id"),
]


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(build(FakeMemory()))
    async with httpx.AsyncClient(transport=transport, base_url="http://memoryos") as http:
        yield http


async def http_verdict(client: httpx.AsyncClient, line: dict[str, Any]) -> str | None:
    body = (await client.post("/v1/turns", json=[line], headers=AUTH)).json()
    [result] = body["results"]
    return result.get("error")


def verdict(decode: Any) -> str | None:
    try:
        turn = decode()
    except InvalidEvent as exc:
        return str(exc)
    assert isinstance(turn, TurnEvent)
    assert turn.turn_id
    assert turn.timestamp
    return None


@pytest.mark.parametrize(("line", "field"), LINES)
async def test_a_line_a_body_and_a_record_are_judged_alike(
    client: httpx.AsyncClient, line: dict[str, Any], field: str | None
) -> None:
    raw = orjson.dumps(line)
    ingest = verdict(lambda: decode_accepted(TurnEvent, raw, "turn_id", Accepted.now()))
    topic = verdict(lambda: decode_turn_input(raw, Accepted.of_record(TURNS, 0, 7, 1.7e9, raw)))
    api = await http_verdict(client, line)
    if field is None:
        assert (ingest, topic, api) == (None, None, None)
    else:
        for problem in (ingest, topic, api):
            assert problem is not None
            assert problem.startswith(field) or f"; {field}" in problem, problem


async def test_a_raw_record_without_id_or_time_is_placed_and_a_replay_keeps_its_id() -> None:
    pipeline = Pipeline(await make_deps(stm_capacity=7))
    bare = orjson.dumps({"user_id": "ann", "query": "My cat is Pixel.", "response": "Cute!"})
    await pipeline.send(TURNS, user_key("ann"), bare)
    await pipeline.drain()
    [page] = await pipeline.deps.repo.stm_pages("ann", with_vectors=False)
    pipeline.offsets[TURNS] = 0  # a replay of the topic
    pipeline.tables["chain"].clear()
    await pipeline.drain()
    assert [p.turn_id for p in await pipeline.deps.repo.stm_pages("ann")] == [page.turn_id]
    assert not pipeline.dead_letters()


def test_raw_defaults_keep_across_a_replay_and_differ_after_a_broker_starts_again() -> None:
    """The embedded broker starts its offsets again after a restart: offset 0 then holds
    another record, which must not land on the first one's id."""
    first = orjson.dumps({"user_id": "bob", "query": "Ana is a pilot.", "response": "Nice."})
    later = orjson.dumps({"user_id": "bob", "query": "I'm allergic to peanuts.", "response": "Ok."})
    replayed = [
        decode_turn_input(first, Accepted.of_record(TURNS, 2, 0, 1.7e9, first)) for _ in range(2)
    ]
    assert replayed[0] == replayed[1]
    retried = decode_turn_input(first, Accepted.of_record(TURNS, 2, 1, 1.7e9, first))
    assert retried == replayed[0]  # a producer's retry at another offset: the same turn
    reset = decode_turn_input(later, Accepted.of_record(TURNS, 2, 0, 1.8e9, later))
    assert isinstance(reset, TurnEvent)
    assert isinstance(replayed[0], TurnEvent)
    assert reset.turn_id != replayed[0].turn_id
    for hostile_time in (None, 0.0, -0.001, 253402300800.0):  # none, zero, "no time", year 10000
        turn = decode_turn_input(first, Accepted.of_record(TURNS, 2, 0, hostile_time, first))
        assert isinstance(turn, TurnEvent)
    dated = orjson.dumps(
        {"user_id": "bob", "query": "q", "response": "r", "timestamp": "2024-01-01"}
    )
    own = decode_turn_input(dated, Accepted.of_record(TURNS, 2, 0, 253402300800.0, dated))
    assert isinstance(own, TurnEvent)
    assert own.timestamp.year == 2024  # the record's own time, not the Kafka one
