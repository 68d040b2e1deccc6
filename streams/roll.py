"""Bounded memory for the embedded broker: a log roll when it passes its memory budget.

Tansu keeps every record of every topic in memory and cannot trim or expire them (no
retention; a ``DeleteRecords`` request closes the connection). Nothing of value lives only in
it: the store is the source of truth and the journal holds every acknowledged turn until its
page is stored. So when its RSS passes ``MEMORYOS_BROKER_MEMORY_BUDGET_MB`` the stack
recycles it: close the gate, drain, stop the worker and the broker, start both fresh, let the
reconciler re-send everything owed, open the gate (``Stack.recycle_broker``).

While the gate is closed the service keeps accepting turns:

- a turn is journaled before it is sent, so the gate drops its send: the journal is what
  gets sent. The reconciler's start pass, run while the gate is closed, sends every journaled
  turn it reads, in the journal's order; then, still closed, the stack sends the turns
  journaled after that read (``Stack.catch_up_journal``), again and again until a read finds
  none and no send was dropped while it ran, and opens the gate in that same step (no await
  between the check and the opening: a batch acknowledged in between was lost). So each turn is
  sent once, after its user's earlier turns, and a turn a DELETE removed from the journal
  before a catch-up read is not sent at all (one read just before is sent ahead of the
  DELETE's marker, as any turn in flight, and purged by it). Leaving the late turns to a
  periodic pass lost them: a later turn of the same user was stored first, and the
  reconciler took the earlier one for processed (a soak at 25 turns/s lost 55 of 7,496
  turns over 4 rolls).
- a DELETE's marker is dropped the same way; the catch-up sends the marker of every open
  tombstone the start pass did not see, before the user's later turns and messages.
- messages of a message bus (``memoryos.messages``) are journaled too and go the same way,
  so neither a client's POST nor a DELETE (whose marker goes to both topics) waits.
- a roll that fails, or hangs past its bound, is tried again with the gate still closed,
  until one succeeds.
- every other send (a retrieval's visits, sent in tasks of their own: service/visits.py)
  waits for the fresh broker, at most ``timeout_s``, then fails (the visit is counted as
  lost; a client's request never waits for it).
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
    """The service's sink: straight to the current worker's producer, held during a roll."""

    def __init__(self, send: Send, journaled: bool, timeout_s: float, closed: bool = False) -> None:
        self.target = send
        self.journaled = journaled  # turns are on disk: the journal, not the send, goes out
        self.timeout_s = timeout_s
        self.dropped = 0  # turn sends dropped while closed: a catch-up read must see them all
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
