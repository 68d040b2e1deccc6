"""No cross-tenant read, whatever the interleaving: hypothesis drives two tenants' writes,
deletes, profile writes and reads (memory, retrieve, history, respond, export) through the HTTP
app with tenant keys, over the in-memory pipeline, and every reply of one tenant is searched for
the other tenant's words.

Both tenants use the same user ids, so a leak would be the same id resolving to the other
tenant's user.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.api_keys import ApiKeys
from adapters.metrics import Metrics
from adapters.settings import Settings
from service.http import create_http_app
from service.response import ResponseService
from tests.support.fakes import Pipeline, make_deps

TENANTS = ("acme", "zeta")
USERS = ("bob", "amy")
READS = ("memory", "retrieve", "history", "respond", "export")

operation = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(TENANTS), st.sampled_from(USERS)),
    st.tuples(st.just("profile"), st.sampled_from(TENANTS), st.sampled_from(USERS)),
    st.tuples(st.just("delete"), st.sampled_from(TENANTS), st.sampled_from(USERS)),
    st.tuples(st.just("drain"), st.just(""), st.just("")),
    st.tuples(st.sampled_from(READS), st.sampled_from(TENANTS), st.sampled_from(USERS)),
)


async def _ready() -> dict[str, Any]:
    return {"ready": True}


async def run(operations: list[tuple[str, str, str]]) -> None:
    deps = await make_deps()
    pipeline = Pipeline(deps)
    service = ResponseService(deps, pipeline)
    keys = ApiKeys(deps.repo)
    secret = {t: (await keys.create(t, ("read", "write", "forget", "admin")))[1] for t in TENANTS}
    app = create_http_app(service, Settings(), Metrics(), _ready, _ready, tenant_keys=keys)
    transport = httpx.ASGITransport(app=app)
    clients = {
        tenant: httpx.AsyncClient(
            transport=transport,
            base_url="http://memoryos",
            headers={"Authorization": f"Bearer {secret[tenant]}"},
        )
        for tenant in TENANTS
    }
    try:
        for index, (kind, tenant, user) in enumerate(operations):
            if kind == "drain":
                await pipeline.drain()
                continue
            http, other = clients[tenant], next(t for t in TENANTS if t != tenant)
            word = f"{tenant}word{index}"  # every tenant's words carry its name
            if kind == "write":
                reply = await http.post(
                    f"/v1/users/{user}/turns", json={"query": f"I like {word}", "response": "Ok"}
                )
            elif kind == "profile":
                reply = await http.put(f"/v1/users/{user}/profile", json={"note": word})
            elif kind == "delete":
                reply = await http.delete(f"/v1/users/{user}")
            elif kind == "memory":
                reply = await http.get(f"/v1/users/{user}/memory")
            elif kind == "history":
                reply = await http.get(f"/v1/users/{user}/history")
            elif kind == "export":  # the tenant's whole memory
                reply = await http.get("/v1/export")
            else:
                body = {"query": "what do I like, which words did I say?"}
                reply = await http.post(f"/v1/users/{user}/{kind}", json=body)
            assert reply.status_code < 300, reply.text
            if kind in READS:
                assert f"{other}word" not in reply.text, "another tenant's memory"
                assert f"{other}/" not in reply.text, "another tenant's reference"
    finally:
        for http in clients.values():
            await http.aclose()


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(st.lists(operation, min_size=1, max_size=25))
def test_no_interleaving_lets_a_tenant_read_another_tenants_memory(
    operations: list[tuple[str, str, str]],
) -> None:
    asyncio.run(run(operations))
