"""Webhooks stage: memoryos.events -> a signed POST to each webhook that wants the event's type.

Each webhook has one queue per user: a user's events reach a webhook in order, and a receiver
that is slow or down holds back only its own deliveries, up to ``max_pending_events`` accepted
and not finished in all (then the consumer waits, as every stage does). An event is finished,
and its offset may be committed, when every webhook that wants it has it or has its failure
dead-lettered.

Standard Webhooks: ``webhook-id`` is the event's id (stable across replays: receivers
de-duplicate on it), ``webhook-timestamp`` the attempt's time, ``webhook-signature`` ``v1,`` and
the base64 HMAC-SHA256 of ``id.timestamp.body`` with the webhook's secret. A 2xx delivers; a
5xx, 408, 429, a timeout or a failed connection is tried again with backoff; any other answer
(a redirect included: it is not followed) is a refusal, dead-lettered at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from adapters import tracing
from adapters.events_out import Outbox, encode
from adapters.metrics import Metrics
from adapters.ports import Clock
from adapters.settings import Settings
from adapters.webhook_http import Poster
from agents.runtime import BatchRunner, Consumed, KeyedDispatcher
from schemas.events import MemoryEvent
from schemas.webhooks import Webhook, signature

log = logging.getLogger(__name__)
RETRIED_STATUS = frozenset({408, 429})
MAX_BACKOFF_S = 3600.0
BACKOFF_FACTOR = 4.0
WEBHOOK_HEADER = "webhook"  # a dead letter's webhook (``Webhook.ref``): its replay goes there only
CONTENT_TYPE = "application/cloudevents+json"  # CloudEvents' structured mode over HTTP
ROOM_CHECK_S = 1.0  # how often a wait for a webhook's place looks whether it now fails

Done = Callable[[Consumed[Any]], None]


class WebhookStage:
    stage = "webhooks"

    def __init__(
        self,
        hooks: Sequence[Webhook],
        poster: Poster,
        runner: BatchRunner[MemoryEvent],
        settings: Settings,
        metrics: Metrics,
        clock: Clock,
        outbox: Outbox,
        done: Done,
        last_delete: Callable[[str], Awaitable[int]],
    ) -> None:
        """``done``: acknowledges a finished record (its offset may then be committed).
        ``last_delete``: the time of a user's last DELETE in ms (0: none)."""
        self.last_delete = last_delete
        self.hooks = list(hooks)
        self.poster = poster
        self.runner = runner
        self.settings = settings
        self.metrics = metrics
        self.clock = clock
        self.outbox = outbox
        self.done = done
        # Each webhook's share of the places (max_pending_events): a receiver that fails and
        # holds its whole share has its next events dead-lettered at once, so that it cannot
        # take the places every other webhook needs. One that is slow but answers is waited for.
        self.share = max(1, settings.max_pending_events // max(1, len(self.hooks)))
        self.reset()

    def reset(self) -> None:
        """A run starts with no delivery queued (a stop cancels the last run's, queued ones
        included, so their counts go with them)."""
        self._holding = [0] * len(self.hooks)  # deliveries queued or running, per webhook
        self._failing: set[int] = set()  # webhooks whose last attempt failed
        self._room = [asyncio.Event() for _ in self.hooks]  # set when one of its places frees

    async def prepare(self, events: Sequence[Any]) -> list[Consumed[MemoryEvent]]:
        return await self.runner.decode_batch(events)

    async def submit(
        self, dispatcher: KeyedDispatcher[Callable[[], Awaitable[None]]], item: Consumed[Any]
    ) -> None:
        """Queue the event's deliveries; ``finish`` runs once the last of them ends."""
        event: MemoryEvent = item.record
        only = tracing.header(item.source.headers, WEBHOOK_HEADER)
        if await self._forgotten_since(event):
            # from before its user's DELETE, read after it (a replayed dead letter, an event the
            # outbox sends again at a start): it would come after the erasure's receipt
            self.metrics.webhook_deliveries.labels(webhook="any", outcome="forgotten").inc()
            await self.finish(item)
            return
        wanted = [
            (index, hook)
            for index, hook in enumerate(self.hooks)
            if hook.wants(event.type) and (only is None or hook.ref == only)
        ]
        owed, failed = [len(wanted)], [False]
        replay = only is not None
        if not wanted:
            await self.finish(item, replay=replay)
            return
        # what we sign is our own encoding of what we read, never the record's bytes: a record
        # written to the topic by another producer cannot carry words, or two values of a key
        body = encode(event if self.settings.events_include_text else event.without_text())

        def delivery(index: int, hook: Webhook) -> Callable[[], Awaitable[None]]:
            async def deliver() -> None:
                try:
                    if not await self.deliver(index, hook, event, body, item):
                        failed[0] = True  # set, never cleared: another webhook's success waits
                except Exception as exc:  # a bug: dead-lettered with it, never dropped
                    log.exception("delivering %s to %s failed", event.id, hook.name)
                    await self._dead_letter(hook, event, item, f"bug: {exc!r}", 1)
                    failed[0] = True
                finally:
                    self._holding[index] -= 1
                    self._room[index].set()
                # Not reached when cancelled (a stop): the event is then neither settled nor
                # acknowledged, and is delivered again after the restart.
                owed[0] -= 1
                if owed[0] == 0:
                    await self.finish(item, failed[0], replay)

            return deliver

        for index, hook in wanted:
            await self._room_for(index)
            if index in self._failing and self._holding[index] >= self.share:
                # its share is held by deliveries to a receiver that fails: this one would
                # take a place every other webhook needs
                why = f"{self._holding[index]} deliveries already wait for a failing receiver"
                await self._dead_letter(hook, event, item, why, 0)
                failed[0], owed[0] = True, owed[0] - 1
                continue
            await dispatcher.submit(f"{index}/{event.subject}", delivery(index, hook))
            self._holding[index] += 1  # counted once queued (no await since: it has not run)
        if owed[0] == 0:
            await self.finish(item, failed[0], replay)

    async def _room_for(self, index: int) -> None:
        """Wait while the webhook holds its whole share and still answers: a slow receiver is
        waited for (backpressure), one that fails is not (its next events spill)."""
        while self._holding[index] >= self.share and index not in self._failing:
            self._room[index].clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._room[index].wait(), ROOM_CHECK_S)

    async def finish(self, item: Consumed[Any], failed: bool = False, replay: bool = False) -> None:
        """Settled in the outbox, then acknowledged; an event a webhook failed is kept there
        instead (the embedded broker's dead letters do not outlive it), and a restart sends it
        again. A replay, for one webhook, settles nothing: another may still owe the event. A
        settle that fails leaves the event to be sent again after a restart, with its id: a
        duplicate a receiver drops."""
        try:
            if failed:
                await self.outbox.keep_failed([item.record.id])
            elif not replay:
                await self.outbox.settle([item.record.id])
        except Exception as exc:
            log.warning("the outbox did not settle event %s (%r)", item.record.id, exc)
        self.done(item)

    async def deliver(
        self, index: int, hook: Webhook, event: MemoryEvent, body: bytes, item: Consumed[Any]
    ) -> bool:
        """Delivered (True), or dead-lettered with the reason (False)."""
        settings, name = self.settings, hook.name
        why, attempt = "", 0
        for attempt in range(1, settings.webhook_attempts + 1):
            status, why = await self._attempt(hook, event.id, body)
            if status is not None and 200 <= status < 300:
                self._failing.discard(index)
                self.metrics.webhook_deliveries.labels(webhook=name, outcome="delivered").inc()
                return True
            self._failing.add(index)
            if status is not None and status < 500 and status not in RETRIED_STATUS:
                why += " (a redirect is not followed)" if 300 <= status < 400 else ""
                break  # a refusal: the same request would be refused again
            if attempt < settings.webhook_attempts:
                self.metrics.webhook_deliveries.labels(webhook=name, outcome="retried").inc()
                delay = settings.webhook_backoff_s * BACKOFF_FACTOR ** (attempt - 1)
                await asyncio.sleep(min(delay, MAX_BACKOFF_S))
        await self._dead_letter(hook, event, item, why, attempt)
        return False

    async def _dead_letter(
        self, hook: Webhook, event: MemoryEvent, item: Consumed[Any], why: str, attempts: int
    ) -> None:
        """Kept without the user's words (a replay sends it again as it is) and naming the
        webhook by its digest, not its URL."""
        self.metrics.webhook_deliveries.labels(webhook=hook.name, outcome="dead_letter").inc()
        source = dataclasses.replace(item.source, raw=encode(event.without_text()))
        await self.runner.dead_letters.send(
            source,
            "webhook",
            f"{hook.name}: {why}",
            attempts,
            extra_headers={WEBHOOK_HEADER: hook.ref.encode()},
        )

    async def _forgotten_since(self, event: MemoryEvent) -> bool:
        try:
            deleted_ms = await self.last_delete(event.subject)
        except Exception as exc:
            log.warning("the store did not say whether %s was forgotten (%r)", event.subject, exc)
            return False  # delivered: a receiver de-duplicates, and a DELETE's receipt follows
        return deleted_ms > event.time.timestamp() * 1000

    async def _attempt(self, hook: Webhook, msg_id: str, body: bytes) -> tuple[int | None, str]:
        """(status or None, what happened): never raises but on cancellation."""
        at = int(self.clock.now())
        headers = {
            "content-type": CONTENT_TYPE,
            "user-agent": "memoryos-webhooks",
            "webhook-id": msg_id,
            "webhook-timestamp": str(at),
            "webhook-signature": signature(hook.key, msg_id, at, body),
        }
        started = time.perf_counter()
        try:
            status = await self.poster.post(
                hook.url, body, headers, self.settings.webhook_timeout_s
            )
            return status, f"HTTP {status}"
        except TimeoutError:
            return None, f"no answer within {self.settings.webhook_timeout_s} s"
        except Exception as exc:
            return None, f"{type(exc).__name__}: {exc}"[:500]
        finally:
            elapsed = time.perf_counter() - started
            self.metrics.webhook_seconds.labels(webhook=hook.name).observe(elapsed)
