"""A retrieval's visit (N_visit + 1, a fresh access time), sent off the request's path.

A retrieve does not await the visit's send: on the embedded stack a send waits while a broker
roll holds the gate, so every retrieve during a roll would wait for it, and past the gate's
bound answer 503 with its memory already read. The visit is bookkeeping for heat, and the MTM
stage takes visits in any order (an access time never moves backwards; ``memory/mtm.py``), so
it goes out in a task of its own. What that gives up: a visit whose send fails, or is in
flight when the process is killed, is not counted; it is logged and counted, never retried.

A user's visits within ``linger_s`` of the first go out as one record, the way a Kafka
producer lingers to batch: each segment carries how many retrievals hit it (``counts``) and
when the last did (``times``), so N_visit and the access times are those of a record per
retrieval. One record per retrieve cost the event loop a good part of each retrieve's time in
sends, consumption and heat writes (docs/benchmarks.md). A stop sends what lingers at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Sequence
from typing import Protocol

from adapters.metrics import Metrics
from schemas.codec import dumps
from schemas.records import RetrievalHit
from schemas.topics import MTM, user_key

log = logging.getLogger(__name__)


class EventSink(Protocol):
    """Where the service's events go: the producer, or the roll's gate in front of it."""

    async def send(self, topic: str, key: bytes, value: bytes) -> None: ...


MAX_IN_FLIGHT = 1024  # records being sent at once; the others wait for a slot
LINGER_S = 1.0  # the service's linger: a user's visits of one second make one record
MAX_LINGERING = 16_384  # users whose visits linger; a visit past it is sent without lingering
MAX_QUEUED = 16_384  # records sent or waiting for a slot (a roll holds them); more are dropped
SEND_BOUND_S = 300.0  # past a roll's own bound: a send stuck on a stopped producer ends


class _Lingering:
    """One user's visits not yet sent: how many retrievals hit each segment and when the last
    of them did."""

    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        self.last: dict[str, float] = {}
        self.at = 0.0
        self.retrievals = 0
        self.dropped = False  # the user was forgotten while these lingered

    def add(self, segment_ids: Sequence[str], at: float) -> None:
        for segment_id in dict.fromkeys(segment_ids):  # one retrieval counts a segment once
            self.hits[segment_id] += 1
            self.last[segment_id] = max(self.last.get(segment_id, at), at)
        self.at = max(self.at, at)
        self.retrievals += 1

    def record(self, user_id: str) -> RetrievalHit:
        counts = {segment: n for segment, n in self.hits.items() if n > 1}
        times = {segment: t for segment, t in self.last.items() if t < self.at}
        return RetrievalHit(
            user_id=user_id,
            segment_ids=list(self.hits),
            at=self.at,
            counts=counts or None,
            times=times or None,
        )


class VisitSender:
    def __init__(self, sink: EventSink, metrics: Metrics, linger_s: float = 0.0) -> None:
        self.sink = sink
        self.metrics = metrics
        self.linger_s = linger_s
        self._lingering: dict[str, _Lingering] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._queued = 0
        self._slots = asyncio.Semaphore(MAX_IN_FLIGHT)
        self._closed = False
        self._wake = asyncio.Event()  # set by a flush: what lingers goes out now

    def send(self, user_id: str, segment_ids: Sequence[str], at: float) -> None:
        """Count one retrieval's visit; it goes out within ``linger_s``. Returns at once."""
        if self._closed:  # a retrieve that outlived the HTTP server's stop
            self.metrics.visits_lost.labels(reason="stopped").inc()
            return
        lingering = self._lingering.get(user_id)
        if lingering is None:
            lingering = _Lingering()
            linger = self.linger_s if len(self._lingering) < MAX_LINGERING else 0.0
            self._lingering[user_id] = lingering
            task = asyncio.create_task(self._deliver(user_id, lingering, linger, self._wake))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        lingering.add(segment_ids, at)

    async def _deliver(
        self, user_id: str, lingering: _Lingering, linger_s: float, wake: asyncio.Event
    ) -> None:
        try:
            if linger_s > 0:
                with contextlib.suppress(TimeoutError):  # a flush or a stop ends the wait
                    await asyncio.wait_for(wake.wait(), linger_s)
            else:
                await asyncio.sleep(0)  # the visits of this turn of the loop go together
        except asyncio.CancelledError:
            self._lost(user_id, lingering, "stopped")
            raise
        if self._lingering.get(user_id) is lingering:
            del self._lingering[user_id]  # later visits start a record of their own
        if lingering.dropped:
            return
        if self._queued >= MAX_QUEUED:  # the sends are held (a roll): bounded, counted
            self.metrics.visits_lost.labels(reason="backlog").inc(lingering.retrievals)
            return
        self._queued += 1
        try:
            async with self._slots:
                value = dumps(lingering.record(user_id))
                send = self.sink.send(MTM, user_key(user_id), value)
                await asyncio.wait_for(send, SEND_BOUND_S)
        except asyncio.CancelledError:
            self.metrics.visits_lost.labels(reason="stopped").inc(lingering.retrievals)
            raise
        except Exception as exc:  # bookkeeping: never an error for the retrieve that made it
            self.metrics.visits_lost.labels(reason="send").inc(lingering.retrievals)
            log.warning("%d retrieval visits were not recorded: %r", lingering.retrievals, exc)
        finally:
            self._queued -= 1

    def forget(self, user_id: str) -> None:
        """A DELETE: the user's lingering visits are not sent (their segments are gone)."""
        lingering = self._lingering.pop(user_id, None)
        if lingering is not None:
            lingering.dropped = True

    async def flush(self, timeout_s: float) -> None:
        """Send what lingers now and wait up to ``timeout_s`` for the sends (the demo does
        before it shows the heat)."""
        self._wake_all()
        pending = set(self._tasks)
        if pending:
            await asyncio.wait(pending, timeout=timeout_s)

    def _wake_all(self) -> None:
        wake, self._wake = self._wake, asyncio.Event()
        wake.set()

    def _lost(self, user_id: str, lingering: _Lingering, reason: str) -> None:
        if self._lingering.get(user_id) is lingering:
            del self._lingering[user_id]
        self.metrics.visits_lost.labels(reason=reason).inc(lingering.retrievals)

    @property
    def in_flight(self) -> int:
        """Records lingering or being sent."""
        return len(self._tasks)

    async def close(self, timeout_s: float) -> None:
        """Send what lingers now and let the sends finish for up to ``timeout_s``, then
        cancel the rest; any visit after this is counted as lost."""
        self._closed = True
        self._wake_all()
        pending = set(self._tasks)
        if not pending:
            return
        _, late = await asyncio.wait(pending, timeout=timeout_s)
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)
