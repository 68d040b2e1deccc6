"""The HTTP layer alone, over a fake ResponseService: auth, limits, validation, error shapes."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any, cast

import httpx
import pytest

from adapters.metrics import Metrics
from adapters.settings import Settings
from schemas.errors import EmbedderError, LLMError, MemoryOSError, Restarting, StoreError
from schemas.turn import MAX_TEXT_CHARS
from service.http import create_http_app
from service.response import ResponseService
from tests.support.fake_service import (
    AUTH,
    FORGOTTEN,
    KEYS,
    LIMIT,
    TEA_FACT,
    FakeMemory,
    build,
)
from tests.support.fake_service import status as fake_status

TURN = {"query": "I like tea.", "response": "Noted."}


@pytest.fixture
def fake() -> FakeMemory:
    return FakeMemory()


@pytest.fixture
async def client(fake: FakeMemory) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(build(fake))
    async with httpx.AsyncClient(transport=transport, base_url="http://memoryos") as http:
        yield http


def error_of(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert set(body) - {"errors"} == {"error", "field"}
    assert body["error"]
    if "errors" in body:  # a bad body: every problem, the first one being ``field``
        assert body["errors"][0]["field"] == body["field"]
    return body


# --- auth ---


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": f"Basic {KEYS[0]}"},
        {"Authorization": KEYS[0]},
        {"Authorization": "Bearer "},
        {"Authorization": "Bearer clé-non-ascii".encode()},
    ],
    ids=["none", "wrong-key", "basic-scheme", "no-scheme", "empty", "non-ascii"],
)
async def test_v1_routes_need_a_valid_bearer_key(
    client: httpx.AsyncClient, headers: dict[str, Any]
) -> None:
    for method, path, body in [
        ("POST", "/v1/users/alice/turns", TURN),
        ("POST", "/v1/turns", [TURN]),
        ("POST", "/v1/users/alice/retrieve", {"query": "tea"}),
        ("POST", "/v1/users/alice/respond", {"query": "tea"}),
        ("GET", "/v1/users/alice/memory", None),
        ("DELETE", "/v1/users/alice", None),
    ]:
        response = await client.request(method, path, json=body, headers=headers)
        error = error_of(response, 401)
        assert "Bearer" in error["error"]
        assert response.headers["WWW-Authenticate"] == "Bearer"


@pytest.mark.parametrize("key", KEYS)
async def test_any_configured_key_is_accepted(client: httpx.AsyncClient, key: str) -> None:
    for scheme in ("Bearer", "bearer"):
        response = await client.get(
            "/v1/users/alice/memory", headers={"Authorization": f"{scheme} {key}"}
        )
        assert response.status_code == 200, response.text


async def test_health_metrics_and_spec_need_no_key(client: httpx.AsyncClient) -> None:
    for path in ("/healthz", "/readyz", "/metrics", "/openapi.json"):
        assert (await client.get(path)).status_code == 200, path
    assert "memoryos_" in (await client.get("/metrics")).text


async def test_without_keys_configured_no_auth_is_needed(fake: FakeMemory) -> None:
    transport = httpx.ASGITransport(build(fake, api_keys=""))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        assert (await http.get("/v1/users/alice/memory")).status_code == 200
        assert "securitySchemes" not in (await http.get("/openapi.json")).json()["components"]


# --- body size ---


async def test_a_body_over_the_limit_is_413(client: httpx.AsyncClient) -> None:
    big = {"query": "x" * LIMIT, "response": "r"}
    error_of(await client.post("/v1/users/alice/turns", json=big, headers=AUTH), 413)
    error_of(await client.post("/v1/turns", json=[big], headers=AUTH), 413)


async def test_a_streamed_body_over_the_limit_is_413(client: httpx.AsyncClient) -> None:
    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: chunked upload
        yield b'{"query": "'
        for _ in range(LIMIT // 512 + 1):
            yield b"x" * 512
        yield b'", "response": "r"}'

    response = await client.post(
        "/v1/users/alice/turns",
        content=chunks(),
        headers=AUTH | {"Content-Type": "application/json"},
    )
    error_of(response, 413)


async def test_a_body_just_under_the_limit_is_accepted(client: httpx.AsyncClient) -> None:
    item = {"user_id": "alice", "query": "x" * 900, "response": "r"}
    items = [item] * ((LIMIT - 100) // len(json.dumps(item)))
    assert LIMIT - 1000 < len(json.dumps(items)) <= LIMIT
    response = await client.post("/v1/turns", json=items, headers=AUTH)
    assert response.status_code == 202
    assert response.json()["accepted"] == len(items)


# --- bad input ---


@pytest.mark.parametrize(
    "raw",
    ['{"query": "tea"', "{'query': 'tea'}", "not json", '{"query": "tea",}'],
)
async def test_malformed_json_is_400_with_the_reason(client: httpx.AsyncClient, raw: str) -> None:
    response = await client.post(
        "/v1/users/alice/retrieve",
        content=raw,
        headers=AUTH | {"Content-Type": "application/json"},
    )
    error = error_of(response, 400)
    assert error["field"] == "body"
    assert "not valid JSON" in error["error"]


async def test_invalid_utf8_is_400(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/users/alice/turns",
        content=b'{"query": "\xff\xfe", "response": "r"}',
        headers=AUTH | {"Content-Type": "application/json"},
    )
    error_of(response, 400)


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/users/alice/turns", {"query": 1, "response": "r"}, "query"),
        ("/v1/users/alice/turns", {"response": "r"}, "query"),
        ("/v1/users/alice/turns", TURN | {"timestamp": "yesterday"}, "timestamp"),
        ("/v1/users/alice/turns", TURN | {"meta": ["not", "an", "object"]}, "meta"),
        ("/v1/users/alice/turns", TURN | {"meta": {"n": 2**70}}, "meta"),
        ("/v1/users/alice/turns", TURN | {"meta": {"blob": "x" * 17_000}}, "meta"),
        ("/v1/users/alice/turns", TURN | {"turn_id": "has space"}, "turn_id"),
        ("/v1/users/alice/turns", TURN | {"channel": "c" * 65}, "channel"),
        ("/v1/users/alice/turns", TURN | {"surprise": True}, "surprise"),
        ("/v1/users/alice/turns", {"query": "q" * (MAX_TEXT_CHARS + 1), "response": "r"}, "query"),
        ("/v1/users/alice/turns", ["a", "list"], "body"),
        ("/v1/users/alice/retrieve", {"query": ""}, "query"),
        ("/v1/users/alice/retrieve", {"query": "tea", "top_k": "ten"}, "top_k"),
        ("/v1/users/alice/retrieve", {"query": "tea", "top_k": 0}, "top_k"),
        ("/v1/users/alice/retrieve", {"query": "tea", "assistant_id": "-bad"}, "assistant_id"),
        ("/v1/users/alice/respond", {"query": None}, "query"),
        ("/v1/users/alice/respond", {"query": "tea", "top_k": 3}, "top_k"),
        ("/v1/turns", {"user_id": "alice"} | TURN, "body"),
    ],
)
async def test_wrong_input_is_422_naming_the_field(
    client: httpx.AsyncClient, fake: FakeMemory, path: str, body: Any, field: str
) -> None:
    error = error_of(await client.post(path, json=body, headers=AUTH), 422)
    assert error["field"] == field
    assert field in error["error"]
    assert fake.turns == []


@pytest.mark.parametrize("timestamp", ["9999-12-31T23:59:59-14:00", "9999-12-31T23:59:59.5+00:00"])
async def test_a_timestamp_past_the_year_9999_in_utc_is_refused(
    client: httpx.AsyncClient, timestamp: str
) -> None:
    """Written in a zone west of UTC it passes for 9999 but is the year 10000: accepted, it
    became the MTM stage's clock, its persona jobs were dead-lettered and the user's memory
    answered 500 for good (found by an attack)."""
    for path, body in [
        ("/v1/users/alice/turns", {"query": "q", "response": "r", "timestamp": timestamp}),
        ("/v1/messages", MESSAGE | {"timestamp": timestamp}),
    ]:
        response = await client.post(path, json=body, headers=AUTH)
        assert error_of(response, 422)["field"].endswith("timestamp"), response.text
    ok = {"query": "q", "response": "r", "timestamp": "9999-12-31T23:59:59+01:00"}
    assert (await client.post("/v1/users/alice/turns", json=ok, headers=AUTH)).status_code == 202


async def test_lone_surrogates_are_refused_not_crashed_on(client: httpx.AsyncClient) -> None:
    for raw, field in [
        ('{"query": "\\ud800", "response": "r"}', "query"),
        ('{"query": "q", "response": "r", "meta": {"k": "\\udfff"}}', "meta"),
    ]:
        response = await client.post(
            "/v1/users/alice/turns",
            content=raw,
            headers=AUTH | {"Content-Type": "application/json"},
        )
        assert error_of(response, 422)["field"] == field


@pytest.mark.parametrize(
    "user_id", ["bad%20id", "-leading-dash", "x" * 129, "caf%C3%A9", "semi%3Bcolon"]
)
async def test_a_bad_user_id_is_422_naming_user_id(client: httpx.AsyncClient, user_id: str) -> None:
    for method, path, body in [
        ("POST", f"/v1/users/{user_id}/turns", TURN),
        ("POST", f"/v1/users/{user_id}/retrieve", {"query": "tea"}),
        ("POST", f"/v1/users/{user_id}/respond", {"query": "tea"}),
        ("GET", f"/v1/users/{user_id}/memory", None),
        ("DELETE", f"/v1/users/{user_id}", None),
    ]:
        response = await client.request(method, path, json=body, headers=AUTH)
        assert error_of(response, 422)["field"] == "user_id"


async def test_unknown_routes_and_methods_get_the_error_shape(client: httpx.AsyncClient) -> None:
    error_of(await client.get("/v1/nothing-here", headers=AUTH), 404)
    response = await client.put("/v1/users/alice/memory", headers=AUTH)
    error_of(response, 405)
    assert response.headers["Allow"] == "GET"


@pytest.mark.parametrize(
    ("failure", "said"),
    [
        (StoreError("qdrant at http://10.0.0.7:6333 is down"), "store unavailable"),
        (EmbedderError("model at /srv/models/minilm missing"), "embedder unavailable"),
        (LLMError("openai: 500 from https://api.internal"), "LLM unavailable"),
        (MemoryOSError("something internal"), "service unavailable"),
    ],
)
async def test_a_failing_backend_is_503_saying_what_failed_without_internals(
    client: httpx.AsyncClient, fake: FakeMemory, failure: Exception, said: str
) -> None:
    fake.failure = failure
    error = error_of(await client.post("/v1/users/alice/turns", json=TURN, headers=AUTH), 503)
    assert error["error"] == said


async def test_a_write_refused_while_the_broker_restarts_says_when_to_send_it_again(
    client: httpx.AsyncClient, fake: FakeMemory
) -> None:
    """A log roll refuses writes before anything is written: 503 with Retry-After, so a
    client (and `memoryos ingest`) sends the same turn again after it."""
    fake.failure = Restarting(2)
    response = await client.post("/v1/users/alice/turns", json=TURN, headers=AUTH)
    error = error_of(response, 503)
    assert response.headers["retry-after"] == "2"
    assert "restarting" in error["error"]


async def test_healthz_shows_no_configuration(fake: FakeMemory) -> None:
    async def detailed() -> dict[str, Any]:
        return {"status": "ok", "broker": "kafka://kafka.internal:9092", "store": "edge"}

    settings = Settings(api_keys=",".join(KEYS))
    app = create_http_app(cast(ResponseService, fake), settings, Metrics(), detailed, fake_status)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://m") as http:
        reply = await http.get("/healthz")
    assert reply.status_code == 200
    assert reply.json() == {"status": "ok"}


# --- the routes ---


async def test_a_turn_is_accepted_with_defaults_filled_in(
    client: httpx.AsyncClient, fake: FakeMemory
) -> None:
    response = await client.post("/v1/users/alice/turns", json=TURN, headers=AUTH)
    assert response.status_code == 202
    [turn] = fake.turns
    assert response.json() == {"turn_id": turn.turn_id}
    assert (turn.user_id, turn.query, turn.response, turn.meta) == ("alice", *TURN.values(), {})
    assert turn.timestamp.tzinfo is not None


async def test_a_turn_keeps_what_the_client_gave(
    client: httpx.AsyncClient, fake: FakeMemory
) -> None:
    body = TURN | {
        "turn_id": "t-42",
        "timestamp": "2024-03-01T09:00:00",
        "assistant_id": "bot",
        "channel": "sms",
        "meta": {"ticket": 7, "tags": ["a"]},
    }
    response = await client.post("/v1/users/alice/turns", json=body, headers=AUTH)
    assert response.json() == {"turn_id": "t-42"}
    [turn] = fake.turns
    assert turn.timestamp == datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
    assert (turn.assistant_id, turn.channel, turn.meta) == ("bot", "sms", body["meta"])


async def test_batch_accepts_valid_items_and_names_invalid_ones(
    client: httpx.AsyncClient, fake: FakeMemory
) -> None:
    items: list[Any] = [
        {"user_id": "alice"} | TURN,
        {"user_id": "bob", "query": 5, "response": "r"},
        "a string",
        {"user_id": "bad id"} | TURN,
        TURN,
        {"user_id": "carol", "turn_id": "c-1"} | TURN,
        {"user_id": "carol", "extra": 1} | TURN,
        None,
    ]
    response = await client.post("/v1/turns", json=items, headers=AUTH)
    assert response.status_code == 202
    body = response.json()
    assert body["accepted"] == 2
    results = body["results"]
    assert [r["index"] for r in results] == list(range(len(items)))
    accepted = [r for r in results if "turn_id" in r]
    assert [r["index"] for r in accepted] == [0, 5]
    assert all(set(r) == {"index", "turn_id"} for r in accepted)
    assert all(set(r) == {"index", "error"} for r in results if r not in accepted)
    assert [t.user_id for t in fake.turns] == ["alice", "carol"]
    assert results[5]["turn_id"] == "c-1"
    reasons = {r["index"]: r["error"] for r in results if "error" in r}
    assert "query" in reasons[1]
    assert "object" in reasons[2]
    assert "user_id" in reasons[3]
    assert "user_id" in reasons[4]
    assert "extra" in reasons[6]
    assert "null" in reasons[7]


async def test_an_empty_batch_is_fine_and_over_1000_items_is_422(client: httpx.AsyncClient) -> None:
    empty = await client.post("/v1/turns", json=[], headers=AUTH)
    assert empty.json() == {"accepted": 0, "results": []}
    huge = await client.post("/v1/turns", json=[{}] * 1001, headers=AUTH)
    assert error_of(huge, 422)["field"] == "body"
    assert "1000" in huge.json()["error"]


async def test_retrieve_returns_the_documented_shape(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/users/alice/retrieve", json={"query": "tea", "top_k": 3}, headers=AUTH
    )
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {
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
    [short] = body["short_term"]
    assert set(short) == {"page_id", "turn_id", "query", "response", "timestamp", "meta", "chain",
                          "assistant_id", "channel", "conversation_id"}  # fmt: skip
    assert short["meta"] == {"source": "crm"}
    assert short["chain"] == {"prev": None, "next": None, "summary": "tea"}
    [mid] = body["mid_term"]
    assert (mid["segment_id"], mid["score"]) == ("seg-1", 0.75)
    assert body["user_traits"] == {"openness": {"level": "High", "reason": "tries teas"}}
    assert body["user_knowledge"] == [{"text": "likes tea", "score": 0.9, "fact_id": TEA_FACT}]


async def test_respond_answers_for_the_assistant(
    client: httpx.AsyncClient, fake: FakeMemory
) -> None:
    response = await client.post(
        "/v1/users/alice/respond",
        json={"query": "What do I like?", "assistant_id": "bot"},
        headers=AUTH,
    )
    assert response.status_code == 200
    body = response.json()
    assert body["response"] == "You like tea."
    assert body["usage"] == {"prompt_tokens": 120, "completion_tokens": 7}
    assert body["remembered"] is True
    assert body["memory"]["short_term"][0]["turn_id"] == "t1"
    # Recording the exchange as a turn is the service's job
    # (tests/service/test_respond_remembers.py).
    assert fake.responded == [("alice", "What do I like?", "bot")]


async def test_memory_and_delete(client: httpx.AsyncClient) -> None:
    memory = (await client.get("/v1/users/alice/memory", headers=AUTH)).json()
    assert memory["user_id"] == "alice"
    assert [p["turn_id"] for p in memory["short_term"]] == ["t1"]
    deleted = await client.delete("/v1/users/alice", headers=AUTH)
    assert deleted.status_code == 200
    assert deleted.json() == {"deleted": FORGOTTEN}


async def test_a_worker_serves_only_health_and_metrics(fake: FakeMemory) -> None:
    transport = httpx.ASGITransport(build(fake, api=False))
    async with httpx.AsyncClient(transport=transport, base_url="http://memoryos") as http:
        assert (await http.get("/healthz")).status_code == 200
        assert (await http.get("/metrics")).status_code == 200
        error_of(await http.post("/v1/users/alice/turns", json=TURN, headers=AUTH), 404)


def test_the_spec_documents_errors_and_auth_for_every_v1_operation(fake: FakeMemory) -> None:
    spec = build(fake).openapi()
    assert spec["components"]["securitySchemes"]["bearer"] == {"type": "http", "scheme": "bearer"}
    error_ref = {"$ref": "#/components/schemas/ErrorBody"}
    operations = [
        (path, method, operation)
        for path, methods in spec["paths"].items()
        if path.startswith("/v1")
        for method, operation in methods.items()
    ]
    assert len(operations) == 16
    for path, method, operation in operations:
        assert operation["security"] == [{"bearer": []}], (method, path)
        for status in ("401", "422"):
            schema = operation["responses"][status]["content"]["application/json"]["schema"]
            assert schema == error_ref, (method, path, status)
    batch = spec["paths"]["/v1/turns"]["post"]["requestBody"]["content"]["application/json"]
    assert "user_id" in batch["schema"]["items"]["required"]


# --- profiles ---


async def test_profiles_are_put_whole_and_read_back(
    client: httpx.AsyncClient, fake: FakeMemory
) -> None:
    put = await client.put(
        "/v1/users/alice/profile", json={"name": "Alice", "plan": "gold"}, headers=AUTH
    )
    assert (put.status_code, put.json()) == (
        200,
        {"user_id": "alice", "profile": {"name": "Alice", "plan": "gold"}},
    )
    assert fake.profiles["alice"] == {"name": "Alice", "plan": "gold"}
    bot = {"name": "Sam", "role": "billing"}
    put = await client.put("/v1/assistants/billing/profile", json=bot, headers=AUTH)
    assert put.json() == {"assistant_id": "billing", "profile": bot}
    got = await client.get("/v1/assistants/billing/profile", headers=AUTH)
    assert got.json() == {"assistant_id": "billing", "profile": bot}


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ([1, 2], "expected a JSON object"),
        ({f"k{i}": i for i in range(65)}, "at most 64"),
        ({"bio": "x" * 5000}, "at most 4096"),
        ({"a": {"b": {"c": {"d": {}}}}}, "nested deeper"),
    ],
)
async def test_a_bad_profile_is_a_422(client: httpx.AsyncClient, body: Any, problem: str) -> None:
    response = await client.put("/v1/users/alice/profile", json=body, headers=AUTH)
    assert problem in error_of(response, 422)["error"]
    bad_id = await client.put("/v1/assistants/bad id/profile", json={}, headers=AUTH)
    assert error_of(bad_id, 422)["field"] == "assistant_id"


# --- messages ---

MESSAGE = {"user_id": "alice", "conversation_id": "c1", "role": "user", "text": "Hi there"}


async def test_a_re_sent_message_id_is_reported_and_a_different_text_is_a_conflict(
    client: httpx.AsyncClient, fake: FakeMemory
) -> None:
    first = MESSAGE | {"message_id": "m7"}
    assert (await client.post("/v1/messages", json=first, headers=AUTH)).json()["accepted"] == 1
    again = await client.post(
        "/v1/messages",
        json=[first, first | {"text": "something else"}, MESSAGE | {"message_id": "m8"}],
        headers=AUTH,
    )
    body = again.json()
    assert (again.status_code, body["accepted"]) == (202, 1)
    assert body["results"][0] == {"index": 0, "message_id": "m7", "duplicate": True}
    assert body["results"][1]["duplicate"] is True
    assert "first copy is kept" in body["results"][1]["conflict"]
    assert body["results"][2] == {"index": 2, "message_id": "m8"}
    same_request = await client.post(
        "/v1/messages", json=[MESSAGE | {"message_id": "m9"}] * 2, headers=AUTH
    )
    assert [r.get("duplicate") for r in same_request.json()["results"]] == [None, True]
    other_user = await client.post(
        "/v1/messages", json=first | {"user_id": "bob", "text": "other"}, headers=AUTH
    )
    assert other_user.json()["results"] == [{"index": 0, "message_id": "m7"}]  # ids are per user
    assert [m.message_id for m in fake.messages] == ["m7", "m8", "m9", "m7"]


async def test_one_message_or_a_list_is_accepted(
    client: httpx.AsyncClient, fake: FakeMemory
) -> None:
    one = await client.post("/v1/messages", json=MESSAGE | {"message_id": "m1"}, headers=AUTH)
    assert (one.status_code, one.json()) == (
        202,
        {"accepted": 1, "results": [{"index": 0, "message_id": "m1"}]},
    )
    many = await client.post(
        "/v1/messages",
        json=[MESSAGE | {"channel": "email"}, MESSAGE | {"role": "bot"}, "text"],
        headers=AUTH,
    )
    body = many.json()
    assert (many.status_code, body["accepted"]) == (202, 1)
    assert body["results"][0]["message_id"]
    assert "role" in body["results"][1]["error"]
    assert "JSON object" in body["results"][2]["error"]
    assert [(m.message_id == "m1", m.channel) for m in fake.messages] == [
        (True, None),
        (False, "email"),
    ]
    assert fake.messages[0].timestamp.tzinfo is not None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (MESSAGE | {"text": "  "}, "text"),
        (MESSAGE | {"user_id": "bad id"}, "user_id"),
        (MESSAGE | {"extra": 1}, "extra"),
        ("just text", "body"),
        ([{"role": "user"}] * 1001, "body"),
    ],
)
async def test_a_bad_message_is_a_422_naming_the_field(
    client: httpx.AsyncClient, fake: FakeMemory, body: Any, field: str
) -> None:
    response = await client.post("/v1/messages", json=body, headers=AUTH)
    assert error_of(response, 422)["field"] == field
    assert fake.messages == []


async def test_every_operation_is_described_with_an_example(client: httpx.AsyncClient) -> None:
    spec = (await client.get("/openapi.json")).json()
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            where = f"{method.upper()} {path}"
            assert operation.get("description"), f"{where} has no description"
            if "requestBody" in operation:
                assert "example" in operation["requestBody"]["content"]["application/json"], where
            ok = next(code for code in operation["responses"] if code.startswith("2"))
            content = operation["responses"][ok]["content"]
            assert any("example" in media for media in content.values()), where


async def test_the_docs_page_loads_its_scripts_from_the_service_not_a_cdn(
    client: httpx.AsyncClient,
) -> None:
    page = (await client.get("/docs")).text
    scripts = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert scripts
    assert all(url.startswith("/") for url in scripts), scripts
    for url in scripts:
        assert (await client.get(url)).status_code == 200, url


async def test_every_problem_of_a_bad_body_is_listed_with_its_field(
    client: httpx.AsyncClient,
) -> None:
    bad = {"query": 7, "response": None, "timestamp": "yesterday", "channel": "x" * 500}
    body = error_of(await client.post("/v1/users/alice/turns", json=bad, headers=AUTH), 422)
    assert [problem["field"] for problem in body["errors"]] == [
        "query",
        "response",
        "timestamp",
        "channel",
    ]
    unlabelled = await client.post("/v1/users/alice/turns", content=b"query=hi", headers=AUTH)
    assert "Content-Type: application/json" in error_of(unlabelled, 422)["error"]


async def test_a_bad_message_lists_every_problem_and_remember_null_is_the_default(
    client: httpx.AsyncClient, fake: FakeMemory
) -> None:
    bad = {"user_id": "alice", "role": "bot", "text": 5}
    body = error_of(await client.post("/v1/messages", json=bad, headers=AUTH), 422)
    assert [e["field"] for e in body["errors"]] == ["conversation_id", "role", "text"]
    plain = await client.post("/v1/messages", content=b"hello", headers=AUTH)
    assert "Content-Type: application/json" in plain.json()["error"]
    reply = await client.post(
        "/v1/users/alice/respond", json={"query": "tea?", "remember": None}, headers=AUTH
    )
    assert reply.json()["remembered"] is True
