"""Tenants on the embedded stack: two tenants with the same user id never see each other's
memory, keys act only within their scopes, a revoked key is refused at once.

One stack for the module (a real broker, the Edge store, the HTTP server); the tenants' keys
are made through the running service with the operator's key, as `memoryos keys` does.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import redirect_stdout
from io import StringIO
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import CallToolResult

from adapters.settings import Settings
from memoryos_client import AsyncMemoryClient, Forbidden, Unauthorized
from service.mcp import http_app
from streams.broker import free_port
from streams.cli import main
from streams.stack import Stack
from tests.support.stacks import eventually, running_stack

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

OPERATOR = "operator-key"
SAID = {"acme": "I keep bees on the roof of the acme depot.", "zeta": "My zeta cat is named Miso."}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    data_dir = tmp_path_factory.mktemp("tenants")
    async with running_stack(data_dir, api_keys=OPERATOR) as running:
        yield running


def client(stack: Stack, key: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{stack.port}",
        headers={"Authorization": f"Bearer {key}"},
        timeout=60,
    )


async def new_key(stack: Stack, tenant: str, scopes: list[str], by: str = OPERATOR) -> str:
    async with client(stack, by) as http:
        reply = await http.post("/v1/keys", json={"tenant": tenant, "scopes": scopes})
    assert reply.status_code == 201, reply.text
    body = reply.json()
    assert body["tenant"] == tenant
    assert body["key"].startswith("mos_")
    return str(body["key"])


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def tenants(stack: Stack) -> dict[str, str]:
    """A read-write-forget key of each tenant, and each tenant's bob with one fact said."""
    keys = {t: await new_key(stack, t, ["read", "write", "forget"]) for t in SAID}
    for tenant, text in SAID.items():
        async with client(stack, keys[tenant]) as http:
            reply = await http.post("/v1/users/bob/turns", json={"query": text, "response": "Ok."})
            assert reply.status_code == 202, reply.text
    for tenant, text in SAID.items():
        await eventually(lambda t=tenant, x=text: _holds(stack, keys[t], x))
    return keys


async def _holds(stack: Stack, key: str, text: str) -> bool:
    async with client(stack, key) as http:
        memory = (await http.get("/v1/users/bob/memory")).json()
    return any(page["query"] == text for page in memory["short_term"])


def _texts(document: Any) -> str:
    return json.dumps(document)


async def test_the_same_user_id_in_two_tenants_is_two_users(
    stack: Stack, tenants: dict[str, str]
) -> None:
    for tenant, other in (("acme", "zeta"), ("zeta", "acme")):
        async with client(stack, tenants[tenant]) as http:
            memory = (await http.get("/v1/users/bob/memory")).json()
            retrieved = (
                await http.post("/v1/users/bob/retrieve", json={"query": "bees cat Miso roof"})
            ).json()
            history = (await http.get("/v1/users/bob/history")).json()
        for document in (memory, retrieved, history):
            assert SAID[other] not in _texts(document)
            assert "/" not in str(document.get("user_id", "")), "the caller's id, not ours"
        assert SAID[tenant] in _texts(memory)
        assert SAID[tenant] in _texts(retrieved)
        assert memory["user_id"] == "bob"
    async with client(stack, OPERATOR) as http:  # the default tenant's bob is a third user
        memory = (await http.get("/v1/users/bob/memory")).json()
    assert not any(text in _texts(memory) for text in SAID.values())


async def test_a_tenant_cannot_name_another_tenants_user(
    stack: Stack, tenants: dict[str, str]
) -> None:
    async with client(stack, tenants["acme"]) as http:
        batch = await http.post(
            "/v1/turns", json=[{"user_id": "zeta/bob", "query": "x", "response": "y"}]
        )
        message = await http.post(
            "/v1/messages", json={"user_id": "zeta/bob", "role": "customer", "text": "hi"}
        )
        path = await http.get("/v1/users/zeta%2Fbob/memory")
    assert batch.status_code == 202
    assert batch.json()["accepted"] == 0
    assert "user_id" in batch.json()["results"][0]["error"]
    assert message.status_code == 422
    assert path.status_code in (404, 422)


async def test_profiles_and_assistants_are_per_tenant(
    stack: Stack, tenants: dict[str, str]
) -> None:
    admin = {t: await new_key(stack, t, ["read", "admin"]) for t in SAID}
    for tenant in SAID:
        async with client(stack, admin[tenant]) as http:
            reply = await http.put("/v1/assistants/bot/profile", json={"name": f"{tenant}-bot"})
            assert reply.status_code == 200, reply.text
    for tenant in SAID:
        async with client(stack, admin[tenant]) as http:
            profile = (await http.get("/v1/assistants/bot/profile")).json()
        assert profile == {"assistant_id": "bot", "profile": {"name": f"{tenant}-bot"}}
    async with client(stack, tenants["acme"]) as http:
        await http.put("/v1/users/bob/profile", json={"plan": "gold"})
    async with client(stack, tenants["zeta"]) as http:
        memory = (await http.get("/v1/users/bob/memory")).json()
    assert "gold" not in _texts(memory)


async def test_keys_act_only_within_their_scopes(stack: Stack, tenants: dict[str, str]) -> None:
    reader = await new_key(stack, "acme", ["read"])
    async with client(stack, reader) as http:
        assert (await http.get("/v1/users/bob/memory")).status_code == 200
        write = await http.post("/v1/users/bob/turns", json={"query": "q", "response": "r"})
        forget = await http.delete("/v1/users/bob")
        keys = await http.get("/v1/keys")
        whoami = (await http.get("/v1/whoami")).json()
    assert write.status_code == forget.status_code == keys.status_code == 403
    assert "forget" in forget.json()["error"]
    assert whoami == {"tenant": "acme", "scopes": ["read"], "key_id": whoami["key_id"]}
    admin = await new_key(stack, "acme", ["admin"])
    async with client(stack, admin) as http:
        other = await http.post("/v1/keys", json={"tenant": "zeta", "scopes": ["read"]})
        own = await http.post("/v1/keys", json={"scopes": ["read"]})
        listed = (await http.get("/v1/keys")).json()["keys"]
    assert other.status_code == 403
    assert own.status_code == 201
    assert own.json()["tenant"] == "acme"
    assert {key["tenant"] for key in listed} == {"acme"}
    assert all("digest" not in key and "key" not in key for key in listed)


async def test_a_revoked_key_is_refused_at_once(stack: Stack, tenants: dict[str, str]) -> None:
    key = await new_key(stack, "acme", ["read"])
    key_id = key[4:20]
    async with client(stack, key) as http:
        assert (await http.get("/v1/users/bob/memory")).status_code == 200
    async with client(stack, OPERATOR) as http:
        revoked = await http.delete(f"/v1/keys/{key_id}")
    assert revoked.status_code == 200
    assert revoked.json()["revoked_at"]
    async with client(stack, key) as http:
        assert (await http.get("/v1/users/bob/memory")).status_code == 401
    forged = key[:-4] + ("AAAA" if not key.endswith("AAAA") else "BBBB")
    async with client(stack, forged) as http:
        assert (await http.get("/v1/users/bob/memory")).status_code == 401


async def test_forgetting_a_user_leaves_the_other_tenants_user(
    stack: Stack, tenants: dict[str, str]
) -> None:
    async with client(stack, tenants["zeta"]) as http:
        assert (await http.delete("/v1/users/bob")).status_code == 200
        gone = (await http.get("/v1/users/bob/memory")).json()
    assert SAID["zeta"] not in _texts(gone)
    async with client(stack, tenants["acme"]) as http:
        kept = (await http.get("/v1/users/bob/memory")).json()
    assert SAID["acme"] in _texts(kept)


async def test_a_key_made_offline_opens_the_stack(tmp_path: Path) -> None:
    argv = ["keys", "create", "--tenant", "acme", "--scopes", "read", "--data-dir", str(tmp_path)]
    out = StringIO()
    with redirect_stdout(out):
        assert await asyncio.to_thread(main, argv) == 0
    key = out.getvalue().strip().splitlines()[-1]
    async with running_stack(tmp_path) as running:
        async with client(running, key) as http:
            assert (await http.get("/v1/users/bob/memory")).status_code == 200
        anonymous = httpx.AsyncClient(base_url=f"http://127.0.0.1:{running.port}")
        async with anonymous as http:  # a tenant key exists: the API is no longer open
            assert (await http.get("/v1/users/bob/memory")).status_code == 401


async def test_a_key_over_its_rate_gets_429_while_another_key_is_served(
    stack: Stack, tenants: dict[str, str]
) -> None:
    async with client(stack, OPERATOR) as http:
        made = await http.post(
            "/v1/keys", json={"tenant": "acme", "scopes": ["read"], "rate_limit": "0.2/2"}
        )
    assert made.json()["rate_limit"] == "0.2/2"
    limited = made.json()["key"]
    async with client(stack, limited) as http:
        replies = [await http.get("/v1/users/bob/memory") for _ in range(3)]
    assert [reply.status_code for reply in replies] == [200, 200, 429]
    assert int(replies[2].headers["Retry-After"]) >= 1
    assert "rate limit" in replies[2].json()["error"]
    async with client(stack, tenants["acme"]) as http:  # the same tenant, another key
        assert (await http.get("/v1/users/bob/memory")).status_code == 200
    async with client(stack, OPERATOR) as http:
        scraped = (await http.get("/metrics")).text
    assert 'memoryos_rate_limited_total{tenant="acme"} 1.0' in scraped


async def test_an_admin_lists_its_tenants_users_page_by_page(
    stack: Stack, tenants: dict[str, str]
) -> None:
    async with client(stack, tenants["acme"]) as http:
        reply = await http.post("/v1/users/amy/turns", json={"query": "Hi", "response": "Hello"})
        assert reply.status_code == 202
    admin = {t: await new_key(stack, t, ["admin"]) for t in SAID}

    async def listed(tenant: str, **params: Any) -> dict[str, Any]:
        async with client(stack, admin[tenant]) as http:
            reply = await http.get("/v1/users", params=params)
        assert reply.status_code == 200, reply.text
        return dict(reply.json())

    await eventually(lambda: _has_users(listed, ["amy", "bob"]))
    first = await listed("acme", limit=1)
    assert first == {"users": ["amy"], "next_cursor": "amy"}
    assert await listed("acme", limit=1, cursor="amy") == {"users": ["bob"], "next_cursor": None}
    assert "amy" not in (await listed("zeta"))["users"]
    async with client(stack, tenants["acme"]) as http:  # no admin scope
        assert (await http.get("/v1/users")).status_code == 403


async def _has_users(listed: Any, users: list[str]) -> bool:
    return bool((await listed("acme"))["users"] == users)


async def test_the_client_manages_keys_and_lists_users(
    stack: Stack, tenants: dict[str, str]
) -> None:
    url = f"http://127.0.0.1:{stack.port}"
    async with AsyncMemoryClient(url, api_key=OPERATOR) as operator:
        made = await operator.create_key(["read", "admin"], tenant="acme", name="dash")
        assert made.key.startswith("mos_")
        assert made.key_id in {key.key_id for key in await operator.list_keys("acme")}
    async with AsyncMemoryClient(url, api_key=made.key) as dashboard:
        assert (await dashboard.whoami()).tenant == "acme"
        assert "bob" in (await dashboard.list_users()).users
        with pytest.raises(Forbidden):
            await dashboard.forget_user("bob")
    async with AsyncMemoryClient(url, api_key=OPERATOR) as operator:
        assert (await operator.revoke_key(made.key_id)).revoked_at is not None
    async with AsyncMemoryClient(url, api_key=made.key) as dashboard:
        with pytest.raises(Unauthorized):
            await dashboard.whoami()


async def test_mcp_over_http_acts_in_the_callers_tenant_within_its_scopes(
    stack: Stack, tenants: dict[str, str]
) -> None:
    """The MCP server passes each caller's key on: acme's key reads acme's bob only, a read
    key's add_turn is refused by the service, a revoked key is refused at the door."""
    settings = Settings(api_keys=OPERATOR)
    app = http_app(f"http://127.0.0.1:{stack.port}", settings)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        assert not task.done(), "uvicorn stopped before it started"
        await asyncio.sleep(0.02)
    reader = await new_key(stack, "acme", ["read"])
    try:
        memory = await _mcp(port, tenants["acme"], "get_memory", {"user_id": "bob"})
        assert SAID["acme"] in json.dumps(memory.structured_content)
        assert SAID["zeta"] not in json.dumps(memory.structured_content)
        refused = await _mcp(
            port, reader, "add_turn", {"user_id": "bob", "query": "q", "response": "r"}
        )
        assert refused.is_error
        assert "403" in str(refused.content)
        async with client(stack, OPERATOR) as http:
            await http.delete(f"/v1/keys/{reader[4:20]}")
        async with httpx.AsyncClient() as http:
            door = await http.post(
                f"http://127.0.0.1:{port}/mcp",
                json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                headers={"Authorization": f"Bearer {reader}", "Accept": "application/json"},
            )
        assert door.status_code == 401
    finally:
        server.should_exit = True
        await task


async def _mcp(port: int, key: str, tool: str, arguments: dict[str, Any]) -> CallToolResult:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    transport = streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)
    async with http, Client(transport, read_timeout_seconds=60) as session:
        return await session.call_tool(tool, arguments)
