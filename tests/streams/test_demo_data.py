"""The bundled demo conversation (``streams/data``) used by ``memoryos up --demo``."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import streams
from schemas.codec import decode
from schemas.turn import TurnEvent

DATA = Path(streams.__file__).resolve().parent / "data"
KEYS = {"user_id", "turn_id", "query", "response", "timestamp", "channel", "meta"}
CHANNELS = {"web", "sms", "app"}


def lines() -> list[str]:
    text = (DATA / "demo.jsonl").read_text(encoding="utf-8")
    return [line for line in text.splitlines() if line.strip()]


def turns_by_user() -> dict[str, list[TurnEvent]]:
    by_user: dict[str, list[TurnEvent]] = defaultdict(list)
    for line in lines():
        turn = decode(TurnEvent, line)
        by_user[turn.user_id].append(turn)
    return dict(by_user)


def questions() -> list[dict[str, Any]]:
    loaded = json.loads((DATA / "demo_questions.json").read_text(encoding="utf-8"))
    assert isinstance(loaded, list)
    return loaded


def test_every_line_is_a_turn_event_with_exactly_the_documented_keys() -> None:
    raw = lines()
    assert 60 <= len(raw) <= 80
    for number, line in enumerate(raw, 1):
        decode(TurnEvent, line)  # raises InvalidEvent naming the field
        data = json.loads(line)
        assert set(data) == KEYS, f"line {number}"
        assert data["channel"] in CHANNELS, f"line {number}"
        assert data["timestamp"].endswith("Z"), f"line {number}"
        assert isinstance(data["meta"], dict), f"line {number}"
        assert data["query"].strip(), f"line {number}"
        assert data["response"].strip(), f"line {number}"


def test_two_users() -> None:
    assert set(turns_by_user()) == {"alice", "bob"}


@pytest.mark.parametrize("user_id", ["alice", "bob"])
def test_turn_ids_are_unique_per_user(user_id: str) -> None:
    ids = [turn.turn_id for turn in turns_by_user()[user_id]]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("user_id", ["alice", "bob"])
def test_timestamps_do_not_go_backwards(user_id: str) -> None:
    stamps = [turn.timestamp for turn in turns_by_user()[user_id]]
    assert stamps == sorted(stamps)


@pytest.mark.parametrize("user_id", ["alice", "bob"])
def test_sessions_span_at_least_four_days(user_id: str) -> None:
    turns = turns_by_user()[user_id]
    assert 30 <= len(turns) <= 40
    assert len({turn.timestamp.date() for turn in turns}) >= 4


def test_questions_cover_both_users() -> None:
    asked = questions()
    assert {question["user_id"] for question in asked} == {"alice", "bob"}
    for question in asked:
        assert set(question) == {"user_id", "question", "expected"}
        assert question["question"].strip()
        assert question["expected"].strip()


@pytest.mark.parametrize(
    "question", questions(), ids=lambda question: f"{question['user_id']}:{question['expected']}"
)
def test_expected_answer_occurs_in_that_users_turns(question: dict[str, Any]) -> None:
    turns = turns_by_user()[question["user_id"]]
    text = "\n".join(f"{turn.query}\n{turn.response}" for turn in turns).casefold()
    assert question["expected"].casefold() in text
