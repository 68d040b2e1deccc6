"""`memoryos mcp` against a running stack, through the official MCP SDK's client.

stdio: the client spawns `python -m streams.cli mcp --url <stack>` as an agent framework
would; streamable HTTP: `--transport http` as a child process; in-process: the same server
object, for how HTTP failures become tool errors.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import CallToolResult, TextContent

from evaluation.fake_openai import FakeOpenAI
from memory.dates import MONTHS
from schemas.turn import MAX_TEXT_CHARS
from service.mcp import build_server
from streams.broker import free_port
from streams.stack import Stack
from tests.support.paths import ROOT
from tests.support.stacks import eventually, running_stack

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

API_KEY = "mcp-key"
TOOLS = {
    "add_turn",
    "retrieve_memory",
    "respond",
    "get_memory",
    "forget_user",
    "set_user_profile",
    "set_assistant_profile",
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


def structured(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    content: dict[str, Any] | None = result.structured_content
    assert content is not None
    return content


def error_text(result: CallToolResult) -> str:
    assert result.is_error
    return " ".join(block.text for block in result.content if isinstance(block, TextContent))


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
