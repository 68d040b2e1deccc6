"""A user's pipeline history: where each recent turn is, and the user's dead letters."""

from __future__ import annotations

from typing import Any

import httpx

from adapters import history
from adapters.metrics import Metrics
from adapters.settings import Settings
from schemas.topics import TURNS, user_key
from service.http import create_http_app
from service.response import ResponseService
from streams.commands.inspect import render_history
from tests.support.fakes import Pipeline, make_deps
from tests.support.pipelines import ingest

BAD_TURN = b'{"user_id": "ann", "turn_id": "bad", "query": 1}'


async def ann_with_a_dead_letter() -> tuple[Pipeline, ResponseService]:
    pipeline = Pipeline(await make_deps())  # STM of 3, tau 2.5: 8 turns reach the persona
    await ingest(pipeline, "ann", 8)
    await pipeline.send(TURNS, user_key("ann"), BAD_TURN)
    await pipeline.send(TURNS, user_key("not an id"), BAD_TURN)  # no user to note it under
    await pipeline.drain()
    return pipeline, ResponseService(pipeline.deps, pipeline)


async def test_history_says_which_stages_handled_each_turn() -> None:
    _, service = await ann_with_a_dead_letter()
    found = await service.history("ann", limit=8)
    places = {turn["turn_id"]: turn["place"] for turn in found["turns"]}
    assert [turn["turn_id"] for turn in found["turns"]] == [f"t{i:03d}" for i in range(7, -1, -1)]
    assert {places[f"t00{i}"] for i in (5, 6, 7)} == {"stm"}, "the STM window"
    assert set(places.values()) - {"stm"} <= {"mtm", "persona_pending", "persona"}
    assert "persona" in places.values(), "a hot segment's pages reached the persona"
    newest = found["turns"][0]
    assert newest["stages"] == ["chain", "stm"]
    oldest = found["turns"][-1]
    assert oldest["stages"][:3] == ["chain", "stm", "mtm"]
    assert oldest["segment_id"]
    assert len((await service.history("ann", limit=2))["turns"]) == 2


async def test_history_lists_the_users_dead_letters_with_stage_and_reason() -> None:
    _, service = await ann_with_a_dead_letter()
    [letter] = (await service.history("ann"))["dead_letters"]
    assert letter["stage"] == "chain"
    assert letter["error"] == "invalid"
    assert "query" in letter["reason"]
    assert (letter["topic"], letter["offset"]) == ("memoryos.turns", 8)


async def test_the_dead_letter_ring_is_bounded() -> None:
    pipeline = Pipeline(await make_deps())
    for _ in range(history.RING + 5):
        await pipeline.send(TURNS, user_key("ann"), BAD_TURN)
    await pipeline.drain()
    letters = await history.dead_letters(pipeline.deps.repo, "ann")
    assert len(letters) == history.RING
    assert letters[-1]["offset"] == history.RING + 4, "the newest are kept"


async def test_a_delete_forgets_the_history_too() -> None:
    pipeline, service = await ann_with_a_dead_letter()
    assert (await service.history("ann"))["erasure"] is None, "never deleted"
    await service.forget("ann")
    pending = await service.history("ann")
    assert pending["turns"] == pending["dead_letters"] == []
    assert pending["erasure"]["complete"] is False, "the marker has not passed every stage"
    await pipeline.drain()
    erased = await service.history("ann")
    assert erased == {
        "user_id": "ann",
        "turns": [],
        "dead_letters": [],
        "erasure": erased["erasure"],
    }
    assert erased["erasure"]["complete"] is True
    assert not await pipeline.deps.repo.flagged_docs("ann", history.FLAG)


async def test_history_over_http_and_in_inspect() -> None:
    _, service = await ann_with_a_dead_letter()

    async def status() -> dict[str, Any]:
        return {"status": "ok", "ready": True}

    app = create_http_app(service, Settings(), Metrics(), status, status)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        reply = await client.get("/v1/users/ann/history", params={"limit": 3})
        assert reply.status_code == 200
        body = reply.json()
        assert len(body["turns"]) == 3
        assert (await client.get("/v1/users/ann/history?limit=0")).status_code == 422
    text = render_history(body)
    assert "t007" in text
    assert "chain → stm" in text
    assert "dead letters (1)" in text
    assert "chain invalid" in text
