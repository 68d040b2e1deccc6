"""memoryos.events from the stages as the app wires them: each change makes its event in the
user's order, the events are valid CloudEvents of the published schema, a replay after a crash
makes no new id, and the user's words go out only when asked for."""

from __future__ import annotations

from typing import Any

import jsonschema
import orjson
import pytest
from cloudevents.core.formats.json import JSONFormat

from adapters.events_out import EventOut, NoOutbox
from schemas.events import EVENT_TYPES, MemoryEvent
from schemas.export import EVENT_SCHEMA_PATH
from schemas.facts import FactEdit
from schemas.records import ForgetUser
from schemas.topics import EVENTS, user_key
from service.response import ResponseService
from tests.support.builders import make_turns
from tests.support.fakes import Pipeline, make_deps

pytestmark = pytest.mark.asyncio

TALK = [
    ("My name is Ann and I live in Lyon.", "Hello Ann."),
    ("I hike in the Alps every summer.", "The Alps are great for hiking."),
    ("My dog is called Miso.", "Miso is a nice name."),
]
SCHEMA = orjson.loads(EVENT_SCHEMA_PATH.read_bytes())
FACT = "00000000-0000-5000-8000-000000000000"


async def small_pipeline(**overrides: Any) -> tuple[Pipeline, ResponseService]:
    """STM of one page and a low tau: each turn pushes the one before through MTM to the
    persona, so a few turns make every kind of change."""
    deps = await make_deps(stm_capacity=1, heat_tau=1.5, continuity_llm="always", **overrides)
    pipeline = Pipeline(deps)
    return pipeline, ResponseService(deps, pipeline)


def edit(op: str, edit_id: str, at: float, **fields: Any) -> FactEdit:
    return FactEdit(user_id="ann", edit_id=edit_id, op=op, fact_id=FACT, at=at, **fields)


async def test_each_change_makes_its_event_in_the_users_order() -> None:
    pipeline, service = await small_pipeline()
    await service.add_turns(make_turns("ann", TALK))
    await pipeline.drain()
    added = edit("add", "e1", 1.0, fact_kind="user_knowledge", text="I am allergic to nuts.")
    await service.send_fact_edit(added)
    await pipeline.drain()
    book = await pipeline.deps.repo.load_fact_book("ann")
    assert book is not None
    nuts = next(f for f in book.facts if "nuts" in f.text)
    await service.send_fact_edit(
        FactEdit(user_id="ann", edit_id="e2", op="edit", fact_id=nuts.fact_id, pinned=True, at=2.0)
    )
    await service.send_fact_edit(
        FactEdit(user_id="ann", edit_id="e3", op="delete", fact_id=nuts.fact_id, at=3.0)
    )
    await pipeline.drain()
    await service.forget("ann")
    await pipeline.drain()

    events = pipeline.memory_events("ann")
    types = [event["type"] for event in events]
    assert types.count("memory.page.stored") == len(TALK)
    for kind in (
        "memory.segment.created",
        "memory.persona.updated",
        "memory.fact.added",
        "memory.fact.edited",
        "memory.fact.deleted",
    ):
        assert kind in types, kind
    assert types[-1] == "memory.user.forgotten"
    assert types.count("memory.user.forgotten") == 1
    # a user's pages in their order, each change once
    stored = [e["data"]["seq"] for e in events if e["type"] == "memory.page.stored"]
    assert stored == sorted(stored)
    assert len({event["id"] for event in events}) == len(events)
    mine = [e for e in events if e["data"].get("fact_id") == nuts.fact_id]
    assert [e["type"] for e in mine] == [
        "memory.fact.added",
        "memory.fact.edited",
        "memory.fact.deleted",
    ]
    assert mine[0]["data"]["origin"] == "api"
    assert mine[1]["data"]["change"] == "pinned"
    assert mine[2]["data"]["reason"] == "api"
    # every one a CloudEvent of the published schema, keyed by its user
    for sent in pipeline.topics[EVENTS]:
        assert sent.key == user_key("ann")
        data = orjson.loads(sent.value)
        jsonschema.validate(data, SCHEMA)
        event = JSONFormat().read(None, sent.value)  # the CloudEvents SDK reads it as one
        assert event.get_specversion() == "1.0"
        assert event.get_subject() == "ann"
        assert event.get_type() in EVENT_TYPES
        assert event.get_data() == data["data"]
        assert MemoryEvent.model_validate(data).id == data["id"]


async def test_no_words_leave_unless_asked_for() -> None:
    pipeline, service = await small_pipeline()
    await service.add_turns(make_turns("ann", TALK))
    await pipeline.drain()
    raw = b"".join(sent.value for sent in pipeline.topics[EVENTS])
    for query, response in TALK:
        assert query.encode() not in raw
        assert response.encode() not in raw
    assert b"Lyon" not in raw
    assert b"Alps" not in raw

    pipeline, service = await small_pipeline(events_include_text=True)
    pipeline.events = EventOut(pipeline._send(EVENTS), NoOutbox(), pipeline.deps.metrics, True)
    pipeline.stages = pipeline._build()
    await service.add_turns(make_turns("ann", TALK))
    await pipeline.drain()
    stored = [e for e in pipeline.memory_events("ann") if e["type"] == "memory.page.stored"]
    assert [e["data"]["query"] for e in stored] == [query for query, _ in TALK]


async def test_a_write_that_fails_after_its_event_is_announced_again_with_the_same_id() -> None:
    """A stage announces a change before writing it: when the write fails (or the process
    dies there) the event is out, the work is done again, and it announces the same id."""
    pipeline, service = await small_pipeline()
    repo = pipeline.deps.repo
    failures = {"save_pages": 1, "save_fact_book": 1}

    def failing(name: str) -> Any:
        real = getattr(repo, name)

        async def write(*args: Any, **kwargs: Any) -> Any:
            if failures[name]:
                failures[name] -= 1
                raise ConnectionError(f"{name} failed")
            return await real(*args, **kwargs)

        return write

    for name in failures:
        setattr(repo, name, failing(name))
    await service.add_turns(make_turns("ann", TALK))
    await pipeline.drain()
    assert failures == {"save_pages": 0, "save_fact_book": 0}, "both writes failed once"
    events = pipeline.memory_events("ann")
    by_id: dict[str, set[str]] = {}
    for event in events:
        by_id.setdefault(event["id"], set()).add(orjson.dumps(event["data"]).decode())
    repeated = [e["type"] for e in events if sum(x["id"] == e["id"] for x in events) > 1]
    assert "memory.page.stored" in repeated, "the page's event went out before the write"
    assert any(t.startswith("memory.fact.") or t == "memory.persona.updated" for t in repeated)
    # the same change: its data too, not only its id
    assert all(len(datas) == 1 for datas in by_id.values())
    stored = [e for e in events if e["type"] == "memory.page.stored"]
    assert len({e["id"] for e in stored}) == len(TALK)


async def test_a_marker_of_a_delete_already_done_announces_it_again_with_its_id() -> None:
    """The forgotten event goes out after the last write; a crash between them replays the
    marker, which finds the DELETE complete: it sends the event again, not a new one."""
    pipeline, service = await small_pipeline()
    await service.add_turns(make_turns("ann", TALK[:1]))
    await pipeline.drain()
    await service.forget("ann")
    await pipeline.drain()
    (forgotten,) = [e for e in pipeline.memory_events("ann") if e["type"].endswith("forgotten")]
    stone = await pipeline.deps.repo.tombstone("ann")
    assert stone is not None
    assert not stone[1]
    marker = ForgetUser(user_id="ann", at=stone[0])
    await pipeline.stages["memoryos.persona"].apply(marker)
    again = [e for e in pipeline.memory_events("ann") if e["type"].endswith("forgotten")]
    assert [e["id"] for e in again] == [forgotten["id"], forgotten["id"]]


async def test_a_dead_letter_of_a_user_is_announced_without_its_text() -> None:
    pipeline, _ = await small_pipeline()
    hostile = b'{"user_id": "ann", "turn_id": "t9", "query": "secret words", "response": 5}'
    await pipeline.send("memoryos.turns", user_key("ann"), hostile)
    await pipeline.drain()
    (event,) = pipeline.memory_events("ann")
    assert event["type"] == "memory.dead_lettered"
    assert event["data"]["stage"] == "chain"
    assert event["data"]["error"] == "invalid"
    assert event["data"]["message"] is None
    assert b"secret words" not in orjson.dumps(event)


async def test_a_turn_id_sent_again_after_a_delete_is_a_new_event() -> None:
    """The same turn id makes the same page id; after a DELETE it is a new change all the
    same, and a receiver de-duplicating on ``id`` must not drop it."""
    pipeline, service = await small_pipeline()
    await service.add_turns(make_turns("ann", TALK))
    await pipeline.drain()
    await service.forget("ann")
    await pipeline.drain()
    before = {e["id"] for e in pipeline.memory_events("ann")}
    await service.add_turns(make_turns("ann", [(q + " Again.", r) for q, r in TALK]))
    await pipeline.drain()
    after = [e for e in pipeline.memory_events("ann") if e["id"] not in before]
    stored = [e for e in after if e["type"] == "memory.page.stored"]
    assert len(stored) == len(TALK), "each page again, under a new id"
    created = [e for e in pipeline.memory_events("ann") if e["type"] == "memory.segment.created"]
    assert len({e["id"] for e in created}) == len(created)
