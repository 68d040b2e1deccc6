"""Scoped retrieval on the embedded stack (a real broker, the Edge store): pages of two channels
and two conversations of one user; each filter alone and combined returns only matching pages,
in STM and MTM, k of them when k match; a time range returns only pages inside it; a filter on
an unknown or unindexed field is refused naming it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import pytest_asyncio

from schemas.filters import Filters
from schemas.turn import TurnEvent
from streams.stack import Stack
from tests.support.stacks import running_stack

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

START = datetime(2025, 6, 2, 9, 0, tzinfo=UTC)
TOPICS = ("parcel delivery", "invoice refund", "password reset", "router setup")


def turns() -> list[TurnEvent]:
    """24 turns, one a day: channel web/sms alternating, conversation a/b by thirds."""
    return [
        TurnEvent(
            user_id="cara",
            turn_id=f"t{n:02d}",
            query=f"About my {TOPICS[n % 4]}: question number {n}.",
            response=f"Here is help with the {TOPICS[n % 4]}.",
            timestamp=START + timedelta(days=n),
            channel="web" if n % 2 == 0 else "sms",
            conversation_id="conv-a" if (n // 3) % 2 == 0 else "conv-b",
            assistant_id="billing" if n % 4 == 1 else None,
            meta={"order_id": f"o{n % 3}", "ticket": f"k{n}"},
        )
        for n in range(24)
    ]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    async with running_stack(
        tmp_path_factory.mktemp("scoped"), filter_meta_keys="order_id"
    ) as running:
        assert running.service is not None
        await running.service.add_turns(turns())
        assert await running.wait_idle(120)
        yield running


async def retrieve(stack: Stack, **body: Any) -> httpx.Response:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{stack.port}", timeout=60) as http:
        return await http.post(
            "/v1/users/cara/retrieve", json={"query": "help with my delivery"} | body
        )


def pages(reply: httpx.Response) -> list[dict[str, Any]]:
    assert reply.status_code == 200, reply.text
    body = reply.json()
    return [*body["short_term"], *body["mid_term"]]


@pytest.mark.parametrize(
    ("filters", "holds"),
    [
        ({"channel": "web"}, lambda p: p["channel"] == "web"),
        ({"channel": ["sms"]}, lambda p: p["channel"] == "sms"),
        ({"conversation_id": "conv-b"}, lambda p: p["conversation_id"] == "conv-b"),
        ({"assistant_id": "billing"}, lambda p: p["assistant_id"] == "billing"),
        ({"meta": {"order_id": "o2"}}, lambda p: p["meta"]["order_id"] == "o2"),
        (
            {"channel": "web", "conversation_id": "conv-a", "meta": {"order_id": "o0"}},
            lambda p: (
                (p["channel"], p["conversation_id"], p["meta"]["order_id"])
                == ("web", "conv-a", "o0")
            ),
        ),
    ],
)
async def test_each_filter_alone_and_combined_returns_only_matching_pages(
    stack: Stack, filters: dict[str, Any], holds: Any
) -> None:
    everything = pages(await retrieve(stack, top_k=100))
    expected = {p["page_id"] for p in everything if holds(p)}
    found = pages(await retrieve(stack, top_k=100, filters=filters))
    assert found, "some pages match"
    assert all(holds(page) for page in found), filters
    assert {p["page_id"] for p in found} == expected, "every matching page, STM and MTM"


async def test_a_filtered_retrieve_still_returns_k_pages_when_k_match(stack: Stack) -> None:
    body = (await retrieve(stack, top_k=4, filters={"channel": "sms"})).json()
    assert len(body["mid_term"]) == 4
    assert {p["channel"] for p in body["mid_term"]} == {"sms"}
    assert {p["channel"] for p in body["short_term"]} <= {"sms"}


async def test_a_time_range_returns_only_pages_inside_it(stack: Stack) -> None:
    after, before = START + timedelta(days=5), START + timedelta(days=11)
    span = {"after": after.isoformat(), "before": before.isoformat()}
    found = pages(await retrieve(stack, top_k=100, filters=span))
    stamps = sorted(datetime.fromisoformat(p["timestamp"]) for p in found)
    assert stamps == [START + timedelta(days=n) for n in range(5, 11)]


@pytest.mark.parametrize(
    ("filters", "field"),
    [
        ({"colour": "red"}, "filters.colour"),
        ({"meta": {"ticket": "k3"}}, "filters.meta.ticket"),  # not an indexed key
        ({"channel": []}, "filters.channel"),
        ({"after": "2025-06-09T00:00:00Z", "before": "2025-06-01T00:00:00Z"}, "filters"),
        ({"meta": {"order_id": 7}}, "filters.meta.order_id"),
        ({"channel": ""}, "filters.channel"),
        ({"assistant_id": "default"}, "filters.assistant_id"),
    ],
)
async def test_a_filter_on_an_unknown_or_unindexed_field_is_refused_naming_it(
    stack: Stack, filters: dict[str, Any], field: str
) -> None:
    reply = await retrieve(stack, filters=filters)
    assert reply.status_code == 422, reply.text
    assert reply.json()["field"].startswith(field), reply.json()


@pytest.mark.parametrize("mode", ["paper", "fused"])
async def test_the_paper_modes_still_return_k_matching_pages(stack: Stack, mode: str) -> None:
    """Filters hold in the paper modes on the real stack, k pages when k match. (That the
    chosen segments may hold fewer, and the rest then come from every segment, is shown by
    tests/service/test_retrieval_modes.py with one segment chosen; here five are, and they
    hold enough.)"""
    assert stack.service is not None
    found = await stack.service.retrieve(
        "cara", "router setup", top_k=6, mode=mode, filters=Filters(channel="web")
    )
    assert len(found.mid_term) == 6
    assert {page.channel for page, _, _ in found.mid_term} == {"web"}  # router talk: sms


async def test_a_question_asked_at_the_edge_of_the_calendar_is_answered(stack: Stack) -> None:
    for at in ("0001-01-01T00:00:00Z", "9999-12-31T23:00:00Z"):
        reply = await retrieve(stack, query="what happened yesterday and a year ago?", at=at)
        assert reply.status_code == 200, reply.text
