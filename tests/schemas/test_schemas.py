from __future__ import annotations

from datetime import UTC
from typing import Any

import orjson
import pytest

from schemas.codec import decode, dumps
from schemas.errors import InvalidEvent
from schemas.export import EVENT_SCHEMA_PATH, SCHEMA_PATH, event_schema_json, turn_schema_json
from schemas.turn import MAX_META_BYTES, MAX_TEXT_CHARS, TurnEvent
from tests.support.builders import turn_json


def test_valid_turn_round_trips() -> None:
    event = decode(TurnEvent, orjson.dumps(turn_json(meta={"dia_ids": ["D1:1"]}, channel="sms")))
    again = decode(TurnEvent, dumps(event))
    assert again == event
    assert event.meta == {"dia_ids": ["D1:1"]}


def test_naive_timestamp_is_utc() -> None:
    event = decode(TurnEvent, turn_json(timestamp="2024-05-08T13:56:00"))
    assert event.timestamp.tzinfo == UTC


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"user_id": None}, "user_id"),
        ({"query": 42}, "query"),
        ({"timestamp": "yesterday"}, "timestamp"),
        ({"user_id": "has space"}, "user_id"),
        ({"user_id": "x" * 129}, "user_id"),
        ({"query": "x" * (MAX_TEXT_CHARS + 1)}, "query"),
        ({"meta": {"blob": "x" * MAX_META_BYTES}}, "meta"),
        ({"meta": [1, 2]}, "meta"),
        ({"meta": {"big": 2**70}}, "meta"),
        ({"unexpected": 1}, "unexpected"),
    ],
)
def test_invalid_field_is_named(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidEvent) as info:
        decode(TurnEvent, turn_json(**changes))
    assert info.value.field == field
    assert field in str(info.value)


def test_missing_field_is_named() -> None:
    data = turn_json()
    del data["response"]
    with pytest.raises(InvalidEvent, match="response"):
        decode(TurnEvent, data)


@pytest.mark.parametrize("raw", [b"{not json", b"[1, 2]", b'"text"'])
def test_malformed_json_is_rejected(raw: bytes) -> None:
    with pytest.raises(InvalidEvent):
        decode(TurnEvent, raw)


def test_published_schema_is_current() -> None:
    assert SCHEMA_PATH.read_bytes() == turn_schema_json(), (
        "schemas/turn.schema.json is stale: run `python -m schemas.export`"
    )


def test_published_schema_accepts_what_the_model_accepts() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = orjson.loads(SCHEMA_PATH.read_bytes())
    jsonschema.validate(turn_json(assistant_id="bot", channel="web", meta={"a": 1}), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(turn_json(user_id="bad id"), schema)


def test_a_page_vector_travels_as_float32_base64_and_comes_back() -> None:
    import random
    from datetime import UTC, datetime

    from schemas.records import ChainLink, Page, PageEvent

    vector = [random.uniform(-1, 1) for _ in range(384)]
    page = Page(
        page_id="p",
        user_id="u",
        turn_id="t",
        query="q",
        response="r",
        timestamp=datetime(2024, 1, 1, tzinfo=UTC),
        chain=ChainLink(chain_id="p"),
        vector=vector,
    )
    raw = dumps(PageEvent(page=page))
    assert len(raw) < 2_400  # 384 JSON floats alone took about 8 KB
    back = decode(PageEvent, raw).page.vector
    assert back is not None
    assert max(abs(a - b) for a, b in zip(vector, back, strict=True)) < 1e-6
    assert page.model_dump()["vector"] == vector  # Python-side dumps keep the list


def test_published_message_schema_is_current() -> None:
    from schemas.export import MESSAGE_SCHEMA_PATH, message_schema_json

    assert MESSAGE_SCHEMA_PATH.read_bytes() == message_schema_json(), (
        "schemas/message.schema.json is stale: run `python -m schemas.export`"
    )


def test_a_user_reference_names_each_user_once() -> None:
    """``default/bob`` would be a second name of the default tenant's ``bob`` (a raw record
    could make a user that a DELETE of bob does not reach)."""
    from datetime import UTC, datetime

    import pydantic

    from schemas.turn import TurnEvent

    fields = {"turn_id": "t1", "query": "q", "response": "r", "timestamp": datetime.now(UTC)}
    assert TurnEvent(user_id="acme/bob", **fields).user_id == "acme/bob"
    assert TurnEvent(user_id="bob", **fields).user_id == "bob"
    with pytest.raises(pydantic.ValidationError, match="without a tenant prefix"):
        TurnEvent(user_id="default/bob", **fields)


def test_the_event_schema_file_is_made_from_the_model() -> None:
    assert EVENT_SCHEMA_PATH.read_bytes() == event_schema_json(), (
        "schemas/event.schema.json is stale: run `python -m schemas.export`"
    )
