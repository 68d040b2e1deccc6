"""What `POST /v1/import` refuses, and what a tenant's admin may not do with keys: each case
is an attack that worked before it was refused (a forged key record, another tenant's page or
the store's own documents overwritten by id, lines that broke the store), over the HTTP app
with tenant keys and the in-memory pipeline."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
import pytest
import pytest_asyncio

from adapters import export
from adapters.api_keys import ApiKeys
from adapters.export import FORMAT
from adapters.metrics import Metrics
from adapters.repository import SYSTEM
from adapters.settings import Settings
from memory import ids
from schemas.errors import NotFound
from schemas.tenants import Limit, parse_limit
from service.http import create_http_app
from service.response import ResponseService
from tests.support.fakes import BagEmbedder, Pipeline, make_deps


async def _ready() -> dict[str, Any]:
    return {"ready": True}


@dataclass
class World:
    pipeline: Pipeline
    keys: ApiKeys
    transport: httpx.ASGITransport
    admin: dict[str, str]  # each tenant's admin key

    async def call(self, key: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(
            transport=self.transport, base_url="http://m", headers=headers
        ) as client:
            return await client.request(method, path, **kwargs)

    async def load(self, content: bytes, key: str = "op") -> httpx.Response:
        """An import, by the operator's key unless another is given."""
        return await self.call(key, "POST", "/v1/import", content=content)


@pytest_asyncio.fixture
async def world() -> AsyncIterator[World]:
    deps = await make_deps()
    pipeline = Pipeline(deps)
    keys = ApiKeys(deps.repo)
    settings = Settings(api_keys="op", rate_limit="50/50", embedding_dim=BagEmbedder.dim)
    app = create_http_app(
        ResponseService(deps, pipeline), settings, Metrics(), _ready, _ready, tenant_keys=keys
    )
    admin = {t: (await keys.create(t, ("read", "write", "admin")))[1] for t in ("acme", "zeta")}
    world = World(pipeline, keys, httpx.ASGITransport(app=app), admin)
    said = {"query": "zeta secret 4417", "response": "k"}
    await world.call(admin["zeta"], "POST", "/v1/users/bob/turns", json=said)
    await pipeline.drain()
    yield world


def body(tenant: str, *lines: dict[str, Any]) -> bytes:
    head = {"format": FORMAT, "tenant": tenant, "embedder": None, "dim": BagEmbedder.dim}
    return b"\n".join(orjson.dumps(line) for line in (head, *lines))


def doc(owner: str, kind: str, point_id: str, data: Any) -> dict[str, Any]:
    payload = {"user_id": owner, "kind": kind, "data": orjson.dumps(data).decode()}
    return {"collection": "personas", "id": point_id, "vector": [], "payload": payload}


async def test_only_the_operator_imports(world: World) -> None:
    own = doc("acme/x", "profile", ids.point_id("acme/x", "doc", "profile"), {"plan": "gold"})
    refused = await world.load(body("acme", own), key=world.admin["acme"])
    assert refused.status_code == 403
    assert "operator" in refused.json()["error"]
    assert (await world.load(body("acme", own))).status_code == 200


async def test_an_import_cannot_forge_an_api_key_record(world: World) -> None:
    record = {"key_id": "aaaaaaaaaaaaaaaa", "tenant": "zeta", "scopes": ["admin"], "digest": "0"}
    forged = ids.point_id("~keys", "doc", "api_key:aaaaaaaaaaaaaaaa")
    for tenant, owner in (("acme", "acme/x"), ("acme", "~keys"), ("default", "~keys")):
        reply = await world.load(body(tenant, doc(owner, "api_key:x", forged, record)))
        assert reply.status_code == 422, reply.text
    with pytest.raises(NotFound):
        await world.keys.get("aaaaaaaaaaaaaaaa")


async def test_an_import_cannot_overwrite_another_tenants_points_or_the_stores_own(
    world: World,
) -> None:
    zeta_page = ids.page_id("zeta/bob", "t1")
    page = {
        "collection": "pages",
        "id": zeta_page,
        "vector": [0.1] * BagEmbedder.dim,
        "payload": {"user_id": "acme/x", "page_id": zeta_page, "turn_id": "t1", "query": "PWNED"},
    }
    embedder = doc(SYSTEM, "embedder", ids.point_id(SYSTEM, "doc", "embedder"), {"name": "evil"})
    profile = doc("acme/x", "profile", ids.point_id("zeta/bob", "doc", "profile"), {"n": "PWNED"})
    for line in (page, embedder, profile):
        reply = await world.load(body("acme", line))
        assert reply.status_code == 422, reply.text
    memory = (await world.call(world.admin["zeta"], "GET", "/v1/users/bob/memory")).text
    assert "zeta secret 4417" in memory
    assert "PWNED" not in memory
    assert await world.pipeline.deps.repo.stored_embedder() != "evil"


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"id": "not-a-uuid"}, "UUID"),
        ({"vector": [[1.0]] * BagEmbedder.dim}, "finite numbers"),
        ({"vector": ["x"] * BagEmbedder.dim}, "finite numbers"),
    ],
)
async def test_lines_that_would_break_the_store_are_refused(
    world: World, change: dict[str, Any], why: str
) -> None:
    page = page_line("acme/x", "t9")
    reply = await world.load(body("acme", page | change))
    assert reply.status_code == 422
    assert why in reply.json()["error"]
    broken = doc("acme/x", "profile", ids.point_id("acme/x", "doc", "profile"), {})
    broken["payload"]["data"] = "{not json"
    reply = await world.load(body("acme", broken))
    assert reply.status_code == 422
    data_key = doc("acme/x", "data_key:0", ids.point_id("acme/x", "doc", "data_key:0"), {})
    assert (await world.load(body("acme", data_key))).status_code == 422


async def test_a_tenants_admin_cannot_raise_its_keys_rate_nor_make_keys_without_end(
    world: World,
) -> None:
    acme = world.admin["acme"]
    over = {"scopes": ["read"], "rate_limit": "100000"}
    assert (await world.call(acme, "POST", "/v1/keys", json=over)).status_code == 403
    under = {"scopes": ["read"], "rate_limit": "5/5"}
    assert (await world.call(acme, "POST", "/v1/keys", json=under)).status_code == 201
    more = {"tenant": "acme", "scopes": ["read"], "rate_limit": "500"}
    made = await world.call("op", "POST", "/v1/keys", json=more)
    assert made.status_code == 201, "the operator may set any rate"
    for _ in range(100 - 3):
        await world.keys.create("acme", ("read",))
    refused = await world.call(acme, "POST", "/v1/keys", json={"scopes": ["read"]})
    assert refused.status_code == 422
    assert "live keys" in refused.json()["error"]


@pytest.mark.parametrize("text", ["100000", "0.001", "2.5/7", "1"])
def test_a_limit_reads_back_what_it_writes(text: str) -> None:
    limit = parse_limit(text)
    assert isinstance(limit, Limit)
    assert parse_limit(limit.text()) == limit


@pytest.mark.parametrize("text", ["1000000", "0.00001", "9" * 400, "5/0", "5/1000001"])
def test_limits_out_of_range_are_refused_with_the_range(text: str) -> None:
    with pytest.raises(ValueError, match="rate limit"):
        parse_limit(text)


def page_line(owner: str, turn: str, **changes: Any) -> dict[str, Any]:
    page_id = ids.page_id(owner, turn)
    payload = {
        "page_id": page_id,
        "user_id": owner,
        "turn_id": turn,
        "query": "q",
        "response": "r",
        "timestamp": "2024-03-01T09:00:00Z",
        "chain": {"chain_id": "c"},
        "tier": "stm",
        "segment_id": None,
    } | changes
    return {"collection": "pages", "id": page_id, "vector": [0.1] * BagEmbedder.dim,
            "payload": payload}  # fmt: skip


async def test_an_imported_page_or_heat_document_cannot_name_another_owners_points(
    world: World,
) -> None:
    zeta_page = ids.page_id("zeta/bob", "t1")
    taking = page_line("acme/x", "t1", page_id=zeta_page)  # the right point id, a foreign page
    assert (await world.load(body("acme", taking))).status_code == 422
    zeta_segment = ids.segment_id("zeta/bob", zeta_page)
    stats = {"segment_id": zeta_segment, "last_access": 0.0, "created_at": 0.0,
             "page_ids": [zeta_page]}  # fmt: skip
    heat = doc("acme/y", "heat", ids.point_id("acme/y", "doc", "heat"),
               {"segments": {zeta_segment: stats}})  # fmt: skip
    refused = await world.load(body("acme", heat))
    assert refused.status_code == 422
    assert "not theirs" in refused.json()["error"]
    memory = (await world.call(world.admin["zeta"], "GET", "/v1/users/bob/memory")).text
    assert "zeta secret 4417" in memory


async def test_a_page_the_stages_could_not_read_is_refused(world: World) -> None:
    leaving = page_line("acme/x", "t1", tier="leaving")
    del leaving["payload"]["chain"]
    assert (await world.load(body("acme", leaving))).status_code == 422
    bad_seq = page_line("acme/x", "t2", seq="many")
    assert (await world.load(body("acme", bad_seq))).status_code == 422
    assert (await world.load(body("acme", page_line("acme/x", "t3", tier="x")))).status_code == 422
    assert (await world.load(body("acme", page_line("acme/x", "t4")))).status_code == 200


def test_an_imported_page_gets_the_indexed_time_of_its_own_timestamp() -> None:
    """A line's ``ts`` (forged, or absent in an older export) is never what a time filter
    reads: the page's own timestamp is."""
    page = {
        "page_id": ids.page_id("acme/bob", "t1"), "user_id": "acme/bob", "turn_id": "t1",
        "query": "q", "response": "r", "timestamp": "2025-06-02T00:00:00Z",
        "chain": {"chain_id": "c"}, "tier": "stm", "segment_id": None,
    }  # fmt: skip
    for forged in ({}, {"ts": 4_102_444_800.0}, {"ts": "not-a-number"}):
        line = {"collection": "pages", "id": page["page_id"], "payload": page | forged,
                "vector": [0.1] * BagEmbedder.dim}  # fmt: skip
        _, point = export._point(line, "acme", BagEmbedder.dim, 1)
        assert point.payload["ts"] == 1_748_822_400.0
