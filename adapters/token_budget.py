"""LLM tokens per tenant per day (``MEMORYOS_TOKENS_PER_DAY``): counted, and enforced.

Every LLM call runs on behalf of one user, so of one tenant: the stages set ``acting_for`` for
the user whose events they handle, the service for the user it answers. The backend reports
each call's tokens (``charge``). Once a tenant has spent its day's budget:
- ``respond`` is refused (``BudgetExhausted``: HTTP 429 with the seconds to the next UTC day);
- the pipeline's LLM work for that tenant waits for the next day (``BudgetedLLM``): it is
  deferred, not dropped. The user's later events wait behind it, in order; other tenants go on:
  a stage that runs work under ``setting_aside`` has the waiting work set aside, so it holds
  none of the places that bound the work in flight (``agents/runtime.py``).
Counts are kept per process and per UTC day (the day's alone: bounded by the tenants).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from contextvars import ContextVar
from typing import Any

from adapters.metrics import Metrics
from adapters.ports import LLM, Answer, PersonaFacts, PromptMemory, Topic
from memory.chain import ContinuityVerdict
from schemas.errors import BudgetExhausted
from schemas.records import Page, Trait
from schemas.tenants import DEFAULT_TENANT, tenant_of

DAY_S = 86_400
MAX_TENANT_LABELS = 100
_TENANT: ContextVar[str] = ContextVar("memoryos_tenant", default=DEFAULT_TENANT)
SetAside = Callable[[], AbstractAsyncContextManager[None]]
_SET_ASIDE: ContextVar[SetAside | None] = ContextVar("memoryos_set_aside", default=None)


@contextlib.contextmanager
def acting_for(user_ref: str) -> Iterator[None]:
    """LLM calls inside are on behalf of this user's tenant."""
    token = _TENANT.set(tenant_of(user_ref))
    try:
        yield
    finally:
        _TENANT.reset(token)


def current_tenant() -> str:
    return _TENANT.get()


@contextlib.contextmanager
def setting_aside(aside: SetAside) -> Iterator[None]:
    """Work inside that waits for a tenant's budget enters ``aside()`` while it waits."""
    token = _SET_ASIDE.set(aside)
    try:
        yield
    finally:
        _SET_ASIDE.reset(token)


class TokenBudget:
    def __init__(
        self,
        per_day: int,
        metrics: Metrics | None = None,
        clock: Callable[[], float] = time.time,
        poll_s: float = 60.0,
    ) -> None:
        self.per_day = per_day  # 0: no budget, only counted
        self.metrics = metrics
        self.clock = clock
        self.poll_s = poll_s
        self._day = self._today()
        self._spent: dict[str, int] = {}
        self._labels: set[str] = set()

    def charge(self, tokens: int, tenant: str | None = None) -> None:
        tenant = tenant or current_tenant()
        self._roll_over()
        self._spent[tenant] = self._spent.get(tenant, 0) + tokens
        if self.metrics is not None:
            self.metrics.tenant_tokens.labels(tenant=self._label(tenant)).inc(tokens)

    def spent(self, tenant: str) -> int:
        self._roll_over()
        return self._spent.get(tenant, 0)

    def over(self, tenant: str) -> bool:
        return self.per_day > 0 and self.spent(tenant) >= self.per_day

    def seconds_to_next_day(self) -> float:
        return (self._today() + 1) * DAY_S - self.clock()

    def refuse_if_over(self, tenant: str) -> None:
        if self.over(tenant):
            raise BudgetExhausted(tenant, max(1, int(self.seconds_to_next_day()) + 1))

    async def wait_until_open(self, tenant: str) -> None:
        """Until the tenant may spend again: at once, or the next UTC day."""
        if not self.over(tenant):
            return
        if self.metrics is not None:
            self.metrics.llm_deferred.labels(tenant=self._label(tenant)).inc()
        aside = _SET_ASIDE.get()
        async with aside() if aside is not None else contextlib.nullcontext():
            # Polled, not awaited on an event: the day turns with the clock, not with a write.
            while self.over(tenant):  # noqa: ASYNC110
                await asyncio.sleep(max(0.0, min(self.poll_s, self.seconds_to_next_day())))

    def _today(self) -> int:
        return int(self.clock() // DAY_S)

    def _roll_over(self) -> None:
        if (today := self._today()) != self._day:
            self._day, self._spent = today, {}

    def _label(self, tenant: str) -> str:
        if tenant in self._labels or len(self._labels) < MAX_TENANT_LABELS:
            self._labels.add(tenant)
            return tenant
        return "other"


class BudgetedLLM:
    """The LLM port, each call first asking the tenant's budget: the pipeline's calls wait
    for the next day when it is spent, ``respond`` is refused."""

    def __init__(self, inner: LLM, budget: TokenBudget) -> None:
        self.inner = inner
        self.budget = budget

    async def _open(self) -> None:
        await self.budget.wait_until_open(current_tenant())

    async def continuity(self, previous: Page | None, current: Page) -> ContinuityVerdict:
        await self._open()
        return await self.inner.continuity(previous, current)

    async def topics(self, dialogue: str) -> list[Topic]:
        await self._open()
        return await self.inner.topics(dialogue)

    async def topics_many(self, dialogues: Sequence[str]) -> list[list[Topic]]:
        await self._open()
        return await self.inner.topics_many(dialogues)

    async def topics_summary(self, dialogue: str, previous_summary: str) -> tuple[list[Topic], str]:
        await self._open()
        return await self.inner.topics_summary(dialogue, previous_summary)

    async def segment_summary(self, previous_summary: str, dialogue: str) -> str:
        await self._open()
        return await self.inner.segment_summary(previous_summary, dialogue)

    async def user_traits(self, known: Mapping[str, Trait], dialogue: str) -> dict[str, Trait]:
        await self._open()
        return await self.inner.user_traits(known, dialogue)

    async def user_knowledge(self, dialogue: str) -> list[str]:
        await self._open()
        return await self.inner.user_knowledge(dialogue)

    async def agent_traits(self, dialogue: str) -> list[str]:
        await self._open()
        return await self.inner.agent_traits(dialogue)

    async def persona(
        self,
        known: Mapping[str, Trait],
        dialogue: str,
        facts: Sequence[str] = (),
        summary: str = "",
    ) -> PersonaFacts:
        await self._open()
        return await self.inner.persona(known, dialogue, facts, summary)

    async def respond(self, system: str, user: str, memory: PromptMemory) -> Answer:
        self.budget.refuse_if_over(current_tenant())
        return await self.inner.respond(system, user, memory)

    async def close(self) -> None:
        await self.inner.close()

    def __getattr__(self, name: str) -> Any:  # the backend's own extras (usage, model name)
        return getattr(self.inner, name)
