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

from memoryos_client import AsyncMemoryClient, Forbidden, MemoryClient, UnexpectedReply
from tests.support.api_routes import DOCS, PYTHON
from tests.support.tenant_app import TenantApp, tenant_app

ASYNC = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module")
async def app(tmp_path: Path) -> AsyncIterator[TenantApp]:
    made = await tenant_app(tmp_path, tenants=("acme",), scopes=("read", "write", "admin"))
    yield made
    made.journal.close()


@ASYNC
async def test_every_route_has_a_method_on_both_clients(app: TenantApp) -> None:
    routes = {
        (method, route.path)
        for route in app.app.routes
        if isinstance(route, APIRoute) and route.include_in_schema and route.path not in DOCS
        for method in route.methods
    }
    assert routes == set(PYTHON), "a route without a client method, or one that is gone"
    for client in (MemoryClient, AsyncMemoryClient):
        missing = [name for name in PYTHON.values() if not hasattr(client, name)]
        assert not missing, f"{client.__name__} lacks {missing}"


@ASYNC
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


@ASYNC
async def test_a_replay_names_the_callers_user_and_needs_admin(app: TenantApp) -> None:
    transport = httpx.ASGITransport(app=app.app)
    async with AsyncMemoryClient("http://memoryos", app.secrets["acme"], transport=transport) as m:
        letter = {"topic": "memoryos.turns", "partition": 0, "offset": 3}
        done = await m.replay_dead_letters("bob", [letter])
        assert (done.replayed, done.missing) == (1, 0)
        await m.replay_dead_letters("bob")
    assert app.replays.asked == [
        ("acme/bob", {("memoryos.turns", 0, 3)}),
        ("acme/bob", None),
    ], "only the tenant's own user's letters are looked for"
    reader = (await app.keys.create("acme", ("read",)))[1]
    async with AsyncMemoryClient("http://memoryos", reader, transport=transport) as m:
        with pytest.raises(Forbidden, match="admin"):
            await m.replay_dead_letters("bob")
    assert len(app.replays.asked) == 2


class Recorder:
    def __init__(self, reply: object) -> None:
        self.reply = reply
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return httpx.Response(200, json=self.reply)


@pytest.mark.parametrize(
    ("call", "reply", "method", "url"),
    [
        (lambda m: m.get_history("b b", limit=7),
         {"user_id": "b b", "turns": [], "dead_letters": []},
         "GET", "/v1/users/b%20b/history?limit=7"),
        (lambda m: m.list_users(cursor="", limit=5), {"users": [], "next_cursor": None},
         "GET", None),
        (lambda m: m.whoami(), {"tenant": "acme", "scopes": ["read"], "key_id": None},
         "GET", "/v1/whoami"),
        (lambda m: m.get_assistant_profile("bot"), {"assistant_id": "bot", "profile": {}},
         "GET", "/v1/assistants/bot/profile"),
    ],
)  # fmt: skip
def test_each_new_method_calls_its_route(
    call: object, reply: object, method: str, url: str | None
) -> None:
    recorder = Recorder(reply)
    with MemoryClient("http://memoryos", transport=httpx.MockTransport(recorder)) as memory:
        if url is None:
            with pytest.raises(ValueError, match="cannot be ''"):
                call(memory)  # type: ignore[operator]
            assert recorder.requests == []
            return
        call(memory)  # type: ignore[operator]
    (request,) = recorder.requests
    assert (request.method, str(request.url).removeprefix("http://memoryos")) == (method, url)


@pytest.mark.parametrize("bad", ["", ".", ".."])
def test_an_id_that_a_url_would_resolve_away_is_refused_before_any_call(bad: str) -> None:
    """`delete_fact(user, "..")` would otherwise reach DELETE /v1/users/{user}: a forget."""
    recorder = Recorder({})
    with MemoryClient("http://memoryos", transport=httpx.MockTransport(recorder)) as memory:
        for call in (
            lambda: memory.delete_fact("alice", bad),
            lambda: memory.edit_fact("alice", bad, text="x"),
            lambda: memory.fact_history("alice", bad),
            lambda: memory.forget_user(bad),
            lambda: memory.revoke_key(bad),
        ):
            with pytest.raises(ValueError, match="an id cannot be"):
                call()
    assert recorder.requests == []


@ASYNC
async def test_the_service_never_redirects_a_path_with_a_trailing_slash(app: TenantApp) -> None:
    """A client that follows redirects (fetch keeps DELETE) must not reach another route."""
    async with app.http("acme") as http:
        reply = await http.delete("/v1/users/bob/")
    assert reply.status_code == 404
    assert "location" not in reply.headers


def test_a_reply_that_is_not_the_apis_is_an_api_error() -> None:
    def html(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="<html>a proxy's page</html>")

    transport = httpx.MockTransport(html)
    with (
        MemoryClient("http://memoryos", transport=transport) as memory,
        pytest.raises(UnexpectedReply, match="unexpected reply"),
    ):
        memory.whoami()
