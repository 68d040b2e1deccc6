"""Facts on the embedded stack (`memoryos up`'s defaults, a real broker and the Edge store):
extracted, superseded by a later turn, edited, deleted, added by API; a restart and a replay
of the same turns change none of it; a DELETE with edits in flight brings nothing back.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from streams.stack import Stack
from tests.support.builders import make_turns
from tests.support.stacks import eventually, running_stack

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

RUNS = [
    ("I live in Lyon. I run trail races every month.", "Trail racing near Lyon sounds fun."),
    ("My trail running shoes are worn out after the last trail race.", "Time for new shoes."),
    ("I train for trail races on the hills every weekend.", "Hill training helps trail racing."),
    ("My dog is called Miso and joins my trail running.", "Miso must love trail running."),
    ("I want new trail running shoes for my next trail race.", "Try the Kestrel trail shoes."),
    ("I prefer trail running shoes with a wide toe box.", "The Kestrel has a wide toe box."),
    ("I am allergic to nuts, so I carry my own trail snacks.", "Good idea on long trail runs."),
    ("My trail race last month was 30 km of hills.", "30 km of trail is a lot."),
]
LATER = [
    ("We moved to Paris, so my trail runs are now in Fontainebleau.", "Fontainebleau trails!"),
    ("My dog is called Rex now, he joins my trail running too.", "Rex will love the trails."),
    ("My new trail running shoes arrived for the next trail race.", "Enjoy the new trail shoes."),
    ("I train for trail races in the Fontainebleau hills.", "Hill training helps trail racing."),
    ("My trail race next month is 40 km of trail.", "40 km of trail is a lot."),
    ("I prefer trail running at dawn before work.", "Dawn trail runs are quiet."),
    ("My trail running watch tracks every trail race.", "Handy for trail training."),
    ("I run trail races with my club every month.", "A trail club is great."),
]


def http(stack: Stack) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=f"http://127.0.0.1:{stack.port}", timeout=60)


async def facts(stack: Stack, user: str, **params: Any) -> list[dict[str, Any]]:
    async with http(stack) as client:
        reply = await client.get(f"/v1/users/{user}/facts", params=params)
    assert reply.status_code == 200, reply.text
    return list(reply.json()["facts"])


async def heat_up(stack: Stack, user: str, query: str) -> None:
    """Retrieves visit the user's segments (N_visit): a segment grows hot, and the persona
    stage reads its pages."""
    async with http(stack) as client:
        for _ in range(6):
            reply = await client.post(f"/v1/users/{user}/retrieve", json={"query": query})
            assert reply.status_code == 200, reply.text
    assert await stack.wait_idle(120)


async def said(stack: Stack, user: str, words: str) -> dict[str, Any] | None:
    return next((f for f in await facts(stack, user) if words in f["text"]), None)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("facts")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(data_dir: Path) -> AsyncIterator[Stack]:
    async with running_stack(data_dir) as running:
        yield running


async def ingest(stack: Stack, user: str, texts: list[tuple[str, str]], prefix: str) -> None:
    assert stack.service is not None
    start = datetime(2025, 3 if prefix == "a" else 9, 1, tzinfo=UTC)
    await stack.service.add_turns(make_turns(user, texts, start=start, prefix=prefix))
    assert await stack.wait_idle(120)


async def test_a_fact_is_extracted_with_its_provenance(stack: Stack) -> None:
    await ingest(stack, "ann", RUNS, "a")
    await eventually(lambda: heat_up_and_find(stack, "ann", "Lyon"), timeout_s=180, every_s=0.5)
    lyon = await said(stack, "ann", "Lyon")
    assert lyon is not None
    assert lyon["kind"] == "user_knowledge"
    assert lyon["superseded_by"] is None
    assert lyon["pinned"] is False
    assert lyon["source"]["turn_ids"] == ["a000"]  # the turn that said it
    async with http(stack) as client:
        history = (await client.get(f"/v1/users/ann/facts/{lyon['fact_id']}/history")).json()
        retrieved = await client.post("/v1/users/ann/retrieve", json={"query": "where do I live"})
    assert [c["change"] for c in history["changes"]] == ["extracted"]
    known = {f["fact_id"] for f in retrieved.json()["user_knowledge"]}
    assert lyon["fact_id"] in known, "a retrieve names each fact's id"


async def heat_up_and_find(stack: Stack, user: str, words: str) -> bool:
    await heat_up(stack, user, "trail running races shoes")
    return await said(stack, user, words) is not None


async def test_a_later_turn_supersedes_and_the_old_fact_is_kept_for_audit(stack: Stack) -> None:
    lyon = await said(stack, "ann", "Lyon")
    assert lyon is not None
    await ingest(stack, "ann", LATER, "b")
    await eventually(lambda: heat_up_and_find(stack, "ann", "Paris"), timeout_s=180, every_s=0.5)
    assert await said(stack, "ann", "Lyon") is None, "superseded: not a current fact"
    everything = await facts(stack, "ann", include_superseded="true")
    old = next(f for f in everything if f["fact_id"] == lyon["fact_id"])
    paris = await said(stack, "ann", "Paris")
    assert paris is not None
    assert old["superseded_by"] == paris["fact_id"]
    assert old["superseded_at"] is not None
    async with http(stack) as client:
        history = (await client.get(f"/v1/users/ann/facts/{lyon['fact_id']}/history")).json()
        retrieved = (await client.post("/v1/users/ann/retrieve", json={"query": "Lyon"})).json()
        memory = (await client.get("/v1/users/ann/memory")).json()
    assert [c["change"] for c in history["changes"]] == ["extracted", "superseded"]
    assert all("Lyon" not in f["text"] for f in retrieved["user_knowledge"])
    assert all("Lyon" not in f for f in memory["persona"]["user_knowledge"])


async def test_edit_delete_and_add_travel_the_users_stream(stack: Stack) -> None:
    nuts = await said(stack, "ann", "allergic to nuts")
    assert nuts is not None
    async with http(stack) as client:
        reply = await client.patch(
            f"/v1/users/ann/facts/{nuts['fact_id']}",
            json={"text": "I am allergic to peanuts only.", "pinned": True},
        )
        assert reply.status_code == 202, reply.text
        shoes = await said(stack, "ann", "wide toe box")
        assert shoes is not None
        reply = await client.delete(f"/v1/users/ann/facts/{shoes['fact_id']}")
        assert reply.status_code == 202, reply.text
        reply = await client.post(
            "/v1/users/ann/facts", json={"text": "My bib number is 4411.", "pinned": False}
        )
        assert reply.status_code == 202, reply.text
        added_id = reply.json()["fact_id"]
    await eventually(lambda: _edited(stack, nuts["fact_id"], shoes["fact_id"], added_id))


async def _edited(stack: Stack, nuts_id: str, shoes_id: str, added_id: str) -> bool:
    current = {f["fact_id"]: f for f in await facts(stack, "ann")}
    nuts = current.get(nuts_id)
    return (
        nuts is not None
        and nuts["text"] == "I am allergic to peanuts only."
        and nuts["pinned"]
        and shoes_id not in current
        and current.get(added_id, {}).get("source") == "api"
    )


async def test_a_restart_and_a_replay_of_the_same_turns_change_nothing(
    stack: Stack, data_dir: Path
) -> None:
    before = sorted((f["fact_id"], f["text"]) for f in await facts(stack, "ann"))
    await stack.stop()
    async with running_stack(data_dir) as again:
        assert sorted((f["fact_id"], f["text"]) for f in await facts(again, "ann")) == before
        await ingest(again, "ann", RUNS, "a")  # the same turns, the same ids
        await ingest(again, "ann", LATER, "b")
        await heat_up(again, "ann", "trail running races shoes")
        assert sorted((f["fact_id"], f["text"]) for f in await facts(again, "ann")) == before
        await _delete_with_edits_in_flight(again)


async def _delete_with_edits_in_flight(stack: Stack) -> None:
    current = await facts(stack, "ann")
    async with http(stack) as client:
        for fact in current[:3]:
            reply = await client.patch(
                f"/v1/users/ann/facts/{fact['fact_id']}", json={"text": "Edited in flight."}
            )
            assert reply.status_code == 202
        reply = await client.post("/v1/users/ann/facts", json={"text": "Added in flight."})
        assert reply.status_code == 202
        assert (await client.delete("/v1/users/ann")).status_code == 200
        # while the DELETE completes, an edit is refused rather than lost; after, it is new
        late = await client.post("/v1/users/ann/facts", json={"text": "Said after it."})
        assert late.status_code in (202, 409), late.text
    assert await stack.wait_idle(120)
    await eventually(lambda: _forgotten(stack))
    left = {f["text"] for f in await facts(stack, "ann", include_superseded="true")}
    assert left <= {"Said after it."}, "nothing from before the DELETE came back"


async def _forgotten(stack: Stack) -> bool:
    async with http(stack) as client:
        memory = (await client.get("/v1/users/ann/memory")).json()
    return not memory["short_term"] and not memory["mid_term"]
