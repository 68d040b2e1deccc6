"""A broker that goes away while the stack runs makes aiokafka and Faust log an error per
retry, thousands a minute: each kind of line is let through once per interval, with the count
of those held back, so the log says what is wrong without burying everything else."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

INTERVAL_S = 10.0
NOISY = ("aiokafka", "faust", "mode")


class RateLimit(logging.Filter):
    """At most one record per (logger, message as shown) every ``interval_s`` seconds; the
    count held back rides on the next one let through."""

    def __init__(
        self, interval_s: float = INTERVAL_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self.interval_s = interval_s
        self.clock = clock
        self._last: dict[tuple[str, str], float] = {}
        self._held: dict[tuple[str, str], int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING or record.name.split(".")[0] not in NOISY:
            return True
        if record.exc_info:
            return True  # a crash with its traceback (an agent's, say) is never held back
        kind = (record.name, record.getMessage())  # as shown: one agent's crash is not another's
        now = self.clock()
        last = self._last.get(kind)
        if last is not None and now - last < self.interval_s:
            self._held[kind] = self._held.get(kind, 0) + 1
            return False
        self._last[kind] = now
        held = self._held.pop(kind, 0)
        if held and last is not None:
            record.msg = f"{record.msg} ({held} more like this in the last {now - last:.0f} s)"
        if len(self._last) > 1024:  # bounded: forget the oldest kinds
            for old in sorted(self._last, key=self._last.__getitem__)[:512]:
                self._last.pop(old, None)
                self._held.pop(old, None)
        return True


def limit_noisy_loggers(interval_s: float = INTERVAL_S) -> None:
    """One rate limit on the root's handlers: a logger's own filter would miss its children
    (``aiokafka.conn``, ``aiokafka.consumer.fetcher``), a handler's sees every record."""
    limit = RateLimit(interval_s)
    for handler in logging.getLogger().handlers:
        handler.addFilter(limit)
