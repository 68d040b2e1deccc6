"""Where the stages put their CloudEvents: an outbox on disk first (the embedded stack, when
webhooks are set), then ``memoryos.events``.

The embedded broker keeps records in memory only, so an event a webhook has not had yet must be
on disk in something we own, as an accepted turn is (adapters/journal.py): SQLite in WAL mode,
``synchronous=FULL``. An event stays there until every webhook that wants it has it, and one a
webhook failed stays too (its dead letter lives in the broker's memory); the reconciler's start
pass sends what is left again, with the same ids. A stage keeps an event before it writes the
change the event describes, so a crash in between leaves the event and the work owed, never the
change without its event. With a real Kafka the topic is durable and ``NoOutbox`` is used.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import orjson

from adapters.deps import Send
from adapters.journal import Entry
from adapters.metrics import Metrics
from adapters.settings import Settings
from adapters.sqlite_file import SqliteFile
from schemas.events import MemoryEvent
from schemas.topics import user_key


class Outbox(Protocol):
    async def keep(self, rows: Sequence[tuple[str, str, bytes]]) -> None:
        """(event id, user id, value): an id kept already is not kept twice."""
        ...

    async def pending(self, limit: int = 10_000, after: int = 0) -> list[Entry]:
        """Kept and not settled, oldest first; ``page_id`` holds the event id."""
        ...

    async def settle(self, event_ids: Sequence[str]) -> None: ...

    async def keep_failed(self, event_ids: Sequence[str]) -> None:
        """Kept although finished: a webhook failed them (their dead letters live in the
        embedded broker's memory only). The oldest past ``MAX_FAILED`` are let go."""
        ...

    def close(self) -> None: ...


class NoOutbox:
    async def keep(self, rows: Sequence[tuple[str, str, bytes]]) -> None:
        return None

    async def pending(self, limit: int = 10_000, after: int = 0) -> list[Entry]:
        return []

    async def settle(self, event_ids: Sequence[str]) -> None:
        return None

    async def keep_failed(self, event_ids: Sequence[str]) -> None:
        return None

    def close(self) -> None:
        return None


_SCHEMA = """
CREATE TABLE IF NOT EXISTS outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id TEXT NOT NULL UNIQUE,
    user_id TEXT NOT NULL,
    value BLOB NOT NULL,
    failed INTEGER NOT NULL DEFAULT 0
);
"""
MAX_FAILED = 100_000  # events a webhook failed, kept to be sent again at the next start
TRIM_EVERY = 1_000  # failed events between two trims: the bound is MAX_FAILED plus this


class SqliteOutbox:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = SqliteFile(
            path,
            _SCHEMA,
            "the event outbox",
            "It holds events not yet delivered to the webhooks: keep a copy, then move it aside "
            "to start without it",
        )
        self._failed_since_trim = TRIM_EVERY  # the first failure trims what a last run left

    async def keep(self, rows: Sequence[tuple[str, str, bytes]]) -> None:
        sql = "INSERT OR IGNORE INTO outbox (event_id, user_id, value) VALUES (?, ?, ?)"
        await self._file.write(sql, list(rows))

    async def pending(self, limit: int = 10_000, after: int = 0) -> list[Entry]:
        def read() -> list[Entry]:
            sql = "SELECT seq, user_id, event_id, value FROM outbox WHERE seq > ? ORDER BY seq"
            with self._file.lock:
                rows = self._file.db.execute(f"{sql} LIMIT ?", (after, limit))
                return [Entry(int(s), str(u), str(e), bytes(v)) for s, u, e, v in rows]

        return await asyncio.to_thread(read)

    async def settle(self, event_ids: Sequence[str]) -> None:
        await self._file.write("DELETE FROM outbox WHERE event_id = ?", [(e,) for e in event_ids])

    async def keep_failed(self, event_ids: Sequence[str]) -> None:
        await self._file.write(
            "UPDATE outbox SET failed = 1 WHERE event_id = ?", [(e,) for e in event_ids]
        )
        self._failed_since_trim += len(event_ids)
        if self._failed_since_trim >= TRIM_EVERY:  # a trim reads every failed row: not each time
            self._failed_since_trim = 0
            trim = (
                "DELETE FROM outbox WHERE failed = 1 AND seq NOT IN "
                "(SELECT seq FROM outbox WHERE failed = 1 ORDER BY seq DESC LIMIT ?)"
            )
            await self._file.write(trim, [(MAX_FAILED,)])

    def close(self) -> None:
        self._file.close()


def open_outbox(settings: Settings, embedded: bool) -> Outbox:
    """On disk when the broker keeps nothing and a webhook waits for the events."""
    if embedded and settings.webhook_list:
        return SqliteOutbox(settings.data_dir / "events.sqlite3")
    return NoOutbox()


def encode(event: MemoryEvent) -> bytes:
    return orjson.dumps(event.model_dump(mode="json"))


class EventOut:
    """``emit``: kept, then sent. ``keep`` and ``publish`` apart: for an event that must not
    reach a consumer before the change it announces is complete (a user forgotten)."""

    def __init__(
        self, send: Send, outbox: Outbox, metrics: Metrics, include_text: bool = False
    ) -> None:
        self._send = send
        self.outbox = outbox
        self._metrics = metrics
        self._include_text = include_text

    def _encoded(self, events: Sequence[MemoryEvent]) -> list[tuple[MemoryEvent, bytes]]:
        shown = events if self._include_text else [event.without_text() for event in events]
        return [(event, encode(event)) for event in shown]

    async def keep(self, events: Sequence[MemoryEvent]) -> None:
        rows = [(event.id, event.subject, value) for event, value in self._encoded(events)]
        await self.outbox.keep(rows)

    async def publish(self, events: Sequence[MemoryEvent]) -> None:
        for event, value in self._encoded(events):
            await self._send(key=user_key(event.subject), value=value)
            self._metrics.events_out.labels(type=event.type.value).inc()

    async def emit(self, events: Sequence[MemoryEvent]) -> None:
        if events:
            await self.keep(events)
            await self.publish(events)


class NoEvents(EventOut):
    """For a stage built without the app (unit tests of one stage)."""

    def __init__(self) -> None:
        pass

    async def keep(self, events: Sequence[MemoryEvent]) -> None:
        return None

    async def publish(self, events: Sequence[MemoryEvent]) -> None:
        return None
