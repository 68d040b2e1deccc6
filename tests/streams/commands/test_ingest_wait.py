"""`memoryos ingest --wait`: following placement through the memory API (a fake one here)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import httpx

from streams.commands.ingest import Sent, placed_summary, summary
from streams.commands.ingest_wait import Placed, placed_turns, wait_placed
from streams.progress import NO_PROGRESS, LineProgress


def memory(short_term: list[str], mid_term: tuple[list[str], ...] = ()) -> dict[str, Any]:
    """A memory document with pages of these turn ids (other fields as the API has them)."""

    def page(turn_id: str) -> dict[str, Any]:
        return {"page_id": f"p-{turn_id}", "turn_id": turn_id, "query": "q", "response": "r"}

    return {
        "user_id": "u",
        "short_term": [page(t) for t in short_term],
        "mid_term": [{"segment_id": "s", "pages": [page(t) for t in pages]} for pages in mid_term],
        "persona": {},
    }


def service(rounds: dict[str, list[Any]]) -> tuple[httpx.MockTransport, list[str]]:
    """Each user's answers in turn (the last one repeats); an int answer is an HTTP status."""
    asked: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        user = request.url.path.split("/")[3]
        asked.append(user)
        answers = rounds[user]
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        if isinstance(answer, int):
            return httpx.Response(answer, json={"error": "busy"})
        return httpx.Response(200, json=answer)

    return httpx.MockTransport(handle), asked


async def wait(
    turns: dict[str, set[str]], transport: httpx.AsyncBaseTransport, stall_s: float = 30.0
) -> Placed:
    report = Placed.expecting(turns)
    await wait_placed(
        "http://memory", None, report, NO_PROGRESS, stall_s, every_s=0, transport=transport
    )
    return report


async def test_turns_are_counted_once_in_the_tier_they_were_first_seen_in() -> None:
    transport, asked = service(
        {
            "alice": [memory(["t1"]), memory(["t3"], (["t1", "t2"],))],
            "bob": [memory([]), memory(["t1"])],
        }
    )
    placed = await wait({"alice": {"t1", "t2", "t3"}, "bob": {"t1"}}, transport)
    assert (placed.expected, placed.placed) == (4, 4)
    assert (placed.short_term, placed.mid_term) == (3, 1)
    assert placed.missing == {}
    assert not placed.gave_up
    assert sorted(asked) == ["alice", "alice", "bob", "bob"]  # done users are not asked again


async def test_it_gives_up_when_nothing_new_is_placed() -> None:
    transport, _ = service({"alice": [memory(["t1"])]})
    placed = await wait({"alice": {"t1", "t2"}}, transport, stall_s=0)
    assert placed.placed == 1
    assert placed.missing == {"alice": {"t2"}}
    assert placed.gave_up == "nothing new placed for 0 s"


async def test_a_service_it_cannot_reach_ends_the_wait_at_once() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    placed = await wait({"alice": {"t1"}}, httpx.MockTransport(refuse))
    assert placed.gave_up.startswith("cannot read memory from http://memory: ")
    assert placed.placed == 0


async def test_a_service_error_after_the_first_answer_is_waited_out() -> None:
    transport, _ = service({"alice": [memory([]), 503, memory(["t1"])]})
    placed = await wait({"alice": {"t1"}}, transport)
    assert (placed.placed, placed.gave_up) == (1, "")


async def test_the_wait_reports_as_a_step() -> None:
    transport, _ = service({"alice": [memory(["t1", "t2"])]})
    out = io.StringIO()
    progress = LineProgress("ingest", out)
    await wait_placed(
        "http://memory", None, Placed.expecting({"alice": {"t1", "t2"}}), progress, 30, 0, transport
    )
    progress.close()
    assert out.getvalue().splitlines()[0] == "ingest: placed: started (2 turns)"
    assert out.getvalue().splitlines()[-1].startswith("ingest: placed: done, 2 turns in ")


def test_placed_turns_reads_both_tiers() -> None:
    assert placed_turns(memory(["a"], (["b"], ["c"]))) == {
        "a": "short-term",
        "b": "mid-term",
        "c": "mid-term",
    }


def test_the_summary_has_one_fact_per_line() -> None:
    sent = Sent(Path("turns.jsonl"))
    sent.lines, sent.sent, sent.acknowledged, sent.invalid = 42, 40, 39, 2
    sent.failed, sent.first_failure = 1, "KafkaTimeoutError()"
    sent.bytes, sent.seconds = 8192, 2.0
    assert summary(sent) == [
        "sent 40 turns to memoryos.turns in 2.0 s (20.0 turns/s, 4.0 kB/s)",
        "acknowledged 39 of 40 turns by the broker",
        "invalid 2 of 42 lines",
        "failed 1 sends; first: KafkaTimeoutError()",
    ]
    placed = Placed(expected=39, placed=30, short_term=14, mid_term=16, seconds=61.0)
    placed.gave_up = "nothing new placed for 300 s"
    assert placed_summary(placed) == (
        "placed 30 of 39 turns in 61.0 s (14 short-term, 16 mid-term); "
        "gave up: nothing new placed for 300 s"
    )
