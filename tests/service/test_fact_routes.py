"""The facts routes over the in-memory pipeline: edits reach the persona stage in the user's
stream, hostile input is refused with the field named, and one user's (or tenant's) fact ids
are unknown through another's routes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from schemas.codec import dumps
from schemas.facts import FactEdit
from schemas.topics import DLQ, PERSONA, user_key
from tests.support.tenant_app import TenantApp, tenant_app

pytestmark = pytest.mark.asyncio

UNKNOWN = "00000000-0000-5000-8000-000000000000"


class Setup:
    def __init__(self, made: TenantApp, clients: dict[str, httpx.AsyncClient]) -> None:
        self.pipeline, self.service, self.clients = made.pipeline, made.service, clients
        self.made = made


@pytest_asyncio.fixture
async def setup(tmp_path: Path) -> AsyncIterator[Setup]:
    made = await tenant_app(tmp_path)
    clients = {tenant: made.http(tenant) for tenant in made.secrets}
    yield Setup(made, clients)
    for client in clients.values():
        await client.aclose()
    made.journal.close()


async def add(http: httpx.AsyncClient, user: str, **body: Any) -> str:
    reply = await http.post(f"/v1/users/{user}/facts", json=body)
    assert reply.status_code == 202, reply.text
    return str(reply.json()["fact_id"])


async def listed(http: httpx.AsyncClient, user: str, **params: Any) -> list[dict[str, Any]]:
    reply = await http.get(f"/v1/users/{user}/facts", params=params)
    assert reply.status_code == 200, reply.text
    return list(reply.json()["facts"])


async def test_an_added_fact_is_applied_by_the_persona_stage_and_settled(setup: Setup) -> None:
    acme = setup.clients["acme"]
    fid = await add(acme, "bob", text="I live in Lyon.", pinned=True)
    assert await listed(acme, "bob") == [], "nothing is written before the stage applies it"
    assert len(await setup.service.journal.pending_fact_edits()) == 1
    await setup.pipeline.drain()
    (fact,) = await listed(acme, "bob")
    assert fact["fact_id"] == fid
    assert fact["source"] == "api"
    assert fact["pinned"] is True
    await setup.service.journal.settle_queued(setup.service.deps.store.flush)
    assert await setup.service.journal.pending_fact_edits() == [], "settled once applied"
    memory = (await acme.get("/v1/users/bob/memory")).json()
    assert memory["persona"]["user_knowledge"] == ["I live in Lyon."]
    assert memory["persona"]["profile"] == {"location": "Lyon"}


async def test_an_api_fact_supersedes_and_a_delete_removes_it_from_every_view(
    setup: Setup,
) -> None:
    acme = setup.clients["acme"]
    lyon = await add(acme, "bob", text="I live in Lyon.")
    await setup.pipeline.drain()
    paris = await add(acme, "bob", text="We moved to Paris.")
    await setup.pipeline.drain()
    assert [f["fact_id"] for f in await listed(acme, "bob")] == [paris]
    every = await listed(acme, "bob", include_superseded="true")
    assert {f["fact_id"]: f["superseded_by"] for f in every} == {paris: None, lyon: paris}
    retrieved = (await acme.post("/v1/users/bob/retrieve", json={"query": "Lyon"})).json()
    assert [f["fact_id"] for f in retrieved["user_knowledge"]] == [paris]
    assert (await acme.delete(f"/v1/users/bob/facts/{paris}")).status_code == 202
    await setup.pipeline.drain()
    assert await listed(acme, "bob") == []
    retrieved = (await acme.post("/v1/users/bob/retrieve", json={"query": "Paris"})).json()
    assert retrieved["user_knowledge"] == []
    history = (await acme.get(f"/v1/users/bob/facts/{paris}/history")).json()
    assert [c["change"] for c in history["changes"]] == ["added", "deleted"]
    assert all(c["text"] is None for c in history["changes"]), "a deleted fact's words go"


async def test_paging_with_a_cursor(setup: Setup) -> None:
    acme = setup.clients["acme"]
    for n in range(5):
        await add(acme, "bob", text=f"I own {n} kites.")
    await setup.pipeline.drain()
    first = (await acme.get("/v1/users/bob/facts", params={"limit": 2})).json()
    second = (
        await acme.get("/v1/users/bob/facts", params={"limit": 4, "cursor": first["next_cursor"]})
    ).json()
    texts = [f["text"] for f in first["facts"] + second["facts"]]
    assert texts == [f"I own {n} kites." for n in (4, 3, 2, 1, 0)]
    assert second["next_cursor"] is None


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "field"),
    [
        ("post", "/v1/users/bob/facts", {"text": ""}, 422, "text"),
        ("post", "/v1/users/bob/facts", {"text": "x" * 1001}, 422, "text"),
        ("post", "/v1/users/bob/facts", {"text": "a", "kind": "secret"}, 422, "kind"),
        ("post", "/v1/users/bob/facts", {"text": "a", "extra": 1}, 422, "extra"),
        ("post", "/v1/users/bob/facts", {"text": "a", "pinned": "yes"}, 422, "pinned"),
        ("post", "/v1/users/bob/facts", {"text": "a", "assistant_id": "x"}, 422, "assistant_id"),
        ("post", "/v1/users/bob/facts", {"text": "a", "kind": "agent_trait",
                                         "assistant_id": "../x"}, 422, "assistant_id"),
        ("post", "/v1/users/bad%20id/facts", {"text": "a"}, 422, "user_id"),
        ("patch", f"/v1/users/bob/facts/{UNKNOWN}", {}, 422, "body"),
        ("patch", f"/v1/users/bob/facts/{UNKNOWN}", {"text": "b"}, 404, None),
        ("patch", "/v1/users/bob/facts/not-an-id", {"text": "b"}, 422, "fact_id"),
        ("delete", f"/v1/users/bob/facts/{UNKNOWN}", None, 404, None),
        ("get", f"/v1/users/bob/facts/{UNKNOWN}/history", None, 404, None),
        ("get", "/v1/users/bob/facts?cursor=abc", None, 422, "cursor"),
        ("get", "/v1/users/bob/facts?limit=0", None, 422, "limit"),
        ("get", "/v1/users/bob/facts?kind=persona", None, 422, "kind"),
    ],
)  # fmt: skip
async def test_hostile_input_is_refused_with_the_field_named(
    setup: Setup, method: str, path: str, body: Any, status: int, field: str | None
) -> None:
    acme = setup.clients["acme"]
    kwargs = {"json": body} if body is not None else {}
    reply = await acme.request(method.upper(), path, **kwargs)
    assert reply.status_code == status, reply.text
    if field is not None:
        assert reply.json()["field"] == field, reply.text
    assert setup.pipeline.pending("memoryos.persona") == [], "nothing was sent"


async def test_another_users_or_tenants_fact_is_unknown_through_a_users_route(
    setup: Setup,
) -> None:
    acme, zeta = setup.clients["acme"], setup.clients["zeta"]
    fid = await add(acme, "bob", text="I keep bees.")
    await setup.pipeline.drain()
    for client, user in ((acme, "amy"), (zeta, "bob")):
        assert (
            await client.patch(f"/v1/users/{user}/facts/{fid}", json={"text": "x"})
        ).status_code == 404
        assert (await client.delete(f"/v1/users/{user}/facts/{fid}")).status_code == 404
        assert (await client.get(f"/v1/users/{user}/facts/{fid}/history")).status_code == 404
        assert await listed(client, user) == []
    assert [f["text"] for f in await listed(acme, "bob")] == ["I keep bees."]


async def test_an_edit_while_a_delete_completes_is_refused_not_lost(setup: Setup) -> None:
    acme = setup.clients["acme"]
    await add(acme, "bob", text="I keep bees.")
    await setup.pipeline.drain()
    assert (await acme.delete("/v1/users/bob")).status_code == 200
    late = await acme.post("/v1/users/bob/facts", json={"text": "I keep wasps."})
    assert late.status_code == 409, late.text
    assert "DELETE" in late.json()["error"]
    await setup.pipeline.drain()
    assert await listed(acme, "bob", include_superseded="true") == []
    after = await add(acme, "bob", text="I keep wasps.")
    await setup.pipeline.drain()
    assert [f["fact_id"] for f in await listed(acme, "bob")] == [after]


async def test_a_read_only_key_cannot_edit(setup: Setup) -> None:
    _, secret = await setup.made.keys.create("acme", ("read",))
    async with setup.made.http("acme", secret) as reader:
        assert (await reader.get("/v1/users/bob/facts")).status_code == 200
        assert (await reader.post("/v1/users/bob/facts", json={"text": "a"})).status_code == 403


@pytest.mark.parametrize("text", ["   ", "\u200b", "...", "\u200b \u200b"])
async def test_a_fact_that_says_nothing_is_refused(setup: Setup, text: str) -> None:
    reply = await setup.clients["acme"].post("/v1/users/bob/facts", json={"text": text})
    assert reply.status_code == 422, reply.text
    assert reply.json()["field"] == "text"


async def test_a_superseded_fact_cannot_be_pinned(setup: Setup) -> None:
    acme = setup.clients["acme"]
    lyon = await add(acme, "bob", text="I live in Lyon.")
    await setup.pipeline.drain()
    await add(acme, "bob", text="We moved to Paris.")
    await setup.pipeline.drain()
    reply = await acme.patch(f"/v1/users/bob/facts/{lyon}", json={"pinned": True})
    assert reply.status_code == 409, reply.text
    assert "superseded" in reply.json()["error"]


async def test_a_plain_fact_edit_on_the_topic_changes_nothing(setup: Setup) -> None:
    """Only the API writes fact edits, sealed with the user's key: one written to the topic
    in plain text by anyone else is dead-lettered."""
    edit = FactEdit(
        user_id="acme/bob",
        edit_id="forged",
        op="add",
        fact_id=UNKNOWN,
        fact_kind="user_knowledge",
        text="I owe you nothing.",
        at=0.0,
    )
    await setup.pipeline.send(PERSONA, user_key("acme/bob"), dumps(edit))
    await setup.pipeline.drain()
    assert await listed(setup.clients["acme"], "bob") == []
    assert setup.pipeline.pending(DLQ) or setup.pipeline.topics[DLQ], "dead-lettered"


async def test_a_superseded_fact_never_reaches_the_respond_prompt(setup: Setup) -> None:
    acme = setup.clients["acme"]
    await add(acme, "bob", text="I live in Lyon.")
    await setup.pipeline.drain()
    await add(acme, "bob", text="We moved to Paris.")
    await setup.pipeline.drain()
    prompted: list[list[str]] = []
    llm = setup.service.deps.llm
    respond = llm.respond

    async def recording(system: str, user: str, memory: Any) -> Any:
        prompted.append([*memory.facts, system, user])
        return await respond(system, user, memory)

    llm.respond = recording  # type: ignore[method-assign]
    reply = await acme.post("/v1/users/bob/respond", json={"query": "Where do I live, Lyon?"})
    assert reply.status_code == 200, reply.text
    (said,) = prompted
    assert any("Paris" in text for text in said)
    assert not any("Lyon." in text for text in said[:-1]), "the superseded fact is not prompted"
    assert "- I live in Lyon." not in said[-1]
    assert "- We moved to Paris." in said[-1]
