"""Vacuuming the store now and then: Qdrant Edge, the embedded store, has no background
optimizer, so the space of deleted points comes back only when asked for
(``VectorStore.vacuum``; a Qdrant server does it by itself and answers 0)."""

from __future__ import annotations

import asyncio
import logging
import time

from adapters.ports import VectorStore

log = logging.getLogger(__name__)


async def vacuum_forever(store: VectorStore, interval_s: float) -> None:
    while True:
        await asyncio.sleep(interval_s)
        started = time.perf_counter()
        try:
            rewritten = await store.vacuum()
        except Exception as exc:  # the next round tries again; never kill the process
            log.warning("store vacuum failed: %r", exc)
            continue
        if rewritten:
            elapsed = time.perf_counter() - started
            log.info("store vacuum rewrote %d collections in %.2f s", rewritten, elapsed)
