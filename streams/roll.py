"""Bounded memory for the embedded broker: a log roll when it passes its memory budget.

Tansu keeps every record of every topic in memory and cannot trim or expire them (no
retention; a ``DeleteRecords`` request closes the connection). Nothing of value lives only in
it: the store is the source of truth and the journal holds every acknowledged turn until its
page is stored. So when its RSS passes ``MEMORYOS_BROKER_MEMORY_BUDGET_MB`` the stack
restarts it, plainly, through the path a crash takes (``Stack.recycle_broker``):

- client writes are refused: a turn, a bus message, a DELETE or a remembered ``respond`` gets
  503 with ``Retry-After`` and /readyz says "restarting the broker". The refusal is decided
  under the writers' lock (and the forget lock), which the roll takes alone to start it, so a
  write is either wholly before the roll (journaled and sent) or refused with nothing of it
  written: the client sends it again as is (``memoryos ingest`` does). Reads are served.
- the worker and the broker are stopped, with no drain (it would be refused time): what the
  worker leaves unfinished is re-driven as after a crash.
- a fresh broker and worker are started as ``Stack.start`` starts them: the gate closed, the
  reconciler's start pass re-sends everything owed from the journal and the store, and the
  catch-up sends the turns the pairing stage journaled meanwhile and opens the gate. Then
  writes are accepted again.
- a roll that fails, or hangs past its bound, is tried again, writes still refused, until one
  succeeds.
- every other send (a retrieval's visits, sent in tasks of their own: service/visits.py)
  waits for the fresh broker, at most ``timeout_s``, then fails (the visit is counted as
  lost; a client's request never waits for it).

A roll costs about 5 s of refused writes, most of it the fresh worker joining its consumer
group (tools/roll_measure.py measures it). It replaced a roll that kept accepting writes
while the broker restarted, journaling them and sending them from the journal under a
closed gate: no 503s, but a catch-up against concurrent writes and DELETEs that lost
acknowledged turns more than once before it was right.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from adapters.process_stats import rss_bytes
from schemas.errors import BrokerError
from schemas.topics import MESSAGES, TURNS

log = logging.getLogger(__name__)
Send = Callable[[str, bytes, bytes], Awaitable[None]]


class GatedSink:
    """The service's sink: straight to the current worker's producer; closed while a worker
    starts (at start and in a roll) until the catch-up has sent what was journaled."""

    def __init__(self, send: Send, journaled: bool, timeout_s: float, closed: bool = False) -> None:
        self.target = send
        self.journaled = journaled  # turns are on disk: the journal, not the send, goes out
        self.timeout_s = timeout_s
        self.dropped = 0  # turn sends dropped while closed: the catch-up sends them
        self._open = asyncio.Event()
        if not closed:
            self._open.set()

    @property
    def closed(self) -> bool:
        return not self._open.is_set()

    def close(self) -> None:
        self._open.clear()

    def open(self, send: Send) -> None:
        self.target = send
        self._open.set()

    async def send(self, topic: str, key: bytes, value: bytes) -> None:
        if not self._open.is_set():
            if self.journaled and topic in (TURNS, MESSAGES):
                self.dropped += 1  # journaled (or a tombstone): sent from the journal instead
                return
            try:
                await asyncio.wait_for(self._open.wait(), self.timeout_s)
            except TimeoutError:
                raise BrokerError("the embedded broker is being recycled") from None
        await self.target(topic, key, value)


class BrokerWatch:
    """Every ``interval_s``: if the broker's RSS is over ``budget_bytes``, ``recycle()``."""

    def __init__(
        self,
        pid: Callable[[], int | None],
        budget_bytes: int,
        interval_s: float,
        recycle: Callable[[], Awaitable[None]],
    ) -> None:
        self.pid = pid
        self.budget_bytes = budget_bytes
        self.interval_s = interval_s
        self.recycle = recycle
        self.rolls = 0

    async def run_forever(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            used = rss_bytes(self.pid())
            if used <= self.budget_bytes:
                continue
            log.info("embedded broker at %d MB, over its budget: recycling it", used >> 20)
            try:
                await self.recycle()
                self.rolls += 1
            except Exception:  # the stack cannot serve without a broker: say so loudly
                log.exception("recycling the embedded broker failed")
                raise
