"""A retrieval's visit (N_visit + 1, a fresh access time), sent off the request's path.

A retrieve used to await the visit's send: on the embedded stack a send waits while a broker
roll holds the gate, so every retrieve during a roll waited for it, and past the gate's bound
answered 503 with its memory already read. The visit is bookkeeping for heat, and the MTM
stage takes visits in any order (an access time never moves backwards; ``memory/mtm.py``), so
it goes out in a task of its own. What that gives up: a visit whose send fails, or is in
flight when the process is killed, is not counted; it is logged and counted, never retried.
"""

from __future__ import annotations

import asyncio
import logging
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


MAX_IN_FLIGHT = 1024  # visits waiting for a send (a roll); more are dropped and counted
SEND_BOUND_S = 300.0  # past a roll's own bound: a send stuck on a stopped producer ends


class VisitSender:
    def __init__(self, sink: EventSink, metrics: Metrics) -> None:
        self.sink = sink
        self.metrics = metrics
        self._in_flight: set[asyncio.Task[None]] = set()
        self._closed = False

    def send(self, user_id: str, segment_ids: Sequence[str], at: float) -> None:
        """Start sending one retrieval's visit; returns at once."""
        if self._closed:  # a retrieve that outlived the HTTP server's stop
            self.metrics.visits_lost.labels(reason="stopped").inc()
            return
        if len(self._in_flight) >= MAX_IN_FLIGHT:
            self.metrics.visits_lost.labels(reason="backlog").inc()
            return
        value = dumps(RetrievalHit(user_id=user_id, segment_ids=list(segment_ids), at=at))
        task = asyncio.create_task(self._deliver(user_id, value))
        self._in_flight.add(task)
        task.add_done_callback(self._in_flight.discard)

    async def _deliver(self, user_id: str, value: bytes) -> None:
        try:
            await asyncio.wait_for(self.sink.send(MTM, user_key(user_id), value), SEND_BOUND_S)
        except Exception as exc:  # bookkeeping: never an error for the retrieve that made it
            self.metrics.visits_lost.labels(reason="send").inc()
            log.warning("a retrieval's visit was not recorded: %r", exc)

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    async def close(self, timeout_s: float) -> None:
        """Let the visits in flight finish for up to ``timeout_s``, then cancel the rest; any
        visit after this is counted as lost."""
        self._closed = True
        pending = set(self._in_flight)
        if not pending:
            return
        _, late = await asyncio.wait(pending, timeout=timeout_s)
        for task in late:
            task.cancel()
            self.metrics.visits_lost.labels(reason="stopped").inc()
        await asyncio.gather(*late, return_exceptions=True)
