"""The client's facts methods: each sends its route, query and body (an httpx MockTransport
records them), parses the reply into the API's models, and raises the API's 404 and 409 as
``NotFoundError`` and ``Conflict``; then the async client against the real routes over the
in-memory pipeline."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from memoryos_client import (
    APIError,
    AsyncMemoryClient,
    Conflict,
    InvalidInput,
    MemoryClient,
    NotFoundError,
)
from memoryos_client.models import FactAccepted, FactHistory, FactList
from tests.support.tenant_app import TenantApp, tenant_app

FID = "3f2a6c1e-0b7d-5e4f-9a8b-1c2d3e4f5a6b"
UNKNOWN = "00000000-0000-5000-8000-000000000000"
FACT = {
    "fact_id": FID,
    "kind": "user_knowledge",
    "text": "The user keeps bees.",
    "created_at": "2024-05-01T10:00:00Z",
    "source": {"turn_ids": ["t-1"], "page_ids": ["p-1"]},
    "assistant_id": None,
    "pinned": False,
    "superseded_by": None,
    "superseded_at": None,
}
HISTORY = {
    "fact_id": FID,
    "changes": [
        {"change": "extracted", "at": "2024-05-01T10:00:00Z",
         "source": {"turn_ids": ["t-1"], "page_ids": ["p-1"]}, "text": "The user keeps bees.",
         "superseded_by": None},
        {"change": "edited", "at": "2024-05-02T10:00:00Z", "source": "api",
         "text": "The user keeps wasps.", "superseded_by": None},
    ],
}  # fmt: skip


class Recorder:
    """A MockTransport handler: records each request, answers with ``reply``."""

    def __init__(self, status: int = 200, body: Any = None) -> None:
        self.status, self.body = status, body
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return httpx.Response(self.status, json=self.body)

    @property
    def last(self) -> tuple[str, str, Any]:
        request = self.requests[-1]
        body = json.loads(request.content) if request.content else None
        return request.method, str(request.url.raw_path.decode()), body


def sync_client(recorder: Recorder) -> MemoryClient:
    return MemoryClient("http://memoryos", "k", transport=httpx.MockTransport(recorder))


def async_client(recorder: Recorder) -> AsyncMemoryClient:
    return AsyncMemoryClient("http://memoryos", "k", transport=httpx.MockTransport(recorder))


# (method call, reply, expected method, path, body)
CASES: list[tuple[str, Callable[[Any], Any], Any, str, str, Any]] = [
    ("list", lambda m: m.list_facts("bob"), {"facts": [FACT], "next_cursor": None},
     "GET", "/v1/users/bob/facts", None),
    ("list, every filter", lambda m: m.list_facts(
        "bob", kind="agent_trait", include_superseded=True, limit=2, cursor="4"),
     {"facts": [], "next_cursor": "6"}, "GET",
     "/v1/users/bob/facts?kind=agent_trait&limit=2&cursor=4&include_superseded=true", None),
    ("add", lambda m: m.add_fact("bob", "I keep bees."), {"fact_id": FID}, "POST",
     "/v1/users/bob/facts", {"text": "I keep bees.", "kind": "user_knowledge"}),
    ("add a pinned trait", lambda m: m.add_fact(
        "bob", "Answers in French.", kind="agent_trait", assistant_id="tutor", pinned=True),
     {"fact_id": FID}, "POST", "/v1/users/bob/facts",
     {"text": "Answers in French.", "kind": "agent_trait", "assistant_id": "tutor",
      "pinned": True}),
    ("edit the text", lambda m: m.edit_fact("bob", FID, text="I keep wasps."),
     {"fact_id": FID}, "PATCH", f"/v1/users/bob/facts/{FID}", {"text": "I keep wasps."}),
    ("unpin", lambda m: m.edit_fact("bob", FID, pinned=False), {"fact_id": FID}, "PATCH",
     f"/v1/users/bob/facts/{FID}", {"pinned": False}),
    ("delete", lambda m: m.delete_fact("bob", FID), {"fact_id": FID}, "DELETE",
     f"/v1/users/bob/facts/{FID}", None),
    ("history", lambda m: m.fact_history("bob", FID), HISTORY, "GET",
     f"/v1/users/bob/facts/{FID}/history", None),
    ("ids quoted", lambda m: m.fact_history("a/b c", "x/../y"), HISTORY, "GET",
     "/v1/users/a%2Fb%20c/facts/x%2F..%2Fy/history", None),
]  # fmt: skip
MODELS = {"GET": (FactList, FactHistory), "POST": (FactAccepted,), "PATCH": (FactAccepted,),
          "DELETE": (FactAccepted,)}  # fmt: skip


@pytest.mark.parametrize(("name", "call", "reply", "method", "path", "body"), CASES)
def test_the_sync_client_sends_each_facts_route(
    name: str, call: Callable[[Any], Any], reply: Any, method: str, path: str, body: Any
) -> None:
    recorder = Recorder(202 if method != "GET" else 200, reply)
    with sync_client(recorder) as memory:
        result = call(memory)
    assert recorder.last == (method, path, body), name
    assert recorder.requests[-1].headers["authorization"] == "Bearer k"
    assert isinstance(result, MODELS[method])
    assert result.model_dump(mode="json") == reply


@pytest.mark.parametrize(("name", "call", "reply", "method", "path", "body"), CASES)
async def test_the_async_client_sends_each_facts_route(
    name: str, call: Callable[[Any], Any], reply: Any, method: str, path: str, body: Any
) -> None:
    recorder = Recorder(202 if method != "GET" else 200, reply)
    async with async_client(recorder) as memory:
        result = await call(memory)
    assert recorder.last == (method, path, body), name
    assert isinstance(result, MODELS[method])
    assert result.model_dump(mode="json") == reply


def test_the_parsed_fact_keeps_its_fields() -> None:
    with sync_client(Recorder(200, {"facts": [FACT], "next_cursor": "100"})) as memory:
        page = memory.list_facts("bob")
    [fact] = page.facts
    assert (fact.fact_id, fact.kind, fact.pinned, page.next_cursor) == (
        FID,
        "user_knowledge",
        False,
        "100",
    )
    assert not isinstance(fact.source, str)
    assert fact.source.turn_ids == ["t-1"]


@pytest.mark.parametrize(
    ("status", "error"), [(404, NotFoundError), (409, Conflict), (422, InvalidInput)]
)
def test_the_apis_errors_are_raised_by_the_sync_client(status: int, error: type[APIError]) -> None:
    body = {"error": f"no fact {UNKNOWN} in this user's memory", "field": None}
    with sync_client(Recorder(status, body)) as memory, pytest.raises(error) as raised:
        memory.edit_fact("bob", UNKNOWN, text="x")
    assert (raised.value.status, raised.value.message) == (status, body["error"])


@pytest.mark.parametrize(
    "call",
    [
        lambda m: m.edit_fact("bob", UNKNOWN, pinned=True),
        lambda m: m.delete_fact("bob", UNKNOWN),
        lambda m: m.fact_history("bob", UNKNOWN),
    ],
)
async def test_a_404_is_not_found_from_the_async_client(call: Callable[[Any], Any]) -> None:
    recorder = Recorder(404, {"error": f"no fact {UNKNOWN} in this user's memory", "field": None})
    async with async_client(recorder) as memory:
        with pytest.raises(NotFoundError) as raised:
            await call(memory)
    assert raised.value.status == 404
    assert UNKNOWN in raised.value.message


# --- the real routes, over the in-memory pipeline ---


class Stage:
    def __init__(self, made: TenantApp) -> None:
        self.pipeline, self.app, self.secrets = made.pipeline, made.app, made.secrets

    def client(self, who: str) -> AsyncMemoryClient:
        transport = httpx.ASGITransport(app=self.app)
        return AsyncMemoryClient("http://memoryos", self.secrets[who], transport=transport)


@pytest_asyncio.fixture
async def stage(tmp_path: Path) -> AsyncIterator[Stage]:
    made = await tenant_app(tmp_path, tenants=("acme",))
    yield Stage(made)
    made.journal.close()


async def test_the_async_client_against_the_facts_routes(stage: Stage) -> None:
    async with stage.client("acme") as memory:
        added = await memory.add_fact("bob", "I keep bees.", pinned=True)
        await stage.pipeline.drain()
        [fact] = (await memory.list_facts("bob")).facts
        assert (fact.fact_id, fact.text, fact.source, fact.pinned) == (
            added.fact_id,
            "I keep bees.",
            "api",
            True,
        )
        edited = await memory.edit_fact("bob", added.fact_id, text="I keep wasps.")
        assert edited.fact_id == added.fact_id
        await stage.pipeline.drain()
        assert [f.text for f in (await memory.list_facts("bob")).facts] == ["I keep wasps."]
        history = await memory.fact_history("bob", added.fact_id)
        assert [c.change for c in history.changes] == ["added", "edited"]
        await memory.delete_fact("bob", added.fact_id)
        await stage.pipeline.drain()
        assert (await memory.list_facts("bob")).facts == []
        with pytest.raises(NotFoundError):
            await memory.delete_fact("bob", added.fact_id)
        with pytest.raises(NotFoundError):
            await memory.edit_fact("bob", UNKNOWN, text="x")
        with pytest.raises(InvalidInput) as invalid:
            await memory.edit_fact("bob", added.fact_id)
        assert invalid.value.field == "body"
        await memory.add_fact("bob", "I keep bees.")
        await stage.pipeline.drain()
        await memory.forget_user("bob")
        with pytest.raises(Conflict):  # the DELETE's marker has not passed every stage
            await memory.add_fact("bob", "I keep wasps.")
