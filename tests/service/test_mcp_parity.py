"""MCP on par with HTTP: every route of the API has its MCP tool, or is a listed exception with
its reason; every tool names the route it calls. The new tools run through the real routes
over the in-memory pipeline, with the key's tenant, scopes and the service's own errors."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from fastapi.routing import APIRoute
from mcp import Client

from service.mcp import build_server
from tests.support.api_routes import DOCS, ROUTES, TOOLS
from tests.support.mcp import FactsApp, error_text, structured
from tests.support.tenant_app import tenant_app

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module")
async def app(tmp_path: Path) -> AsyncIterator[FactsApp]:
    made = await tenant_app(tmp_path, tenants=())
    yield FactsApp(made)
    made.journal.close()


async def test_every_route_has_its_tool_or_a_reason(app: FactsApp) -> None:
    routes = {
        (method, route.path)
        for route in app.app.routes
        if isinstance(route, APIRoute) and route.include_in_schema
        for method in route.methods
    }
    routes = {(method, path) for method, path in routes if path not in DOCS}
    assert routes == set(ROUTES), "a route not in tests/support/api_routes.py, or one gone"
    tools = {tool.name for tool in await build_server("http://memoryos").list_tools()}
    assert set(TOOLS.values()) == tools, "a tool with no route, or a route's tool missing"


async def test_the_new_tools_through_the_service(app: FactsApp) -> None:
    async with await app.tools("acme", ("read", "write", "admin")) as client:
        turns = [
            {"user_id": "bob", "query": "I ordered boots.", "response": "Noted."},
            {"user_id": "bob", "query": 5, "response": "x"},
            "junk",
        ]
        batch = structured(await client.call_tool("add_turns", {"turns": turns}))
        assert batch["accepted"] == 1
        assert "query" in batch["results"][1]["error"], "a bad item is refused alone"
        assert "object" in batch["results"][2]["error"], "one that is not an object too"
        messages = [
            {"user_id": "bob", "conversation_id": "c1", "role": "user", "text": "Size 39?"},
            {"user_id": "bob", "conversation_id": "c1", "role": "assistant", "text": "Yes."},
        ]
        sent = structured(await client.call_tool("add_messages", {"messages": messages}))
        assert sent["accepted"] == 2
        await app.pipeline.drain()
        history = structured(await client.call_tool("get_history", {"user_id": "bob"}))
        assert history["turns"], history
        profile = {"assistant_id": "billing", "profile": {"role": "billing agent"}}
        structured(await client.call_tool("set_assistant_profile", profile))
        got = structured(
            await client.call_tool("get_assistant_profile", {"assistant_id": "billing"})
        )
        assert got == profile
        users = structured(await client.call_tool("list_users", {}))
        assert users["users"] == ["bob"]
        me = structured(await client.call_tool("whoami", {}))
        assert me["tenant"] == "acme"
        assert sorted(me["scopes"]) == ["admin", "read", "write"]
        bad = await client.call_tool("list_users", {"cursor": "no spaces allowed"})
        assert "cursor" in error_text(bad)


async def test_the_new_tools_keep_the_keys_tenant_and_scopes(app: FactsApp) -> None:
    async with await app.tools("acme", ("read", "write")) as writer:
        turn = {"user_id": "amy", "query": "Hi.", "response": "Hello."}
        structured(await writer.call_tool("add_turns", {"turns": [turn]}))
        assert "403" in error_text(await writer.call_tool("list_users", {})), "admin only"
    await app.pipeline.drain()
    async with await app.tools("acme", ("read",)) as reader:
        assert "403" in error_text(await reader.call_tool("add_turns", {"turns": [turn]}))
        message = {"user_id": "amy", "conversation_id": "c", "role": "user", "text": "Hi"}
        assert "403" in error_text(await reader.call_tool("add_messages", {"messages": [message]}))
        assert structured(await reader.call_tool("get_history", {"user_id": "amy"}))["turns"]
    async with await app.tools("zeta", ("read", "admin")) as other:
        assert structured(await other.call_tool("get_history", {"user_id": "amy"}))["turns"] == []
        assert structured(await other.call_tool("list_users", {}))["users"] == []


FID = "00000000-0000-5000-8000-000000000000"
ARGUMENTS: dict[str, dict[str, object]] = {
    "add_turn": {"user_id": "bob", "query": "q", "response": "r", "turn_id": "t1",
                 "assistant_id": "bot", "channel": "web", "conversation_id": "c1"},
    "add_turns": {"turns": [{"user_id": "bob", "query": "q", "response": "r"}]},
    "add_messages": {"messages": [{"user_id": "bob", "conversation_id": "c", "role": "user",
                                   "text": "hi"}]},
    "retrieve_memory": {"user_id": "bob", "query": "q"},
    "respond": {"user_id": "bob", "query": "q"},
    "get_memory": {"user_id": "bob"},
    "get_history": {"user_id": "bob"},
    "set_user_profile": {"user_id": "bob", "profile": {"name": "Bob"}},
    "set_assistant_profile": {"assistant_id": "bot", "profile": {"role": "r"}},
    "get_assistant_profile": {"assistant_id": "bot"},
    "forget_user": {"user_id": "bob"},
    "list_facts": {"user_id": "bob"},
    "add_fact": {"user_id": "bob", "text": "I keep bees."},
    "edit_fact": {"user_id": "bob", "fact_id": FID, "pinned": True},
    "delete_fact": {"user_id": "bob", "fact_id": FID},
    "fact_history": {"user_id": "bob", "fact_id": FID},
    "list_users": {},
    "whoami": {},
}  # fmt: skip
FILLED = {"user_id": "bob", "assistant_id": "bot", "fact_id": FID}


async def test_each_tool_calls_the_route_it_stands_for() -> None:
    """The map above, checked: each tool's request goes to its route with its method."""
    assert set(ARGUMENTS) == set(TOOLS.values())
    sent: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json={})

    server = build_server("http://memoryos", "key", httpx.MockTransport(record))
    bodies: dict[str, bytes] = {}
    async with Client(server) as client:
        for (method, template), tool in TOOLS.items():
            sent.clear()
            result = await client.call_tool(tool, ARGUMENTS[tool])
            assert not result.is_error, (tool, result.content)
            (request,) = sent
            path = template.format(**FILLED)
            assert (request.method, request.url.path) == (method, path), tool
            bodies[tool] = request.content
    turn = json.loads(bodies["add_turn"])
    fields = ("turn_id", "assistant_id", "channel", "conversation_id")
    assert [turn[field] for field in fields] == ["t1", "bot", "web", "c1"], "add_turn's fields"
