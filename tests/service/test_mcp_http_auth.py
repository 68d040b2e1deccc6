"""`memoryos mcp --transport http` asks for the API's bearer keys and binds to loopback.

The server runs in-process under uvicorn on a free loopback port; no memory service is needed,
because the guard answers before any tool runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
import uvicorn

from adapters.settings import Settings
from schemas.errors import ConfigError
from service.mcp import http_app
from streams.broker import free_port

KEY = "mcp-http-key"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream"}


@pytest.fixture
async def mcp_url() -> AsyncIterator[str]:
    port = free_port()
    settings = Settings(api_keys=f"{KEY},other-key")
    app = http_app("http://127.0.0.1:1", settings)
    server = uvicorn.Server(
        uvicorn.Config(app, host=settings.mcp_host, port=port, log_level="warning")
    )
    task = asyncio.create_task(server.serve())
    while not server.started:
        assert not task.done(), "uvicorn stopped before it started"
        await asyncio.sleep(0.02)
    yield f"http://127.0.0.1:{port}/mcp"
    server.should_exit = True
    await task


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {KEY}"}]
)
async def test_no_or_wrong_key_is_401(mcp_url: str, headers: dict[str, str]) -> None:
    async with httpx.AsyncClient() as client:
        reply = await client.post(mcp_url, json=INITIALIZE, headers=ACCEPT | headers)
    assert reply.status_code == 401
    assert reply.headers["WWW-Authenticate"] == "Bearer"
    assert "bearer" in reply.json()["error"]


async def test_the_right_key_reaches_the_mcp_server(mcp_url: str) -> None:
    headers = ACCEPT | {"Authorization": f"Bearer {KEY}"}
    async with httpx.AsyncClient() as client:
        reply = await client.post(mcp_url, json=INITIALIZE, headers=headers)
    assert reply.status_code == 200, reply.text
    assert '"serverInfo"' in reply.text
    assert '"memoryos"' in reply.text


def test_it_binds_to_loopback_by_default() -> None:
    assert Settings().mcp_host == "127.0.0.1"


def test_beyond_loopback_it_refuses_to_start_without_keys() -> None:
    with pytest.raises(ConfigError, match="MEMORYOS_MCP_HOST"):
        http_app("http://127.0.0.1:1", Settings(mcp_host="0.0.0.0", api_keys=""))
    http_app("http://127.0.0.1:1", Settings(mcp_host="0.0.0.0", api_keys=KEY))
