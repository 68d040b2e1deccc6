"""MCP tools as the tests call them: a tool's structured result or its error's text, and the
real HTTP app over the in-memory pipeline as MCP tools, under a key of a tenant."""

from __future__ import annotations

from typing import Any

import httpx
from mcp import Client
from mcp.types import CallToolResult, TextContent

from schemas.tenants import Scope
from service.mcp import build_server
from tests.support.tenant_app import TenantApp


def structured(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    content: dict[str, Any] | None = result.structured_content
    assert content is not None
    return content


def error_text(result: CallToolResult) -> str:
    assert result.is_error
    return " ".join(block.text for block in result.content if isinstance(block, TextContent))


class FactsApp:
    """The real HTTP app over the in-memory pipeline (``tenant_app``), as MCP tools."""

    def __init__(self, made: TenantApp) -> None:
        self.pipeline, self.app, self.keys = made.pipeline, made.app, made.keys

    async def tools(self, tenant: str, scopes: tuple[Scope, ...]) -> Client:
        _, secret = await self.keys.create(tenant, scopes)
        return Client(build_server("http://memoryos", secret, httpx.ASGITransport(self.app)))
