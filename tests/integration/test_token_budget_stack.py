"""Token budgets on the embedded stack, with the real openai client against the fake server:
a tenant that spent its day's tokens gets 429 on respond, its pipeline work waits while another
tenant's goes on, and resumes when the (injected) clock reaches the next day."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from adapters.token_budget import DAY_S, TokenBudget
from evaluation.fake_openai import FakeOpenAI
from streams.stack import Stack
from tests.support.stacks import eventually, running_stack

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]

OPERATOR = "operator-key"


class Clock:
    def __init__(self) -> None:
        self.now = 20_000 * DAY_S + 3600.0

    def __call__(self) -> float:
        return self.now


def budget_of(stack: Stack) -> TokenBudget:
    assert stack.deps is not None
    llm = stack.deps.llm.inner  # type: ignore[attr-defined]  # Instrumented(Budgeted(...))
    budget: TokenBudget = llm.budget
    return budget


async def placed(http: httpx.AsyncClient, user: str) -> int:
    memory = (await http.get(f"/v1/users/{user}/memory")).json()
    return sum(len(segment["pages"]) for segment in memory["mid_term"])


async def test_a_spent_tenant_is_refused_respond_and_its_pipeline_resumes_the_next_day(
    tmp_path: Path,
) -> None:
    with FakeOpenAI() as server:
        settings = {
            "llm": "openai",
            "openai_base_url": server.base_url,
            "openai_api_key": "test-key",
            "llm_model": "fake-model",
            "stm_capacity": 2,
            "tokens_per_day": 2000,
            "api_keys": OPERATOR,
        }
        async with running_stack(tmp_path, **settings) as stack:
            clock = Clock()
            budget = budget_of(stack)
            budget.clock, budget.poll_s = clock, 0.05
            budget._day = budget._today()
            base = f"http://127.0.0.1:{stack.port}"
            keys = {}
            async with httpx.AsyncClient(
                base_url=base, headers={"Authorization": f"Bearer {OPERATOR}"}, timeout=60
            ) as operator:
                for tenant in ("acme", "zeta"):
                    made = await operator.post(
                        "/v1/keys", json={"tenant": tenant, "scopes": ["read", "write"]}
                    )
                    keys[tenant] = made.json()["key"]
            clients = {
                tenant: httpx.AsyncClient(
                    base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60
                )
                for tenant, key in keys.items()
            }
            try:
                budget.charge(2000, "acme")  # acme has spent its day already
                for tenant, http in clients.items():
                    for index in range(4):
                        said = {"query": f"{tenant} note {index} about bees", "response": "Ok."}
                        reply = await http.post("/v1/users/bob/turns", json=said)
                        assert reply.status_code == 202
                await eventually(lambda: _at_least(clients["zeta"], 2), timeout_s=90)
                assert await placed(clients["acme"], "bob") == 0, "acme's LLM work waits"
                refused = await clients["acme"].post(
                    "/v1/users/bob/respond", json={"query": "What do I keep?"}
                )
                assert refused.status_code == 429
                assert int(refused.headers["Retry-After"]) > 3600
                answered = await clients["zeta"].post(
                    "/v1/users/bob/respond", json={"query": "What do I keep?"}
                )
                assert answered.status_code == 200, "another tenant is served"
                assert budget.spent("zeta") > 0, "the backend's tokens are charged to zeta"

                clock.now += DAY_S  # the next day
                await eventually(lambda: _at_least(clients["acme"], 2), timeout_s=90)
            finally:
                for http in clients.values():
                    await http.aclose()


async def _at_least(http: httpx.AsyncClient, pages: int) -> bool:
    return await placed(http, "bob") >= pages
