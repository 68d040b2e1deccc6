"""Retrieval visits go out off the request's path (service/visits.py)."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from adapters.metrics import Metrics
from schemas.topics import MTM, TURNS, user_key
from service import visits as visits_module
from service.response import ResponseService
from service.visits import VisitSender
from streams.roll import GatedSink
from tests.support.stacks import eventually


class HeldSink:
    """A send that waits until the test lets it go, or fails."""

    def __init__(self, fail: bool = False) -> None:
        self.release = asyncio.Event()
        self.sent: list[tuple[str, bytes, bytes]] = []
        self.fail = fail

    async def send(self, topic: str, key: bytes, value: bytes) -> None:
        await self.release.wait()
        if self.fail:
            raise ConnectionError("broker gone")
        self.sent.append((topic, key, value))


def lost(metrics: Metrics, reason: str) -> float:
    value = metrics.registry.get_sample_value(
        "memoryos_retrieval_visits_lost_total", {"reason": reason}
    )
    return value or 0.0


async def test_a_visit_is_sent_after_send_returns() -> None:
    sink, metrics = HeldSink(), Metrics()
    visits = VisitSender(sink, metrics)
    visits.send("ann", ["s1", "s2"], 1_700_000_000.0)
    assert visits.in_flight == 1, "send returned while the sink still holds the visit"
    sink.release.set()
    await visits.close(5.0)
    [(topic, key, value)] = sink.sent
    assert (topic, key) == (MTM, user_key("ann"))
    assert orjson.loads(value)["segment_ids"] == ["s1", "s2"]


async def test_a_failed_send_is_counted_not_raised() -> None:
    sink, metrics = HeldSink(fail=True), Metrics()
    visits = VisitSender(sink, metrics)
    visits.send("ann", ["s1"], 1.0)
    sink.release.set()
    await visits.close(5.0)
    assert lost(metrics, "send") == 1


async def test_a_backlog_past_the_bound_is_dropped_and_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(visits_module, "MAX_QUEUED", 2)
    sink, metrics = HeldSink(), Metrics()
    visits = VisitSender(sink, metrics)
    for user in ("ann", "bob", "cy"):
        visits.send(user, ["s1"], 1.0)
    visits.send("ann", ["s2"], 1.5)  # joins ann's record
    for _ in range(3):  # the records leave their turn of the loop for the held sink
        await asyncio.sleep(0)
    assert visits.in_flight == 2
    assert lost(metrics, "backlog") == 1
    await visits.close(0.01)  # the sink never lets go: both are cancelled, 3 visits in them
    assert lost(metrics, "stopped") == 3
    assert visits.in_flight == 0
    visits.send("ann", ["s1"], 2.0)  # after close: not started, counted
    assert visits.in_flight == 0
    assert lost(metrics, "stopped") == 4


async def test_a_users_visits_within_the_linger_go_out_as_one_record_with_counts() -> None:
    sink, metrics = HeldSink(), Metrics()
    sink.release.set()
    visits = VisitSender(sink, metrics, linger_s=0.2)
    visits.send("ann", ["s1", "s2"], 10.0)
    visits.send("ann", ["s1", "s1", "s3"], 12.0)  # an id twice in one retrieval counts once
    visits.send("bob", ["s9"], 11.0)
    visits.send("ann", ["s1"], 11.0)  # an earlier time does not move the access time back
    assert visits.in_flight == 2
    await asyncio.sleep(0.05)
    assert sink.sent == [], "sent before the linger ended"
    # after the linger, as soon as the loop gets to it (a loaded machine can take a while)
    await eventually(lambda: len(sink.sent) == 2, timeout_s=10, every_s=0.02)
    by_user = {orjson.loads(value)["user_id"]: orjson.loads(value) for _, _, value in sink.sent}
    assert by_user["ann"]["segment_ids"] == ["s1", "s2", "s3"]
    assert by_user["ann"]["counts"] == {"s1": 3}
    assert by_user["ann"]["at"] == 12.0
    assert by_user["ann"]["times"] == {"s2": 10.0}, "each segment keeps its own last retrieval"
    assert by_user["bob"]["segment_ids"] == ["s9"]
    assert by_user["bob"]["counts"] is None
    visits.send("ann", ["s2"], 13.0)  # after the record went: a record of its own
    await visits.close(5.0)  # a stop sends what lingers at once
    assert len(sink.sent) == 3
    assert orjson.loads(sink.sent[-1][2])["segment_ids"] == ["s2"]


def test_every_reason_is_exported_at_zero() -> None:
    metrics = Metrics()
    for reason in ("send", "backlog", "stopped"):
        assert (
            metrics.registry.get_sample_value(
                "memoryos_retrieval_visits_lost_total", {"reason": reason}
            )
            == 0.0
        )


async def test_a_retrieve_answers_while_a_roll_holds_the_gate(service: ResponseService) -> None:
    """The gate of a roll (journaled: turns are dropped, other sends wait): the retrieve used
    to wait for it and, past its bound, fail with a 503."""
    delivered: list[str] = []

    async def send(topic: str, key: bytes, value: bytes) -> None:
        delivered.append(topic)

    gate = GatedSink(send, journaled=True, timeout_s=60.0, closed=True)
    service.sink = gate
    service.visits = VisitSender(gate, service.deps.metrics)
    memory = await asyncio.wait_for(service.retrieve("ann", "sourdough bread"), 5.0)
    assert memory.segment_ids, "the retrieve hit segments: there is a visit to send"
    assert delivered == []
    assert service.visits.in_flight == 1
    gate.open(send)
    await service.visits.close(5.0)
    assert delivered == [MTM]
    assert TURNS not in delivered


async def test_a_forgotten_users_lingering_visits_are_not_sent() -> None:
    sink, metrics = HeldSink(), Metrics()
    sink.release.set()
    visits = VisitSender(sink, metrics, linger_s=60.0)
    visits.send("ann", ["s1"], 1.0)
    visits.send("bob", ["s2"], 1.0)
    visits.forget("ann")
    visits.send("ann", ["s3"], 2.0)  # after the DELETE: a new record
    await visits.close(5.0)
    sent = [orjson.loads(value) for _, _, value in sink.sent]
    assert sorted((v["user_id"], v["segment_ids"]) for v in sent) == [
        ("ann", ["s3"]),
        ("bob", ["s2"]),
    ]


async def test_many_users_linger_past_the_send_bound_and_past_the_linger_bound_go_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """More users' records at once than sends may run (a flush, a stop, users past the
    lingering bound, whose visits go without lingering): they wait for a slot, none is lost."""
    monkeypatch.setattr(visits_module, "MAX_IN_FLIGHT", 2)
    monkeypatch.setattr(visits_module, "MAX_LINGERING", 3)
    sink, metrics = HeldSink(), Metrics()
    sink.release.set()
    visits = VisitSender(sink, metrics, linger_s=60.0)
    for index in range(5):
        visits.send(f"u{index}", ["s1"], 1.0)
    await asyncio.sleep(0.05)
    assert sorted(orjson.loads(v)["user_id"] for _, _, v in sink.sent) == ["u3", "u4"]
    await visits.flush(5.0)  # the demo's: what lingers goes now, and is sent on return
    assert len(sink.sent) == 5
    assert lost(metrics, "backlog") == 0
    await visits.close(1.0)
