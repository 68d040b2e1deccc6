"""The Python client covers every route: each route of the API has its method on both clients
(a route added without one fails here), and the methods the parity asked for work through the
real routes over the in-memory pipeline (history, export and import)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from fastapi.routing import APIRoute

from memoryos_client import AsyncMemoryClient, Forbidden, MemoryClient
from tests.support.tenant_app import TenantApp, tenant_app

pytestmark = pytest.mark.asyncio(loop_scope="module")

METHOD_OF: dict[tuple[str, str], str] = {
    ("POST", "/v1/users/{user_id}/turns"): "add_turn",
    ("POST", "/v1/turns"): "add_turns",
    ("POST", "/v1/messages"): "add_messages",
    ("POST", "/v1/users/{user_id}/retrieve"): "retrieve",
    ("POST", "/v1/users/{user_id}/respond"): "respond",
    ("GET", "/v1/users/{user_id}/memory"): "get_memory",
    ("GET", "/v1/users/{user_id}/history"): "get_history",
    ("PUT", "/v1/users/{user_id}/profile"): "set_user_profile",
    ("PUT", "/v1/assistants/{assistant_id}/profile"): "set_assistant_profile",
    ("GET", "/v1/assistants/{assistant_id}/profile"): "get_assistant_profile",
    ("DELETE", "/v1/users/{user_id}"): "forget_user",
    ("GET", "/v1/users/{user_id}/facts"): "list_facts",
    ("POST", "/v1/users/{user_id}/facts"): "add_fact",
    ("PATCH", "/v1/users/{user_id}/facts/{fact_id}"): "edit_fact",
    ("DELETE", "/v1/users/{user_id}/facts/{fact_id}"): "delete_fact",
    ("GET", "/v1/users/{user_id}/facts/{fact_id}/history"): "fact_history",
    ("GET", "/v1/users"): "list_users",
    ("GET", "/v1/whoami"): "whoami",
    ("POST", "/v1/keys"): "create_key",
    ("GET", "/v1/keys"): "list_keys",
    ("DELETE", "/v1/keys/{key_id}"): "revoke_key",
    ("GET", "/v1/export"): "export_memory",
    ("POST", "/v1/import"): "import_memory",
    ("GET", "/healthz"): "health",
    ("GET", "/readyz"): "ready",
    ("GET", "/metrics"): "metrics",
}
DOCS = {"/docs", "/docs/oauth2-redirect", "/redoc"}


@pytest_asyncio.fixture(loop_scope="module")
async def app(tmp_path: Path) -> AsyncIterator[TenantApp]:
    made = await tenant_app(tmp_path, tenants=("acme",), scopes=("read", "write", "admin"))
    yield made
    made.journal.close()


async def test_every_route_has_a_method_on_both_clients(app: TenantApp) -> None:
    routes = {
        (method, route.path)
        for route in app.app.routes
        if isinstance(route, APIRoute) and route.path not in DOCS
        for method in route.methods
    }
    assert routes == set(METHOD_OF), "a route without a client method, or one that is gone"
    for client in (MemoryClient, AsyncMemoryClient):
        missing = [name for name in METHOD_OF.values() if not hasattr(client, name)]
        assert not missing, f"{client.__name__} lacks {missing}"


async def test_history_export_and_import_through_the_routes(app: TenantApp) -> None:
    transport = httpx.ASGITransport(app=app.app)
    async with AsyncMemoryClient("http://memoryos", app.secrets["acme"], transport=transport) as m:
        await m.add_turn("bob", "I ordered boots in size 39.", "Noted.")
        await app.pipeline.drain()
        history = await m.get_history("bob", limit=5)
        assert [turn.place for turn in history.turns] == ["stm"]
        lines = await m.export_memory("bob")
        assert lines[0].startswith('{"format":"memoryos-export/')
        assert len(lines) > 1
        with pytest.raises(Forbidden, match="operator"):
            await m.import_memory(lines)  # the operator's route: a tenant's key is refused
