"""Bounded memory for the embedded broker: a log roll when it passes its memory budget.

Tansu keeps every record of every topic in memory and cannot trim or expire them (no
retention; a ``DeleteRecords`` request closes the connection). Nothing of value lives only in
it: the store is the source of truth and the journal holds every acknowledged turn until its
page is stored. So when its RSS passes ``MEMORYOS_BROKER_MEMORY_BUDGET_MB`` the stack
recycles it: close the gate, drain, stop the worker and the broker, start both fresh, let the
reconciler re-send everything owed, open the gate (``Stack.recycle_broker``).

While the gate is closed the service keeps accepting turns:

- a turn is journaled before it is sent, so the gate holds its send. The reconciler's start
  pass, run while the gate is closed, sends every journaled turn it reads, in the journal's
  order; when the gate opens it first sends the held turns that pass did not send (they were
  journaled after its read), in the order they came, and only then lets new sends through.
  So each turn is sent once, after its user's earlier turns. Dropping the held sends instead
  lost turns: one journaled after the read waited for a periodic pass, a later turn of its
  user was stored first, and the reconciler then took it for processed (a soak at 25 turns/s
  lost 55 of 7,496 turns over 4 rolls). A DELETE's marker is held the same way; its open
  tombstone makes the start pass send it too, and a marker twice is harmless.
- every other send (a retrieval's visits) waits for the fresh broker, at most
  ``timeout_s``, then fails visibly (503 "broker unavailable").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Set

import psutil  # type: ignore[import-untyped]

from schemas.errors import BrokerError
from schemas.topics import TURNS

log = logging.getLogger(__name__)
Send = Callable[[str, bytes, bytes], Awaitable[None]]


def rss_bytes(pid: int | None) -> int:
    """Resident memory of process ``pid``; 0 if there is none (stopped, or not ours)."""
    if pid is None:
        return 0
    try:
        return int(psutil.Process(pid).memory_info().rss)
    except psutil.Error:
        return 0


class GatedSink:
    """The service's sink: straight to the current worker's producer, held during a roll."""

    def __init__(self, send: Send, journaled: bool, timeout_s: float) -> None:
        self.target = send
        self.journaled = journaled  # turns are on disk: hold their sends, acknowledge them
        self.timeout_s = timeout_s
        self.held: list[tuple[str, bytes, bytes]] = []
        self._open = asyncio.Event()
        self._open.set()

    @property
    def closed(self) -> bool:
        return not self._open.is_set()

    def close(self) -> None:
        self._open.clear()

    async def open(self, send: Send, already_sent: Set[bytes] = frozenset()) -> None:
        """Send the held turns that are not in ``already_sent`` (the reconciler's start pass
        sent those), in their order, then let sends through to ``send``.

        Turns acknowledged while this flush runs are held too and flushed in the next round;
        the gate opens right after a round finds nothing held, with no await in between, so
        no send can slip past an earlier held one. A failed send leaves the rest to the
        reconciler's periodic passes (they are journaled) and opens the gate anyway.
        """
        try:
            while self.held:
                batch, self.held = self.held, []
                for topic, key, value in batch:
                    if value not in already_sent:
                        await send(topic, key, value)
        except Exception:
            log.exception(
                "sending the turns held during the roll failed; the reconciler re-sends them"
            )
            self.held = []
        self.target = send
        self._open.set()

    async def send(self, topic: str, key: bytes, value: bytes) -> None:
        if not self._open.is_set():
            if self.journaled and topic == TURNS:
                self.held.append((topic, key, value))  # journaled: acknowledged, sent at open
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
