"""One validation for every entry: the turn model bounds meta, whoever hands it over.

The topic decoder (``schemas.codec.decode``) is the path under test here; HTTP and MCP reuse the
same model (tests/service/test_fuzz_entries.py).
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from schemas.codec import decode
from schemas.errors import InvalidEvent
from schemas.limits import MAX_META_DEPTH
from schemas.turn import TurnEvent
from tests.support.builders import nested, turn_json


def test_meta_at_the_depth_limit_is_accepted() -> None:
    event = decode(TurnEvent, orjson.dumps(turn_json(meta=nested(MAX_META_DEPTH))))
    assert event.meta == nested(MAX_META_DEPTH)


@pytest.mark.parametrize("levels", [MAX_META_DEPTH + 1, 127, 5000])
def test_deeper_meta_is_dead_lettered_naming_the_field(levels: int) -> None:
    # 127 is the depth that broke the Qdrant Edge shard (tests/adapters/stores/test_edge_payloads).
    with pytest.raises(InvalidEvent, match=f"deeper than {MAX_META_DEPTH}") as info:
        decode(TurnEvent, turn_json(meta=nested(levels)))
    assert info.value.field == "meta"


def test_arrays_count_as_levels() -> None:
    deep: Any = []
    for _ in range(MAX_META_DEPTH):
        deep = [deep]
    with pytest.raises(InvalidEvent, match=r"meta\.x(\[0\])+: nested deeper"):
        decode(TurnEvent, turn_json(meta={"x": deep}))


@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_numbers_anywhere_in_meta_are_refused(number: float) -> None:
    with pytest.raises(InvalidEvent, match=r"meta\.a\[1\]\.b: .*NaN and Infinity") as info:
        decode(TurnEvent, turn_json(meta={"a": [1, {"b": number}]}))
    assert info.value.field == "meta"


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity"])
def test_non_finite_literals_on_the_topic_are_not_json(literal: bytes) -> None:
    raw = orjson.dumps(turn_json(meta={"x": 0})).replace(b'{"x":0}', b'{"x":' + literal + b"}")
    with pytest.raises(InvalidEvent, match="not valid JSON") as info:
        decode(TurnEvent, raw)
    assert info.value.field == "body"


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"query": "\ud800"}, "query"),
        ({"channel": "\udfff"}, "channel"),
        ({"meta": {"k": "\ud800"}}, "meta"),
        ({"meta": {"\ud800": 1}}, "meta"),
        ({"meta": {"big": -(2**63) - 1}}, "meta"),
    ],
)
def test_unencodable_text_and_numbers_are_named(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidEvent) as info:
        decode(TurnEvent, turn_json(**changes))
    assert info.value.field == field


def test_finite_floats_and_64_bit_integers_are_kept() -> None:
    meta = {"f": 1.5e300, "i": 2**64 - 1, "n": -(2**63), "u": "日本 ✓", "z": None}
    assert decode(TurnEvent, orjson.dumps(turn_json(meta=meta))).meta == meta
