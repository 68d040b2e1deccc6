"""The HTTP API end to end: a real embedded stack, a real socket, bearer auth switched on.

Every read-your-writes assertion polls (``eventually``): the pipeline is asynchronous, and the
tests assert outcomes, never timings.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import httpx
import pytest
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families

from memory.dates import MONTHS
from schemas.turn import MAX_TEXT_CHARS
from streams.stack import Stack
from tests.support.stacks import eventually, running_stack

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

API_KEY = "e2e-key"
PAGE_KEYS = {"page_id", "turn_id", "query", "response", "timestamp", "meta", "chain",
             "assistant_id", "channel", "conversation_id"}  # fmt: skip
RETRIEVE_KEYS = {
    "short_term",
    "context",
    "mid_term",
    "user_profile",
    "agent_profile",
    "user_traits",
    "user_knowledge",
    "agent_traits",
    "scores",
}
DELETED_KEYS = {"short_term", "mid_term_pages", "segments", "user_knowledge", "agent_traits"}
GARDEN = [
    ("My tomatoes keep splitting in the garden after rain.", "Water them evenly."),
    ("Should I prune the garden tomatoes below the first flower?", "Yes, remove suckers."),
    ("The garden basil next to the tomatoes is bolting.", "Pinch off the flowers."),
    ("I added compost to the tomato beds in my garden.", "Compost helps a lot."),
    ("Slugs ate my garden lettuce near the tomatoes.", "Try copper tape."),
    ("My garden tomatoes finally ripened this week!", "Congratulations!"),
]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    data_dir = tmp_path_factory.mktemp("http-e2e")
    async with running_stack(data_dir, stm_capacity=3, api_keys=API_KEY) as running:
        yield running


@pytest_asyncio.fixture(loop_scope="module")
async def client(stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{stack.port}",
        headers={"Authorization": f"Bearer {API_KEY}"},
        timeout=60,
    ) as http:
        yield http


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


async def add(client: httpx.AsyncClient, user: str, turns: list[tuple[str, str]]) -> list[str]:
    ids = []
    for query, response in turns:
        body = ok(
            await client.post(
                f"/v1/users/{user}/turns", json={"query": query, "response": response}
            ),
            202,
        )
        ids.append(body["turn_id"])
    return ids


async def memory(client: httpx.AsyncClient, user: str) -> dict[str, Any]:
    document: dict[str, Any] = ok(await client.get(f"/v1/users/{user}/memory"))
    return document


def all_pages(document: dict[str, Any]) -> list[dict[str, Any]]:
    pages: list[dict[str, Any]] = document["short_term"]
    return pages + [p for s in document["mid_term"] for p in s["pages"]]


def assert_page(page: dict[str, Any]) -> None:
    assert set(page) == PAGE_KEYS
    assert set(page["chain"]) == {"prev", "next", "summary"}
    datetime.fromisoformat(page["timestamp"])


async def test_a_turn_accepted_is_read_back_with_its_meta(client: httpx.AsyncClient) -> None:
    meta = {"source": "crm", "ticket": 4711, "tags": ["vip", "de"], "nested": {"ok": True}}
    turn: dict[str, Any] = {
        "query": "I moved to Lisbon last month.",
        "response": "Welcome to Lisbon!",
        "timestamp": "2024-05-01T10:00:00+00:00",
        "turn_id": "lisbon-1",
        "assistant_id": "support-bot",
        "channel": "web",
        "meta": meta,
    }
    assert ok(await client.post("/v1/users/reader/turns", json=turn), 202) == {
        "turn_id": "lisbon-1"
    }

    async def read_back() -> list[dict[str, Any]]:
        found = ok(await client.post("/v1/users/reader/retrieve", json={"query": "Lisbon"}))
        return [p for p in found["short_term"] if p["turn_id"] == "lisbon-1"]

    [page] = await eventually(read_back)
    assert_page(page)
    assert page["meta"] == meta
    assert (page["query"], page["response"]) == (turn["query"], turn["response"])
    assert datetime.fromisoformat(page["timestamp"]) == datetime.fromisoformat(turn["timestamp"])


async def test_batch_reports_each_item_and_accepts_the_valid_ones(
    client: httpx.AsyncClient,
) -> None:
    items: list[Any] = [
        {"user_id": "batcher", "query": "I collect stamps.", "response": "Nice hobby."},
        {"user_id": "batcher", "query": 42, "response": "x"},
        "not an object",
        {"user_id": "batcher", "query": "Mostly from Japan.", "response": "Beautiful ones."},
    ]
    body = ok(await client.post("/v1/turns", json=items), 202)
    assert body["accepted"] == 2
    assert [r["index"] for r in body["results"]] == [0, 1, 2, 3]
    assert "query" in body["results"][1]["error"]
    assert "object" in body["results"][2]["error"]
    accepted = {body["results"][i]["turn_id"] for i in (0, 3)}

    async def stored() -> bool:
        return {p["turn_id"] for p in (await memory(client, "batcher"))["short_term"]} == accepted

    await eventually(stored)


async def test_retrieve_returns_every_tier_with_scored_mid_term_pages(
    client: httpx.AsyncClient,
) -> None:
    ids = await add(client, "gardener", GARDEN)

    async def settled() -> dict[str, Any] | None:
        document = await memory(client, "gardener")
        in_mid = [p["turn_id"] for s in document["mid_term"] for p in s["pages"]]
        in_short = [p["turn_id"] for p in document["short_term"]]
        return document if in_short == ids[3:] and sorted(in_mid) == sorted(ids[:3]) else None

    document = await eventually(settled)
    found = ok(
        await client.post(
            "/v1/users/gardener/retrieve", json={"query": "garden tomatoes", "top_k": 2}
        )
    )
    assert set(found) == RETRIEVE_KEYS
    assert [p["turn_id"] for p in found["short_term"]] == ids[3:]
    assert 1 <= len(found["mid_term"]) <= 2
    every_page = {p["page_id"] for p in found["short_term"] + found["mid_term"]}
    assert set(found["context"]) == every_page  # each page once, in context order
    assert len(found["context"]) == len(every_page)
    segment_ids = {s["segment_id"] for s in document["mid_term"]}
    for page in found["mid_term"]:
        assert set(page) == PAGE_KEYS | {"segment_id", "score"}
        assert page["segment_id"] in segment_ids
        assert isinstance(page["score"], float)
    for fact in found["user_knowledge"] + found["agent_traits"]:
        assert set(fact) == {"text", "score"}

    hit = found["mid_term"][0]["segment_id"]

    async def visited() -> bool:  # the retrieval event reached the heat agent
        segments = (await memory(client, "gardener"))["mid_term"]
        return any(s["segment_id"] == hit and s["n_visit"] >= 1 for s in segments)

    await eventually(visited)


async def test_a_question_naming_a_thousand_months_is_answered_and_its_month_still_ranks(
    client: httpx.AsyncClient,
) -> None:
    """Hostile input at the HTTP entry of the date matcher: a question as long as
    a query may be, naming over a thousand month-years, gets its memory like any other."""
    said = [
        ("2024-02-10T10:00:00+00:00", "I baked, baked and baked bread all day"),
        ("2024-03-12T10:00:00+00:00", "I baked a cake with my aunt for the party"),
        ("2024-04-02T10:00:00+00:00", "My violin lessons start next week"),
        ("2024-04-03T10:00:00+00:00", "The tax forms are due soon"),
        ("2024-04-04T10:00:00+00:00", "Hiking boots need new laces"),
    ]
    for moment, text in said:
        body = {"query": text, "response": "Nice.", "timestamp": moment}
        ok(await client.post("/v1/users/hostile-baker/turns", json=body), 202)

    async def stored() -> bool:
        return len(all_pages(await memory(client, "hostile-baker"))) == len(said)

    await eventually(stored)
    question = "What did I bake in March 2024?"
    named = " ".join(f"{month} {year}" for year in range(1900, 2024) for month in MONTHS)
    hostile = f"{question} {named}"[:MAX_TEXT_CHARS]
    assert hostile.count(" 19") > 1000
    for query in (question, hostile):
        found = ok(await client.post("/v1/users/hostile-baker/retrieve", json={"query": query}))
        by_id = {p["page_id"]: p for p in found["short_term"] + found["mid_term"]}
        assert by_id[found["context"][0]]["query"] == said[1][1], query[:40]
    too_long = ok(
        await client.post(
            "/v1/users/hostile-baker/retrieve", json={"query": hostile + " March 2024"}
        ),
        422,
    )
    assert "query" in str(too_long)


async def test_memory_document_has_every_tier(client: httpx.AsyncClient) -> None:
    await add(client, "documented", GARDEN[:5])

    async def has_segment() -> dict[str, Any] | None:
        document = await memory(client, "documented")
        return document if document["mid_term"] else None

    document = await eventually(has_segment)
    assert set(document) == {"user_id", "short_term", "mid_term", "persona"}
    assert document["user_id"] == "documented"
    segment = document["mid_term"][0]
    assert set(segment) == {
        "segment_id",
        "summary",
        "keywords",
        "n_visit",
        "l_interaction",
        "last_access",
        "heat",
        "recency",
        "pages",
    }
    assert segment["heat"] > 0
    for page in all_pages(document):
        assert_page(page)
    assert set(document["persona"]) == {
        "profile",
        "stated_profile",
        "traits",
        "user_knowledge",
        "agent_traits",
        "agent_profile",
        "assistants",
    }


async def test_respond_answers_from_memory_and_stores_the_new_turn(
    client: httpx.AsyncClient,
) -> None:
    await add(client, "responder", [("My dog is called Pixel.", "Cute name!")])

    async def remembered() -> bool:
        return bool((await memory(client, "responder"))["short_term"])

    await eventually(remembered)
    question = "What is my dog called?"
    body = ok(await client.post("/v1/users/responder/respond", json={"query": question}))
    assert set(body) == {"response", "memory", "usage", "remembered"}
    assert isinstance(body["response"], str)
    assert body["response"]
    assert body["remembered"] is True
    assert set(body["memory"]) == RETRIEVE_KEYS
    assert any("Pixel" in p["query"] for p in body["memory"]["short_term"])
    assert set(body["usage"]) == {"prompt_tokens", "completion_tokens"}
    assert all(isinstance(v, int) and v >= 0 for v in body["usage"].values())

    async def stored() -> bool:
        pages = all_pages(await memory(client, "responder"))
        return any(p["query"] == question and p["response"] == body["response"] for p in pages)

    await eventually(stored)


async def test_delete_forgets_the_user_and_they_can_start_afresh(
    client: httpx.AsyncClient,
) -> None:
    await add(client, "leaver", GARDEN[:4])

    async def everything_stored() -> bool:  # 3 pages in STM, the oldest moved on to MTM
        document = await memory(client, "leaver")
        return len(document["short_term"]) == 3 and len(all_pages(document)) == 4

    await eventually(everything_stored)
    body = ok(await client.delete("/v1/users/leaver"))
    assert set(body) == {"deleted"}
    assert set(body["deleted"]) == DELETED_KEYS
    assert body["deleted"]["short_term"] == 3
    assert body["deleted"]["mid_term_pages"] == 1
    assert body["deleted"]["segments"] >= 1

    document = await memory(client, "leaver")
    assert all_pages(document) == []
    assert document["persona"]["user_knowledge"] == []
    found = ok(await client.post("/v1/users/leaver/retrieve", json={"query": "tomatoes"}))
    assert found["short_term"] == found["mid_term"] == []

    [turn_id] = await add(client, "leaver", [("I am back, and I now grow peppers.", "Hello!")])

    async def back() -> bool:
        return [p["turn_id"] for p in all_pages(await memory(client, "leaver"))] == [turn_id]

    await eventually(back)


async def test_every_v1_route_needs_the_key_but_health_and_metrics_do_not(
    stack: Stack,
) -> None:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{stack.port}") as anonymous:
        for method, path in [
            ("GET", "/v1/users/reader/memory"),
            ("POST", "/v1/users/reader/retrieve"),
            ("DELETE", "/v1/users/reader"),
        ]:
            denied = await anonymous.request(method, path, json={"query": "x"})
            assert denied.status_code == 401
            assert "Bearer" in denied.json()["error"]
        assert (await anonymous.get("/healthz")).status_code == 200
        assert (await anonymous.get("/readyz")).status_code == 200
        assert (await anonymous.get("/metrics")).status_code == 200


async def test_metrics_count_the_work(client: httpx.AsyncClient) -> None:
    await add(client, "metered", [("Counting is fun.", "Indeed.")])
    ok(await client.post("/v1/users/metered/retrieve", json={"query": "counting"}))

    async def counted() -> dict[str, float] | None:
        text = (await client.get("/metrics")).text
        values: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name.startswith("memoryos_"):
                    values[sample.name] = values.get(sample.name, 0.0) + sample.value
        wanted = (
            "memoryos_events_total",
            "memoryos_request_duration_seconds_count",
            "memoryos_embedding_duration_seconds_count",
        )
        return values if all(values.get(name, 0) > 0 for name in wanted) else None

    values = await eventually(counted)
    assert values["memoryos_memory_transitions_total"] > 0
