"""Tokens per tenant per day: counted per tenant, respond refused once spent, the pipeline's
LLM work for that tenant deferred to the next day (an injected clock) while others go on."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from adapters.instrumented import token_recorder
from adapters.metrics import Metrics
from adapters.settings import Settings
from adapters.token_budget import DAY_S, BudgetedLLM, TokenBudget, acting_for, current_tenant
from schemas.codec import dumps
from schemas.errors import BudgetExhausted
from schemas.topics import PAGES, TURNS, user_key
from service.http import create_http_app
from service.response import ResponseService
from tests.support.builders import make_turns
from tests.support.fakes import Pipeline, make_deps


class Clock:
    def __init__(self) -> None:
        self.now = 20_000 * DAY_S + 3600.0  # one o'clock on some UTC day

    def __call__(self) -> float:
        return self.now


def test_tokens_are_counted_per_tenant_and_day() -> None:
    clock = Clock()
    budget = TokenBudget(100, Metrics(), clock)
    with acting_for("acme/bob"):
        budget.charge(60)
        budget.charge(50)
    budget.charge(10)  # outside any user: the default tenant
    assert (budget.spent("acme"), budget.spent("default")) == (110, 10)
    assert budget.over("acme")
    assert not budget.over("default")
    with pytest.raises(BudgetExhausted) as refused:
        budget.refuse_if_over("acme")
    assert refused.value.retry_after_s == 23 * 3600 + 1
    clock.now += 23 * 3600
    assert not budget.over("acme"), "a new day, a new budget"
    assert not TokenBudget(0, None, clock).over("acme"), "0: no budget"


async def _placed(pipeline: Pipeline, user: str) -> bool:
    return bool(await pipeline.deps.repo.mid_term_pages(user))


async def test_a_spent_tenant_waits_for_the_next_day_and_is_refused_respond() -> None:
    clock = Clock()
    deps = await make_deps(stm_capacity=2)
    budget = TokenBudget(1000, deps.metrics, clock, poll_s=0.01)
    deps.llm = BudgetedLLM(deps.llm, budget)
    pipeline = Pipeline(deps)
    budget.charge(1000, "acme")  # acme spent its day
    for user in ("acme/bob", "zeta/bob"):
        for turn in make_turns(user, [(f"note {i} on bees", "ok") for i in range(4)]):
            await pipeline.send(TURNS, user_key(user), dumps(turn))
    draining = asyncio.create_task(pipeline.drain())

    def pages_of(user: str) -> int:
        return sum(1 for sent in pipeline.topics[PAGES] if sent.key == user_key(user))

    for _ in range(200):
        if pages_of("zeta/bob") == 4:
            break
        await asyncio.sleep(0.02)
    assert pages_of("zeta/bob") == 4, "another tenant goes on"
    assert pages_of("acme/bob") < 4, "the spent tenant's LLM work waits"
    assert not draining.done()

    service = ResponseService(deps, pipeline)
    app = create_http_app(service, Settings(), Metrics(), _ready, _ready)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        answered = await http.post("/v1/users/bob/respond", json={"query": "bees?"})
        assert answered.status_code == 200, "the default tenant has a budget of its own"
        budget.charge(1000, "default")
        refused = await http.post("/v1/users/bob/respond", json={"query": "bees?"})
    assert refused.status_code == 429
    assert int(refused.headers["Retry-After"]) == 23 * 3600 + 1
    assert "tokens" in refused.json()["error"]
    with pytest.raises(BudgetExhausted):
        await service.respond("acme/bob", "What do I keep?")

    clock.now += DAY_S  # the next day
    await asyncio.wait_for(draining, 10)
    assert await _placed(pipeline, "acme/bob"), "deferred, not dropped"
    assert deps.metrics.llm_deferred.labels(tenant="acme")._value.get() >= 1


async def _ready() -> dict[str, Any]:
    return {"ready": True}


def test_the_backends_token_reports_charge_the_tenant_the_call_was_for() -> None:
    metrics = Metrics()
    budget = TokenBudget(0, metrics, Clock())
    record = token_recorder(metrics, budget)
    with acting_for("acme/bob"):
        record("respond", 30, 12)
    record("topics", 5, 5)
    assert (budget.spent("acme"), budget.spent("default")) == (42, 10)
    assert metrics.tenant_tokens.labels(tenant="acme")._value.get() == 42


class Recording:
    """The fake LLM, noting the tenant each call is made for."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[tuple[str, str]] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.inner, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, current_tenant()))
            return await method(*args, **kwargs)

        return call


async def test_every_pipeline_llm_call_is_made_for_the_users_tenant() -> None:
    deps = await make_deps(stm_capacity=2, heat_tau=0.5)
    recording = Recording(deps.llm)
    deps.llm = recording  # type: ignore[assignment]
    pipeline = Pipeline(deps)
    for turn in make_turns("acme/bob", [(f"note {i} on bees and hives", "ok") for i in range(9)]):
        await pipeline.send(TURNS, user_key("acme/bob"), dumps(turn))
    await pipeline.drain()
    names = {name for name, _ in recording.calls}
    assert {"topics_many", "segment_summary"} & names, "the batched MTM calls ran"
    assert {tenant for _, tenant in recording.calls} == {"acme"}, recording.calls
