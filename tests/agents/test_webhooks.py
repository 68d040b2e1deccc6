"""The webhooks stage against real local receivers over HTTP: signed as Standard Webhooks'
own library verifies, retried on 5xx until delivered once, never held up by a receiver that
does not answer, bounded against redirects and huge slow bodies, refusals dead-lettered with
their reason, and a replayed dead letter delivered to its webhook only."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from adapters.events_out import SqliteOutbox, encode
from adapters.metrics import Metrics
from adapters.ports import SystemClock
from adapters.settings import Settings, load_settings
from adapters.webhook_http import HttpPoster
from agents.policy import default_policy
from agents.runtime import BatchRunner, DeadLetterSink, KeyedDispatcher
from agents.webhooks import WEBHOOK_HEADER, WebhookStage
from memory.events import page_stored, user_forgotten
from schemas.codec import decode
from schemas.events import MemoryEvent
from schemas.records import ChainLink, Page
from schemas.topics import EVENTS, user_key
from tests.support.fakes import FakeEvent, Sent
from tests.support.receiver import FLAKY_FAILURES, SECRET, receiving, verified

pytestmark = pytest.mark.asyncio

Work = Callable[[], Awaitable[None]]


def page_event(user: str, seq: int) -> MemoryEvent:
    page = Page(
        page_id=f"p-{user}-{seq}",
        user_id=user,
        turn_id=f"t{seq}",
        query="q",
        response="r",
        timestamp=datetime(2026, 1, 1, tzinfo=UTC),
        chain=ChainLink(chain_id="c1"),
        seq=seq,
    )
    return page_stored(page, 1.0)


class Harness:
    """A webhooks stage as the app builds it, fed records as Faust would hand them over."""

    def __init__(self, hooks: list[dict[str, Any]], tmp_path: Path, **settings: Any) -> None:
        self.settings: Settings = load_settings(
            webhooks=orjson.dumps(hooks).decode(),
            webhook_attempts=settings.pop("webhook_attempts", 4),
            webhook_backoff_s=settings.pop("webhook_backoff_s", 0.01),
            webhook_timeout_s=settings.pop("webhook_timeout_s", 1.0),
            data_dir=tmp_path,
            **settings,
        )
        self.metrics = Metrics()
        self.dead: list[Sent] = []
        self.acked: list[str] = []
        self.outbox = SqliteOutbox(tmp_path / "events.sqlite3")

        async def send_dead(key: bytes | None, value: bytes, headers: Any = None) -> None:
            self.dead.append(Sent(key, value, dict(headers or {})))

        sink = DeadLetterSink("webhooks", send_dead, self.metrics)
        runner: BatchRunner[MemoryEvent] = BatchRunner(
            "webhooks",
            lambda raw, _: decode(MemoryEvent, raw),
            lambda event: event.subject,
            sink,
            self.metrics,
            default_policy(2, base_delay_s=0.0),
        )
        self.poster = HttpPoster()
        self.stage = WebhookStage(
            self.settings.webhook_list,
            self.poster,
            runner,
            self.settings,
            self.metrics,
            SystemClock(),
            self.outbox,
            lambda item: self.acked.append(item.record.id),
            self.last_delete,
        )
        self.deleted_ms: dict[str, int] = {}
        self.dispatcher: KeyedDispatcher[Work] = KeyedDispatcher(self.settings.max_pending_events)
        self.offset = 0

    async def last_delete(self, user_id: str) -> int:
        return self.deleted_ms.get(user_id, 0)

    async def feed(self, events: list[MemoryEvent], headers: Any = None) -> None:
        await self.outbox.keep([(e.id, e.subject, encode(e)) for e in events])
        records = []
        for event in events:
            message = SimpleNamespace(
                key=user_key(event.subject),
                topic=EVENTS,
                partition=0,
                offset=self.offset,
                headers=headers,
            )
            self.offset += 1
            records.append(FakeEvent(message, encode(event)))
        for item in await self.stage.prepare(records):
            await self.stage.submit(self.dispatcher, item)

    async def finished(self, timeout_s: float = 60.0) -> None:
        """Every delivery ended (a guard against a hang, not a measure of speed)."""
        await asyncio.wait_for(self.dispatcher.join(), timeout_s)

    async def close(self) -> None:
        await self.dispatcher.close()
        await self.poster.close()
        self.outbox.close()

    def count(self, outcome: str) -> float:
        total = 0.0
        for metric in self.metrics.registry.collect():
            for sample in metric.samples:
                wanted = sample.name == "memoryos_webhook_deliveries_total"
                if wanted and sample.labels["outcome"] == outcome:
                    total += sample.value
        return total


async def until(check: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "not within the test's patience"
        await asyncio.sleep(0.02)


async def test_each_event_arrives_signed_in_the_users_order_and_is_settled(
    tmp_path: Path,
) -> None:
    with receiving() as receiver:
        harness = Harness([receiver.hook("/ok")], tmp_path)
        try:
            events = [page_event("ann", seq) for seq in range(1, 6)]
            await harness.feed(events)
            await harness.finished()
            assert await harness.outbox.pending() == [], "delivered events are settled"
        finally:
            await harness.close()
        got = receiver.at("/ok")
        assert [r.webhook_id for r in got] == [e.id for e in events]
        for received in got:
            payload = verified(received)  # Standard Webhooks' library checks the signature
            assert payload["id"] == received.webhook_id
            assert received.headers["content-type"] == "application/cloudevents+json"
        assert [r.event["data"]["seq"] for r in got] == [1, 2, 3, 4, 5]
        assert harness.acked == [e.id for e in events]
        assert harness.count("delivered") == 5


async def test_a_signature_made_with_another_secret_does_not_verify(tmp_path: Path) -> None:
    from standardwebhooks.webhooks import WebhookVerificationError

    with receiving() as receiver:
        harness = Harness([receiver.hook("/ok")], tmp_path)
        try:
            await harness.feed([page_event("ann", 1)])
            await harness.finished()
        finally:
            await harness.close()
        (received,) = receiver.at("/ok")
        with pytest.raises(WebhookVerificationError):
            verified(received, "whsec_" + "A" * 32)
        tampered = received.body.replace(b'"seq":1', b'"seq":2')
        with pytest.raises(WebhookVerificationError):
            verified(type(received)(received.path, received.headers, tampered))


async def test_a_receiver_failing_three_times_gets_each_event_once(tmp_path: Path) -> None:
    with receiving() as receiver:
        harness = Harness([receiver.hook("/flaky")], tmp_path, webhook_attempts=6)
        try:
            events = [page_event("ann", 1), page_event("bob", 1), page_event("ann", 2)]
            await harness.feed(events)
            await harness.finished()
        finally:
            await harness.close()
        got = receiver.at("/flaky")
        assert sorted(r.webhook_id for r in got) == sorted(e.id for e in events)
        for event in events:
            assert receiver.attempts[("/flaky", event.id)] == FLAKY_FAILURES + 1
        assert harness.count("retried") == FLAKY_FAILURES * len(events)
        assert harness.dead == []


async def test_a_receiver_that_never_answers_holds_up_no_other_user_or_webhook(
    tmp_path: Path,
) -> None:
    """``/picky`` never answers ann's events: bob's reach it, and ann's reach ``/ok``, while
    ann's deliveries to ``/picky`` still wait for their first answer."""
    with receiving() as receiver:
        harness = Harness(
            [receiver.hook("/picky"), receiver.hook("/ok")],
            tmp_path,
            webhook_timeout_s=120.0,
        )
        try:
            ann = [page_event("ann", seq) for seq in (1, 2)]
            bob = [page_event("bob", seq) for seq in (1, 2)]
            await harness.feed([ann[0], bob[0], ann[1], bob[1]])
            await until(lambda: len(receiver.at("/picky")) == 2 and len(receiver.at("/ok")) == 4)
            assert [r.webhook_id for r in receiver.at("/picky")] == [e.id for e in bob]
            assert receiver.attempts[("/picky", ann[1].id)] == 0, "ann's order kept: 2 waits"
            # a receiver records a request before it answers: the ack follows the answer
            await until(lambda: len(harness.acked) == len(bob))
            assert harness.acked == [e.id for e in bob], "ann's events are not finished"
        finally:
            await harness.close()


async def test_a_receiver_that_times_out_every_time_is_dead_lettered_with_its_reason(
    tmp_path: Path,
) -> None:
    with receiving() as receiver:
        harness = Harness([receiver.hook("/hang")], tmp_path, webhook_timeout_s=0.3)
        try:
            event = page_event("ann", 1)
            await harness.feed([event])
            await harness.finished()
        finally:
            await harness.close()
        (letter,) = harness.dead
        assert letter.headers["error"] == b"webhook"
        assert b"no answer within" in letter.headers["reason"]
        assert letter.headers["attempts"] == b"4"
        hook = harness.settings.webhook_list[0]
        assert letter.headers[WEBHOOK_HEADER] == hook.ref.encode(), "named by its digest"
        assert hook.url.encode() not in b"".join(letter.headers.values())
        assert orjson.loads(letter.value)["id"] == event.id
        assert harness.count("dead_letter") == 1
        assert harness.acked == [event.id], "finished: its failure is in the dead letters"


@pytest.mark.parametrize(
    ("path", "why"),
    [("/redirect", b"HTTP 302 (a redirect is not followed)"), ("/gone", b"HTTP 410")],
)
async def test_a_refusal_is_dead_lettered_at_once_and_a_redirect_is_not_followed(
    tmp_path: Path, path: str, why: bytes
) -> None:
    with receiving() as receiver:
        harness = Harness([receiver.hook(path)], tmp_path)
        try:
            event = page_event("ann", 1)
            await harness.feed([event])
            await harness.finished()
        finally:
            await harness.close()
        assert receiver.attempts[(path, event.id)] == 1, "one request: no loop, no retry"
        (letter,) = harness.dead
        assert why in letter.headers["reason"]
        assert letter.headers["attempts"] == b"1"


async def test_a_huge_body_answered_slowly_is_not_read(tmp_path: Path) -> None:
    """The status decides; the 64 MiB the receiver trickles after it are never waited for."""
    with receiving() as receiver:
        harness = Harness([receiver.hook("/huge")], tmp_path, webhook_timeout_s=30.0)
        try:
            await harness.feed([page_event("ann", 1)])
            await harness.finished()
        finally:
            await harness.close()
        assert harness.count("delivered") == 1
        assert harness.dead == []


async def test_a_webhook_gets_only_the_types_it_asked_for(tmp_path: Path) -> None:
    with receiving() as receiver:
        forgotten = ["memory.user.forgotten"]
        harness = Harness([receiver.hook("/ok", forgotten), receiver.hook("/slow")], tmp_path)
        try:
            events = [page_event("ann", 1), user_forgotten("ann", 5.0, 6.0)]
            await harness.feed(events)
            await harness.finished()
        finally:
            await harness.close()
        assert [r.event["type"] for r in receiver.at("/ok")] == forgotten
        assert len(receiver.at("/slow")) == 2
        assert harness.acked == [e.id for e in events]


async def test_a_replayed_dead_letter_goes_to_its_webhook_only(tmp_path: Path) -> None:
    with receiving() as receiver:
        harness = Harness([receiver.hook("/ok"), receiver.hook("/slow")], tmp_path)
        try:
            event = page_event("ann", 1)
            slow = harness.settings.webhook_list[1]
            await harness.feed([event], headers=[(WEBHOOK_HEADER, slow.ref.encode())])
            await harness.finished()
        finally:
            await harness.close()
        assert receiver.at("/ok") == []
        assert [r.webhook_id for r in receiver.at("/slow")] == [event.id]


async def test_the_verification_in_docs_api_accepts_our_requests_and_refuses_forgeries(
    tmp_path: Path,
) -> None:
    """The few lines of Python docs/api.md gives a receiver, run as written."""
    docs = (Path(__file__).parents[2] / "docs" / "api.md").read_text()
    code = next(b for b in docs.split("```python\n")[1:] if "def verify(" in b).split("```")[0]
    scope: dict[str, Any] = {}
    exec(compile(code, "docs/api.md", "exec"), scope)
    verify = scope["verify"]
    with receiving() as receiver:
        harness = Harness([receiver.hook("/ok")], tmp_path)
        try:
            await harness.feed([page_event("ann", 1)])
            await harness.finished()
        finally:
            await harness.close()
        (received,) = receiver.at("/ok")
    assert verify(SECRET, received.headers, received.body)
    assert not verify(SECRET, received.headers, received.body + b" ")
    assert not verify("whsec_" + "A" * 32, received.headers, received.body)
    stale = {**received.headers, "webhook-timestamp": "1000000000"}
    assert not verify(SECRET, stale, received.body)


async def test_a_replayed_dead_letter_of_a_user_forgotten_since_is_not_delivered(
    tmp_path: Path,
) -> None:
    """It would reach the receiver after the receipt of the erasure."""
    with receiving() as receiver:
        harness = Harness([receiver.hook("/ok")], tmp_path)
        try:
            before, after = page_event("ann", 1), page_event("bob", 1)
            harness.deleted_ms["ann"] = round(before.time.timestamp() * 1000) + 1
            ref = harness.settings.webhook_list[0].ref.encode()
            await harness.feed([before, after], headers=[(WEBHOOK_HEADER, ref)])
            await harness.finished()
        finally:
            await harness.close()
        assert [r.webhook_id for r in receiver.at("/ok")] == [after.id]
        assert harness.acked == [before.id, after.id], "finished all the same"


async def test_a_dead_letter_keeps_no_words_and_a_failing_delivery_is_never_dropped(
    tmp_path: Path,
) -> None:
    with receiving() as receiver:
        harness = Harness([receiver.hook("/gone"), receiver.hook("/ok")], tmp_path)

        async def broken(*_: Any) -> None:
            raise RuntimeError("a bug in delivery")

        try:
            event = page_event("ann", 1)  # its data holds the query and response
            assert event.data.query == "q"  # type: ignore[union-attr]
            await harness.feed([event])
            await harness.finished()
            harness.stage.deliver = broken  # type: ignore[method-assign]
            await harness.feed([page_event("ann", 2)])
            await harness.finished()
        finally:
            await harness.close()
        gone, *bugs = harness.dead
        assert orjson.loads(gone.value)["data"]["query"] is None
        assert len(bugs) == 2, "each webhook's failed delivery is a dead letter"
        assert all(b"a bug in delivery" in letter.headers["reason"] for letter in bugs)


async def test_a_failing_receiver_holding_its_share_does_not_hold_up_another_webhook(
    tmp_path: Path,
) -> None:
    """Four places for two webhooks: ``/hang`` (down) holds its two, and its next events go to
    the dead letters at once instead of waiting for a place; ``/ok`` gets every event."""
    with receiving() as receiver:
        harness = Harness(
            [receiver.hook("/hang"), receiver.hook("/ok")],
            tmp_path,
            max_pending_events=4,
            webhook_timeout_s=0.5,
            webhook_attempts=2,
        )
        try:
            events = [page_event(f"u{n}", 1) for n in range(12)]  # one user each: no order
            await harness.feed(events)
            await until(lambda: len(receiver.at("/ok")) == len(events))
            await harness.finished()
            kept = await harness.outbox.pending()
        finally:
            await harness.close()
        assert len(harness.dead) == len(events), "every event for /hang is a dead letter"
        spilled = [d for d in harness.dead if b"already wait" in d.headers["reason"]]
        assert spilled, "some went at once, without waiting for a place"
        # failed for a webhook: kept in the outbox, sent again at the next start
        assert sorted(entry.page_id for entry in kept) == sorted(e.id for e in events)


async def test_a_delivery_cut_by_a_stop_is_neither_settled_nor_acknowledged(
    tmp_path: Path,
) -> None:
    """A stop cancels the deliveries under way: their events stay in the outbox and are not
    acknowledged, so the restart delivers them (a crash leaves them so anyway)."""
    with receiving() as receiver:
        harness = Harness([receiver.hook("/hang")], tmp_path, webhook_timeout_s=60.0)
        try:
            event = page_event("ann", 1)
            await harness.feed([event])
            await until(lambda: receiver.attempts[("/hang", event.id)] == 1)
            await harness.dispatcher.close()  # what the agent's stop does
            kept = await harness.outbox.pending()
        finally:
            await harness.close()
        assert [entry.page_id for entry in kept] == [event.id]
        assert harness.acked == []
        assert harness.dead == []


async def test_a_failure_is_not_undone_by_another_webhooks_later_success(tmp_path: Path) -> None:
    """``/gone`` refuses at once while ``/slow`` is still answering: the event stays in the
    outbox for ``/gone``, whatever ``/slow`` answers after."""
    with receiving(slow_s=0.3) as receiver:
        harness = Harness([receiver.hook("/slow"), receiver.hook("/gone")], tmp_path)
        try:
            event = page_event("ann", 1)
            await harness.feed([event])
            await harness.finished()
            kept = await harness.outbox.pending()
        finally:
            await harness.close()
        assert len(receiver.at("/slow")) == 1
        assert [entry.page_id for entry in kept] == [event.id]


async def test_a_replay_for_one_webhook_leaves_the_event_to_the_others(tmp_path: Path) -> None:
    """A dead letter replayed to ``/ok`` is delivered, and the outbox keeps the event that
    another webhook failed: its dead letter dies with the embedded broker."""
    with receiving() as receiver:
        harness = Harness([receiver.hook("/ok"), receiver.hook("/gone")], tmp_path)
        try:
            event = page_event("ann", 1)
            await harness.feed([event])  # /ok delivered, /gone failed: kept
            await harness.finished()
            ok = harness.settings.webhook_list[0].ref.encode()
            await harness.feed([event], headers=[(WEBHOOK_HEADER, ok)])  # the replay to /ok
            await harness.finished()
            kept = await harness.outbox.pending()
        finally:
            await harness.close()
        assert len(receiver.at("/ok")) == 2
        assert [entry.page_id for entry in kept] == [event.id]


async def test_an_event_of_a_user_forgotten_since_is_not_delivered_replay_or_not(
    tmp_path: Path,
) -> None:
    """The outbox sends a failed event again at a start, without a replay's header: from
    before its user's DELETE, it would reach a receiver after the erasure's receipt."""
    with receiving() as receiver:
        harness = Harness([receiver.hook("/ok")], tmp_path)
        try:
            before = page_event("ann", 1)
            harness.deleted_ms["ann"] = round(before.time.timestamp() * 1000) + 1
            await harness.feed([before])
            await harness.finished()
            kept = await harness.outbox.pending()
        finally:
            await harness.close()
        assert receiver.at("/ok") == []
        assert harness.acked == [before.id]
        assert kept == [], "settled: nothing is owed for it any more"


async def test_what_is_signed_is_our_encoding_without_words_not_the_records_bytes(
    tmp_path: Path,
) -> None:
    """A record another producer wrote to the topic: its words and a key given twice do not
    reach a receiver under our signature."""
    with receiving() as receiver:
        harness = Harness([receiver.hook("/ok")], tmp_path)
        try:
            event = page_event("ann", 1)
            forged = orjson.loads(encode(event))
            forged["data"]["query"] = "FORGED TEXT"
            raw = orjson.dumps(forged).replace(
                b'"subject":"ann"', b'"subject":"zed","subject":"ann"'
            )
            message = SimpleNamespace(
                key=user_key("ann"), topic=EVENTS, partition=0, offset=0, headers=None
            )
            for item in await harness.stage.prepare([FakeEvent(message, raw)]):
                await harness.stage.submit(harness.dispatcher, item)
            await harness.finished()
        finally:
            await harness.close()
        (received,) = receiver.at("/ok")
        assert b"FORGED TEXT" not in received.body
        assert received.body.count(b'"subject"') == 1
        assert verified(received)["subject"] == "ann"
