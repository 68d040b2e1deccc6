"""Hostile records on the raw topic: hypothesis mixes junk with valid turns on memoryos.turns.

Anyone who can produce to ``memoryos.turns`` can write anything, so for any mix of valid turns
and junk (deep, wide, unicode, huge, non-finite, wrong types, wrong keys, forged markers):

- nothing raises out of a stage's ``process`` (in Faust that restarts the agent);
- every valid turn's page is stored;
- every other record is dead-lettered exactly once, from ``memoryos.turns``, with a reason
  that names the problem (the field, or what is wrong with the bytes).

Each hostile record carries the words its reason must contain, chosen from how it was built,
not by running the decoder. Examples are bounded so this runs in `make test`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from agents.runtime import MAX_RECORD_BYTES
from memory.ids import page_id
from schemas.codec import decode_turn_input
from schemas.errors import InvalidEvent
from schemas.topics import DLQ, TURNS, user_key
from schemas.turn import TurnEvent
from tests.support.fakes import Pipeline, make_deps

FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],  # no slow "explain"
)
USERS = ["ann", "bob.2", "c:3@x-y_z"]
NOT_JSON = "not valid JSON"
SEALED = "sealed record"  # junk that begins as a sealed record does (adapters/keyring.py)
NOT_OBJECT = "expected a JSON object"
# orjson reads the last two as floats, silently: the decoder must still refuse them
NON_FINITE = [b"NaN", b"Infinity", b"-Infinity", b"1e999", b"-1e400", b"18446744073709551616",
              b"-9223372036854775809"]  # fmt: skip
REQUIRED = ("user_id", "query", "response")  # turn_id and timestamp default (schemas.accept)

TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)  # any encodable text
FINITE = st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False)
JSON = st.recursive(
    st.none() | st.booleans() | FINITE | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)


@dataclass(frozen=True)
class Record:
    key: bytes | None
    value: bytes
    valid: tuple[str, str] | None = None  # (user, turn) of a valid turn
    names: tuple[str, ...] = ()  # a hostile record's reason names one of these


def base_turn(user: str, turn: str) -> dict[str, Any]:
    return {
        "user_id": user,
        "turn_id": turn,
        "query": "I like hiking in the mountains",
        "response": "Noted.",
        "timestamp": "2024-03-01T09:00:00Z",
    }


def hostile(value: bytes, *names: str, key: bytes | None = b"ann") -> Record:
    return Record(key, value, None, names)


def nested(levels: int, leaf: bytes = b"1") -> bytes:
    """``levels`` objects, one inside the other: meta's depth as the schema counts it."""
    return b'{"a":' * levels + leaf + b"}" * levels


@st.composite
def valid_turns(draw: st.DrawFn) -> dict[str, Any]:
    """Legal but unfriendly turns: any Unicode, long texts, odd times, deep and varied meta."""
    turn = base_turn(draw(st.sampled_from(USERS)), "placeholder")
    turn["query"] = draw(TEXT | st.sampled_from(["x" * 16_000, "é" * 16_000, "\u0000\u202e"]))
    turn["response"] = draw(TEXT)
    when = draw(st.datetimes(datetime(1970, 1, 2), datetime(2200, 1, 1)))
    turn["timestamp"] = draw(st.sampled_from([when.isoformat(), when.replace(tzinfo=UTC)]))
    if isinstance(turn["timestamp"], datetime):
        turn["timestamp"] = turn["timestamp"].isoformat()
    meta = draw(st.dictionaries(TEXT, JSON, max_size=4) | st.just(orjson.loads(nested(32))))
    if meta:
        turn["meta"] = meta
    if draw(st.booleans()):
        turn["channel"] = draw(st.text(st.characters(exclude_categories=("Cs",)), max_size=64))
    return turn


def wrong_type(field: str) -> st.SearchStrategy[Any]:
    if field == "timestamp":  # numbers are Unix times to pydantic: not a wrong type here
        return st.sampled_from([[], {}, "yesterday", True, "2024-13-45T99:00:00Z"])
    if field == "meta":
        return st.sampled_from([[], "meta", 3, True])
    return st.sampled_from([1, 2.5, True, [], {}, ["a"]]) | (
        st.none() if field in REQUIRED else st.sampled_from([0])
    )


@st.composite
def hostile_records(draw: st.DrawFn) -> Record:
    user = draw(st.sampled_from(USERS))
    turn = base_turn(user, "hostile")
    key = user_key(user)
    kind = draw(st.integers(0, 14))
    if kind == 0:  # bytes that are not a JSON object (hypothesis also tries the seal's magic)
        raw = draw(st.binary(max_size=64))
        try:
            parsed = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return hostile(raw, NOT_JSON, SEALED, key=key)
        if isinstance(parsed, dict):
            raw = b"[" + raw + b"]"  # still junk, now surely not an object
        return hostile(raw, NOT_JSON, NOT_OBJECT, key=key)
    if kind == 1:  # JSON, but not an object
        value = draw(JSON.filter(lambda v: not isinstance(v, dict)))
        return hostile(orjson.dumps(value), NOT_OBJECT, key=key)
    if kind == 2:  # nested deep as a whole, past any parser's patience or not
        depth = draw(st.integers(2, 5000))
        raw = draw(st.sampled_from([b"[" * depth + b"]" * depth, nested(depth)]))
        return hostile(raw, NOT_JSON, NOT_OBJECT, "user_id", "a", key=key)
    if kind == 3:  # a deep meta
        depth = draw(st.integers(33, 3000))
        raw = orjson.dumps(turn)[:-1] + b',"meta":' + nested(depth) + b"}"
        return hostile(raw, "meta", NOT_JSON, key=key)
    if kind == 4:  # wide: unknown fields, a few odd names and many plain ones
        odd = draw(st.dictionaries(TEXT.filter(lambda k: k.strip() != ""), JSON, max_size=3))
        plain = {f"field{i}": i for i in range(draw(st.integers(0, 2000)))}
        extra = {k: v for k, v in (odd | plain).items() if k not in TurnEvent.model_fields}
        extra = extra or {"colour": "blue"}
        return hostile(orjson.dumps({**turn, **extra}), *(k[:40] for k in extra), key=key)
    if kind == 5:  # a wide meta, over its byte budget
        width = draw(st.integers(400, 2000))
        meta = {f"k{i}": "vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv" for i in range(width)}
        return hostile(orjson.dumps({**turn, "meta": meta}), "meta", key=key)
    if kind == 6:  # huge: over the record limit
        size = draw(st.integers(MAX_RECORD_BYTES + 1, MAX_RECORD_BYTES * 4))
        return hostile(b'{"pad":"' + b"x" * size + b'"}', "at most", key=key)
    if kind == 7:  # huge text
        field = draw(st.sampled_from(["query", "response"]))
        length = draw(st.integers(16_001, 60_000))
        return hostile(orjson.dumps({**turn, field: "y" * length}), field, key=key)
    if kind == 8:  # non-finite and out-of-range numbers (orjson cannot write them: raw bytes)
        number = draw(st.sampled_from(NON_FINITE))
        raw = orjson.dumps(turn)[:-1] + b',"meta":{"n":' + number + b"}}"
        return hostile(raw, "meta", NOT_JSON, key=key)
    if kind == 9:  # a wrong type in one field
        fields = [*REQUIRED, "turn_id", "timestamp", "meta", "channel", "assistant_id"]
        field = draw(st.sampled_from(fields))
        value = draw(wrong_type(field))
        return hostile(orjson.dumps({**turn, field: value}), field, key=key)
    if kind == 10:  # a required field missing
        field = draw(st.sampled_from(REQUIRED))
        return hostile(orjson.dumps({k: v for k, v in turn.items() if k != field}), field, key=key)
    if kind == 11:  # the record key is not the user: it would break the user's order
        other = draw(st.sampled_from([None, b"", b"mallory", user_key(user) + b" "]))
        return hostile(orjson.dumps(turn), "key", key=other)
    if kind == 12:  # unicode that cannot be stored: lone surrogates, bad UTF-8, bad id chars
        raw = draw(st.sampled_from([
            orjson.dumps(turn).replace(b"hiking", b"\\ud800hiking"),
            orjson.dumps(turn).replace(b"hiking", b"\xff\xfehiking"),
        ]))  # fmt: skip
        bad_id = draw(st.sampled_from(["ännä", "a b", "", "x" * 129, "-ann", "ann\n"]))
        if draw(st.booleans()):
            return hostile(orjson.dumps({**turn, "user_id": bad_id}), "user_id", key=key)
        return hostile(raw, "query", NOT_JSON, key=key)
    if kind == 13:  # a forged forget marker for a user with real turns
        at = draw(st.floats(0, 2e9))
        marker = {"kind": "forget", "user_id": user, "at": at}
        return hostile(orjson.dumps(marker), "forget marker refused", key=key)
    # a broken forget marker
    marker = draw(st.sampled_from([{"kind": "forget"}, {"kind": "forget", "user_id": user,
                                                        "at": "now"}]))  # fmt: skip
    return hostile(orjson.dumps(marker), "user_id", "at", key=key)


def as_records(valid: list[dict[str, Any]]) -> list[Record]:
    records = []
    for index, turn in enumerate(valid):
        turn = {**turn, "turn_id": f"t{index:03d}"}
        records.append(Record(user_key(turn["user_id"]), orjson.dumps(turn), (turn["user_id"],
                              turn["turn_id"])))  # fmt: skip
    return records


MIXES = st.tuples(
    st.lists(valid_turns(), min_size=1, max_size=6),
    st.lists(hostile_records(), min_size=1, max_size=8),
).flatmap(lambda both: st.permutations(as_records(both[0]) + both[1]))


@FUZZ
@given(MIXES)
def test_junk_on_the_turns_topic_is_dead_lettered_and_valid_turns_go_on(
    records: list[Record],
) -> None:
    asyncio.run(run_mix(records))


async def run_mix(records: list[Record]) -> None:
    pipeline = Pipeline(await make_deps())
    for record in records:
        await pipeline.send(TURNS, record.key, record.value)  # type: ignore[arg-type]
    await pipeline.drain()  # raises if any stage's process() raised

    dead = {int(d.headers["source-offset"]): d for d in pipeline.topics[DLQ]}
    assert len(dead) == len(pipeline.topics[DLQ]), "a record was dead-lettered twice"
    assert {d.headers["source-topic"] for d in dead.values()} <= {TURNS.encode()}
    hostile_at = {i for i, record in enumerate(records) if record.valid is None}
    assert set(dead) == hostile_at, "dead letters are exactly the hostile records"
    for offset, letter in dead.items():
        reason = letter.headers["reason"].decode()
        assert letter.headers["error"] in (b"invalid", b"too_large"), reason
        names = records[offset].names
        assert any(name in reason for name in names), f"{reason!r} names none of {names}"

    stored = await pipeline.deps.repo.page_tiers(
        [page_id(*record.valid) for record in records if record.valid]
    )
    missing = [r.valid for r in records if r.valid and page_id(*r.valid) not in stored]
    assert not missing, f"valid turns without a page: {missing}"


def test_an_integer_beyond_64_bits_is_refused_on_the_topic_as_over_http() -> None:
    """Found by the fuzz test: orjson read 2**64 as the float 1.8446744073709552e19."""
    raw = orjson.dumps(base_turn("ann", "t1"))[:-1] + b',"meta":{"n":18446744073709551616}}'
    with pytest.raises(InvalidEvent, match=r"meta\.n: integer 18446744073709551616 does not fit"):
        decode_turn_input(raw)
    phone = orjson.dumps({**base_turn("ann", "t1"), "meta": {"tel": "00123456789012345678901"}})
    turn = decode_turn_input(phone)
    assert isinstance(turn, TurnEvent)
    assert turn.meta == {"tel": "00123456789012345678901"}
