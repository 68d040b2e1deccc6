"""`memoryos mcp` against a running stack, through the official MCP SDK's client.

stdio: the client spawns `python -m streams.cli mcp --url <stack>` as an agent framework
would; streamable HTTP: `--transport http` as a child process; in-process: the same server
object, for how HTTP failures become tool errors. The facts tools: in-process, against an httpx
MockTransport (route and body) and the real routes over the in-memory pipeline (scopes and
tenants as over HTTP).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from evaluation.fake_openai import FakeOpenAI
from memory.dates import MONTHS
from schemas.turn import MAX_TEXT_CHARS
from service.mcp import build_server
from streams.broker import free_port
from streams.stack import Stack
from tests.support.mcp import FactsApp, error_text, structured
from tests.support.paths import ROOT
from tests.support.stacks import eventually, running_stack
from tests.support.tenant_app import tenant_app

pytestmark = [pytest.mark.asyncio(loop_scope="module")]  # the stack's tests: integration

API_KEY = "mcp-key"
TOOLS = {
    "add_turn",
    "add_turns",
    "add_messages",
    "get_history",
    "get_assistant_profile",
    "list_users",
    "whoami",
    "retrieve_memory",
    "respond",
    "get_memory",
    "forget_user",
    "set_user_profile",
    "set_assistant_profile",
    "list_facts",
    "add_fact",
    "edit_fact",
    "delete_fact",
    "fact_history",
}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    # Embeddings from a fake OpenAI server of the module's own (a shared one may hold another
    # test's faults): these tests are about MCP, and the local model would double their time.
    with FakeOpenAI() as server:
        embedder = {
            "embedder": "openai",
            "openai_base_url": server.base_url,
            "openai_api_key": "test-key",
            "embedding_model": "fake-embedding",
        }
        data_dir = tmp_path_factory.mktemp("mcp")
        async with running_stack(data_dir, stm_capacity=3, api_keys=API_KEY, **embedder) as running:
            yield running


def url_of(stack: Stack) -> str:
    return f"http://127.0.0.1:{stack.port}"


def environment() -> dict[str, str]:
    return {**os.environ, "MEMORYOS_API_KEYS": API_KEY, "PYTHONPATH": str(ROOT)}


@pytest.mark.integration
async def test_every_tool_over_stdio(stack: Stack) -> None:
    command = [sys.executable, "-m", "streams.cli", "mcp", "--url", url_of(stack)]
    server = StdioServerParameters(
        command=command[0], args=command[1:], env=environment(), cwd=str(ROOT)
    )
    async with Client(server, read_timeout_seconds=60) as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS

        added = structured(
            await client.call_tool(
                "add_turn",
                {
                    "user_id": "mcp-user",
                    "query": "I am learning to play the cello.",
                    "response": "How exciting!",
                    "meta": {"via": "mcp", "n": 1},
                },
            )
        )
        turn_id = added["turn_id"]

        async def stored() -> dict[str, Any] | None:
            memory = structured(await client.call_tool("get_memory", {"user_id": "mcp-user"}))
            pages = [p for p in memory["short_term"] if p["turn_id"] == turn_id]
            return pages[0] if pages else None

        page = await eventually(stored)
        assert page["meta"] == {"via": "mcp", "n": 1}

        profile = {"name": "Cleo", "plan": "gold"}
        set_user = {"user_id": "mcp-user", "profile": profile}
        assert structured(await client.call_tool("set_user_profile", set_user)) == set_user
        bot = {"assistant_id": "music-bot", "profile": {"role": "music teacher"}}
        assert structured(await client.call_tool("set_assistant_profile", bot)) == bot
        found = structured(
            await client.call_tool(
                "retrieve_memory",
                {"user_id": "mcp-user", "query": "cello", "top_k": 2, "assistant_id": "music-bot"},
            )
        )
        assert [p["turn_id"] for p in found["short_term"]] == [turn_id]
        assert {"mid_term", "user_knowledge", "agent_traits"} <= set(found)
        assert (found["user_profile"], found["agent_profile"]) == (profile, bot["profile"])
        too_big = {"user_id": "mcp-user", "profile": {"bio": "x" * 5000}}
        assert "4096" in error_text(await client.call_tool("set_user_profile", too_big))

        answered = structured(
            await client.call_tool(
                "respond", {"user_id": "mcp-user", "query": "Which instrument am I learning?"}
            )
        )
        assert isinstance(answered["response"], str)
        assert answered["response"]
        assert set(answered["usage"]) == {"prompt_tokens", "completion_tokens"}

        async def both_stored() -> bool:
            memory = structured(await client.call_tool("get_memory", {"user_id": "mcp-user"}))
            return len(memory["short_term"]) == 2

        await eventually(both_stored)
        forgotten = structured(await client.call_tool("forget_user", {"user_id": "mcp-user"}))
        assert forgotten["deleted"]["short_term"] == 2
        memory = structured(await client.call_tool("get_memory", {"user_id": "mcp-user"}))
        assert memory["short_term"] == memory["mid_term"] == []

        refused = await client.call_tool(
            "retrieve_memory", {"user_id": "mcp-user", "query": "cello", "top_k": 0}
        )
        message = error_text(refused)  # the service's own 422, passed on
        assert "422" in message
        assert "top_k" in message


def start(command: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    with log_path.open("wb") as log:
        return subprocess.Popen(
            command, cwd=ROOT, env=environment(), stdout=log, stderr=subprocess.STDOUT
        )


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout_s: float = 30) -> None:
    for _ in range(int(timeout_s * 10)):
        if process.poll() is not None:
            raise AssertionError(f"memoryos mcp exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"memoryos mcp did not listen on {port}")


@pytest.mark.integration
async def test_streamable_http_transport(stack: Stack, tmp_path: Path) -> None:
    port = free_port()
    command = [sys.executable, "-m", "streams.cli", "mcp", "--transport", "http"]
    command += ["--url", url_of(stack), "--mcp-port", str(port)]
    process = await asyncio.to_thread(start, command, tmp_path / "mcp.log")
    try:
        await asyncio.to_thread(wait_for_port, port, process)
        endpoint = f"http://127.0.0.1:{port}/mcp"
        headers = {"Authorization": f"Bearer {API_KEY}"}  # the API's keys guard MCP over HTTP
        http = create_mcp_http_client(headers=headers)
        transport = streamable_http_client(endpoint, http_client=http)
        async with http, Client(transport, read_timeout_seconds=60) as client:
            assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS
            added = structured(
                await client.call_tool(
                    "add_turn", {"user_id": "http-user", "query": "Hi there.", "response": "Hi!"}
                )
            )

            async def stored() -> bool:
                memory = structured(await client.call_tool("get_memory", {"user_id": "http-user"}))
                return [p["turn_id"] for p in memory["short_term"]] == [added["turn_id"]]

            await eventually(stored)
    finally:
        process.terminate()
        await asyncio.to_thread(process.wait, 10)


@pytest.mark.integration
async def test_service_errors_become_tool_errors(stack: Stack) -> None:
    async with Client(build_server(url_of(stack), "wrong-key")) as client:
        denied = await client.call_tool("get_memory", {"user_id": "anyone"})
        assert "401" in error_text(denied)
        assert "bearer" in error_text(denied).lower()

    async with Client(build_server(url_of(stack), API_KEY)) as client:
        empty = await client.call_tool("retrieve_memory", {"user_id": "anyone", "query": ""})
        assert "query" in error_text(empty)
        # the date matcher's hostile input, as long as a query may be: answered, and one
        # character more is refused with the field named
        named = " ".join(f"{month} {year}" for year in range(1900, 2024) for month in MONTHS)
        hostile = named[:MAX_TEXT_CHARS]
        found = await client.call_tool("retrieve_memory", {"user_id": "anyone", "query": hostile})
        assert structured(found)["short_term"] == []
        longer = {"user_id": "anyone", "query": hostile + "x"}
        assert "query" in error_text(await client.call_tool("retrieve_memory", longer))
        for bad in ("../../healthz", "has space", ""):
            refused = await client.call_tool("get_memory", {"user_id": bad})
            assert "user_id must be" in error_text(refused)

    async with Client(build_server(f"http://127.0.0.1:{free_port()}", API_KEY)) as client:
        unreachable = await client.call_tool("get_memory", {"user_id": "anyone"})
        assert "cannot reach the memory service" in error_text(unreachable)


# --- the facts tools ---

FID = "3f2a6c1e-0b7d-5e4f-9a8b-1c2d3e4f5a6b"
UNKNOWN = "00000000-0000-5000-8000-000000000000"


class Recorder:
    """A MockTransport handler: records each request, answers ``status`` with ``body``."""

    def __init__(self, status: int = 202, body: Any = None) -> None:
        self.status = status
        self.body = body if body is not None else {"fact_id": FID}
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return httpx.Response(self.status, json=self.body)


@pytest.mark.parametrize(
    ("tool", "arguments", "method", "path", "body"),
    [
        ("list_facts", {"user_id": "bob"}, "GET", "/v1/users/bob/facts", None),
        ("list_facts", {"user_id": "bob", "kind": "agent_trait", "include_superseded": True,
                        "limit": 2, "cursor": "4"}, "GET",
         "/v1/users/bob/facts?kind=agent_trait&limit=2&cursor=4&include_superseded=true", None),
        ("add_fact", {"user_id": "bob", "text": "I keep bees."}, "POST", "/v1/users/bob/facts",
         {"text": "I keep bees.", "kind": "user_knowledge"}),
        ("add_fact", {"user_id": "bob", "text": "Answers in French.", "kind": "agent_trait",
                      "assistant_id": "tutor", "pinned": True}, "POST", "/v1/users/bob/facts",
         {"text": "Answers in French.", "kind": "agent_trait", "assistant_id": "tutor",
          "pinned": True}),
        ("edit_fact", {"user_id": "bob", "fact_id": FID, "text": "I keep wasps."}, "PATCH",
         f"/v1/users/bob/facts/{FID}", {"text": "I keep wasps."}),
        ("edit_fact", {"user_id": "bob", "fact_id": FID, "pinned": False}, "PATCH",
         f"/v1/users/bob/facts/{FID}", {"pinned": False}),
        ("delete_fact", {"user_id": "bob", "fact_id": FID}, "DELETE",
         f"/v1/users/bob/facts/{FID}", None),
        ("fact_history", {"user_id": "bob", "fact_id": FID}, "GET",
         f"/v1/users/bob/facts/{FID}/history", None),
    ],
)  # fmt: skip
async def test_each_facts_tool_calls_its_route(
    tool: str, arguments: dict[str, Any], method: str, path: str, body: Any
) -> None:
    recorder = Recorder()
    server = build_server("http://memoryos", "the-key", httpx.MockTransport(recorder))
    async with Client(server) as client:
        assert structured(await client.call_tool(tool, arguments)) == {"fact_id": FID}
    [request] = recorder.requests
    assert (request.method, request.url.raw_path.decode()) == (method, path)
    assert (json.loads(request.content) if request.content else None) == body
    assert request.headers["authorization"] == "Bearer the-key"


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("edit_fact", {"user_id": "bob", "fact_id": UNKNOWN, "text": "x"}),
        ("delete_fact", {"user_id": "bob", "fact_id": UNKNOWN}),
        ("fact_history", {"user_id": "bob", "fact_id": UNKNOWN}),
    ],
)
async def test_an_unknown_fact_is_the_services_404(tool: str, arguments: dict[str, Any]) -> None:
    reply = {"error": f"no fact {UNKNOWN} in this user's memory", "field": None}
    server = build_server("http://memoryos", "k", httpx.MockTransport(Recorder(404, reply)))
    async with Client(server) as client:
        message = error_text(await client.call_tool(tool, arguments))
    assert "memory service answered 404" in message
    assert f"no fact {UNKNOWN}" in message


@pytest.mark.parametrize(
    ("tool", "arguments", "named"),
    [
        ("edit_fact", {"user_id": "bob", "fact_id": "../../healthz", "text": "x"}, "fact_id"),
        ("delete_fact", {"user_id": "bob", "fact_id": "not-an-id"}, "fact_id"),
        ("fact_history", {"user_id": "bob", "fact_id": FID.upper()}, "fact_id"),
        ("add_fact", {"user_id": "bob", "text": ""}, "text"),
        ("add_fact", {"user_id": "bob", "text": "x" * 1001}, "text"),
        ("add_fact", {"user_id": "bob", "text": "a", "kind": "persona"}, "kind"),
        ("list_facts", {"user_id": "../x"}, "user_id"),
    ],
)
async def test_a_bad_facts_argument_is_refused_before_any_call(
    tool: str, arguments: dict[str, Any], named: str
) -> None:
    recorder = Recorder()
    server = build_server("http://memoryos", "k", httpx.MockTransport(recorder))
    async with Client(server) as client:
        assert named in error_text(await client.call_tool(tool, arguments))
    assert recorder.requests == []


@pytest_asyncio.fixture(loop_scope="module")
async def facts_app(tmp_path: Path) -> AsyncIterator[FactsApp]:
    made = await tenant_app(tmp_path, tenants=())
    yield FactsApp(made)
    made.journal.close()


async def test_the_facts_tools_against_the_service(facts_app: FactsApp) -> None:
    async with await facts_app.tools("acme", ("read", "write")) as client:
        added = structured(
            await client.call_tool(
                "add_fact", {"user_id": "bob", "text": "I keep bees.", "pinned": True}
            )
        )
        fid = added["fact_id"]
        await facts_app.pipeline.drain()
        listed = structured(await client.call_tool("list_facts", {"user_id": "bob"}))
        assert [(f["fact_id"], f["source"], f["pinned"]) for f in listed["facts"]] == [
            (fid, "api", True)
        ]
        assert listed["next_cursor"] is None
        edit = {"user_id": "bob", "fact_id": fid, "text": "I keep wasps."}
        assert structured(await client.call_tool("edit_fact", edit)) == {"fact_id": fid}
        await facts_app.pipeline.drain()
        history = structured(
            await client.call_tool("fact_history", {"user_id": "bob", "fact_id": fid})
        )
        assert [c["change"] for c in history["changes"]] == ["added", "edited"]
        gone = {"user_id": "bob", "fact_id": fid}
        assert structured(await client.call_tool("delete_fact", gone)) == {"fact_id": fid}
        await facts_app.pipeline.drain()
        assert structured(await client.call_tool("list_facts", {"user_id": "bob"}))["facts"] == []
        assert "404" in error_text(await client.call_tool("delete_fact", gone))
        empty = {"user_id": "bob", "fact_id": fid}
        assert "422" in error_text(await client.call_tool("edit_fact", empty))


async def test_the_facts_tools_keep_the_keys_tenant_and_scopes(facts_app: FactsApp) -> None:
    async with await facts_app.tools("acme", ("read", "write")) as writer:
        fid = structured(
            await writer.call_tool("add_fact", {"user_id": "bob", "text": "I keep bees."})
        )["fact_id"]
    await facts_app.pipeline.drain()
    async with await facts_app.tools("acme", ("read",)) as reader:
        listed = structured(await reader.call_tool("list_facts", {"user_id": "bob"}))
        assert [f["fact_id"] for f in listed["facts"]] == [fid]
        assert structured(
            await reader.call_tool("fact_history", {"user_id": "bob", "fact_id": fid})
        )["changes"]
        for tool, arguments in (
            ("add_fact", {"user_id": "bob", "text": "I keep wasps."}),
            ("edit_fact", {"user_id": "bob", "fact_id": fid, "pinned": True}),
            ("delete_fact", {"user_id": "bob", "fact_id": fid}),
        ):
            assert "403" in error_text(await reader.call_tool(tool, arguments)), tool
    async with await facts_app.tools("zeta", ("read", "write")) as other:
        assert structured(await other.call_tool("list_facts", {"user_id": "bob"}))["facts"] == []
        for tool, arguments in (
            ("edit_fact", {"user_id": "bob", "fact_id": fid, "text": "x"}),
            ("delete_fact", {"user_id": "bob", "fact_id": fid}),
            ("fact_history", {"user_id": "bob", "fact_id": fid}),
        ):
            assert "404" in error_text(await other.call_tool(tool, arguments)), tool
    assert facts_app.pipeline.pending("memoryos.persona") == []


async def test_retrieve_memory_and_respond_send_their_scope() -> None:
    recorder = Recorder(200, {"short_term": []})
    server = build_server("http://memoryos", "the-key", httpx.MockTransport(recorder))
    scope = {"channel": "sms", "before": "2025-06-09T00:00:00Z", "meta": {"order_id": "o1"}}
    async with Client(server) as client:
        await client.call_tool(
            "retrieve_memory",
            {"user_id": "bob", "query": "parcel", "filters": scope, "at": "2025-06-10T09:00:00Z"},
        )
        bad = await client.call_tool(
            "retrieve_memory", {"user_id": "bob", "query": "parcel", "filters": {"colour": 1}}
        )
    sent = json.loads(recorder.requests[0].content)
    assert sent["filters"] == {
        "channel": "sms",
        "before": "2025-06-09T00:00:00Z",
        "meta": {"order_id": "o1"},
    }
    assert sent["at"].startswith("2025-06-10T09:00:00")
    assert "colour" in error_text(bad)
    assert len(recorder.requests) == 1, "a bad filter is refused before any call"
