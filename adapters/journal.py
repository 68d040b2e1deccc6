"""The embedded stack's inbox: accepted turns on disk until their page is in the store,
accepted messages until the pairing stage holds them in the store (or made them a turn), and
accepted fact edits until the persona stage has applied them.

The embedded broker keeps every record in memory only, so a turn acknowledged to a client
must first be on disk in something we own. SQLite in WAL mode with ``synchronous=FULL``:
a committed append survives a crash of every process. The reconciler re-sends what has no
page yet and deletes what has. With a real Kafka (``acks=all`` on replicated topics) the
broker is the journal and ``NoJournal`` is used.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from adapters.settings import Settings
from adapters.sqlite_file import SqliteFile
from memory.ids import page_id
from schemas.codec import dumps
from schemas.facts import FactEdit
from schemas.message import MessageEvent
from schemas.turn import TurnEvent


@dataclass(frozen=True)
class Entry:
    seq: int
    user_id: str
    page_id: str
    value: bytes


class Journal(Protocol):
    async def append(self, turns: Sequence[TurnEvent]) -> None: ...

    async def append_messages(self, messages: Sequence[MessageEvent]) -> None: ...

    async def pending_messages(self, limit: int = 10_000, after: int = 0) -> list[Entry]:
        """Journaled messages not yet settled (seq > ``after``); ``page_id`` holds the id."""
        ...

    async def settle_messages(self, user_id: str, message_ids: Sequence[str]) -> None:
        """Settle once stored: queued until ``settle_queued`` has the store flush first."""
        ...

    async def settle_queued(self, flush: Callable[[], Awaitable[None]]) -> int:
        """Flush the store, then settle the messages queued before it; how many."""
        ...

    async def journaled_messages(self, user_id: str, message_ids: Sequence[str]) -> list[bytes]:
        """The journaled copies of these messages of the user, not yet settled."""
        ...

    async def append_fact_edits(self, edits: Sequence[FactEdit]) -> None: ...

    async def pending_fact_edits(self, limit: int = 10_000, after: int = 0) -> list[Entry]:
        """Journaled fact edits not yet applied; ``page_id`` holds the edit's id."""
        ...

    async def settle_fact_edits(self, user_id: str, edit_ids: Sequence[str]) -> None:
        """Settle once applied: queued, as messages are, until the store has flushed."""
        ...

    async def pending(self, limit: int = 10_000, after: int = 0) -> list[Entry]:
        """Journaled turns not yet settled, oldest first; only those with seq > ``after``."""
        ...

    async def settle(self, seqs: Sequence[int]) -> None: ...

    async def forget_user(self, user_id: str) -> None: ...

    async def problem(self) -> str | None:
        """Why a write would fail now (readiness), or None."""
        ...

    def close(self) -> None: ...


def journal_path(settings: Settings) -> Path:
    """Where the embedded stack and `memoryos ingest` keep accepted turns until placed."""
    return settings.data_dir / "journal.sqlite3"


def open_journal(settings: Settings, embedded: bool) -> Journal:
    """The on-disk journal when the broker keeps nothing on disk (or when forced on)."""
    if settings.journal == "on" or (settings.journal == "auto" and embedded):
        return SqliteJournal(journal_path(settings))
    return NoJournal()


class NoJournal:
    """Kafka with acks=all is durable on its own."""

    async def append(self, turns: Sequence[TurnEvent]) -> None:
        return None

    async def append_messages(self, messages: Sequence[MessageEvent]) -> None:
        return None

    async def pending_messages(self, limit: int = 10_000, after: int = 0) -> list[Entry]:
        return []

    async def settle_messages(self, user_id: str, message_ids: Sequence[str]) -> None:
        return None

    async def settle_queued(self, flush: Callable[[], Awaitable[None]]) -> int:
        return 0

    async def journaled_messages(self, user_id: str, message_ids: Sequence[str]) -> list[bytes]:
        return []

    async def append_fact_edits(self, edits: Sequence[FactEdit]) -> None:
        return None

    async def pending_fact_edits(self, limit: int = 10_000, after: int = 0) -> list[Entry]:
        return []

    async def settle_fact_edits(self, user_id: str, edit_ids: Sequence[str]) -> None:
        return None

    async def pending(self, limit: int = 10_000, after: int = 0) -> list[Entry]:
        return []

    async def settle(self, seqs: Sequence[int]) -> None:
        return None

    async def forget_user(self, user_id: str) -> None:
        return None

    async def problem(self) -> str | None:
        return None

    def close(self) -> None:
        return None


_SCHEMA = """
CREATE TABLE IF NOT EXISTS inbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id TEXT NOT NULL,
    page_id TEXT NOT NULL,
    value BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS inbox_user ON inbox (user_id);
CREATE TABLE IF NOT EXISTS message_inbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    value BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS message_inbox_user ON message_inbox (user_id, message_id);
CREATE TABLE IF NOT EXISTS fact_inbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id TEXT NOT NULL,
    edit_id TEXT NOT NULL,
    value BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS fact_inbox_user ON fact_inbox (user_id, edit_id);
"""


class SqliteJournal:
    """One file, shared by the stack and `memoryos ingest` (SQLite locks across processes)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = SqliteFile(
            path,
            _SCHEMA,
            "the turn journal",
            "It holds acknowledged turns and messages not yet stored, so nothing starts over it: "
            "keep a copy, then move it aside to start with an empty journal (what only it held "
            "is lost)",
        )
        self._db, self._lock, self._run = self._file.db, self._file.lock, self._file.write
        # (table, seq) of messages stored and fact edits applied, settled after a flush
        self._queued: list[tuple[str, int]] = []

    async def append(self, turns: Sequence[TurnEvent]) -> None:
        rows = [(t.user_id, page_id(t.user_id, t.turn_id), dumps(t)) for t in turns]
        await self._run("INSERT INTO inbox (user_id, page_id, value) VALUES (?, ?, ?)", rows)

    async def pending(self, limit: int = 10_000, after: int = 0) -> list[Entry]:
        return await self._read("SELECT seq, user_id, page_id, value FROM inbox", limit, after)

    async def append_messages(self, messages: Sequence[MessageEvent]) -> None:
        rows = [(m.user_id, m.message_id, dumps(m)) for m in messages]
        sql = "INSERT INTO message_inbox (user_id, message_id, value) VALUES (?, ?, ?)"
        await self._run(sql, rows)

    async def pending_messages(self, limit: int = 10_000, after: int = 0) -> list[Entry]:
        sql = "SELECT seq, user_id, message_id, value FROM message_inbox"
        return await self._read(sql, limit, after)

    async def settle_messages(self, user_id: str, message_ids: Sequence[str]) -> None:
        # A store applies a write to its log before it makes it durable: a damaged log after
        # a crash loses what was applied only, so the entry stays until a flush. Queued by
        # seq, as they are now: the same id accepted again later (after a DELETE) is a new
        # entry that this settle must not take with it.
        await self._queue("message_inbox", "message_id", user_id, message_ids)

    async def append_fact_edits(self, edits: Sequence[FactEdit]) -> None:
        rows = [(e.user_id, e.edit_id, dumps(e)) for e in edits]
        await self._run("INSERT INTO fact_inbox (user_id, edit_id, value) VALUES (?, ?, ?)", rows)

    async def pending_fact_edits(self, limit: int = 10_000, after: int = 0) -> list[Entry]:
        return await self._read("SELECT seq, user_id, edit_id, value FROM fact_inbox", limit, after)

    async def settle_fact_edits(self, user_id: str, edit_ids: Sequence[str]) -> None:
        await self._queue("fact_inbox", "edit_id", user_id, edit_ids)

    async def _queue(self, table: str, id_column: str, user_id: str, ids: Sequence[str]) -> None:
        wanted = list(ids)

        def seqs() -> list[int]:
            marks = ",".join("?" * len(wanted))
            sql = f"SELECT seq FROM {table} WHERE user_id = ? AND {id_column} IN ({marks})"
            with self._lock:
                return [int(row[0]) for row in self._db.execute(sql, (user_id, *wanted))]

        if wanted:
            self._queued.extend((table, seq) for seq in await asyncio.to_thread(seqs))

    async def settle_queued(self, flush: Callable[[], Awaitable[None]]) -> int:
        queued, self._queued = self._queued, []
        if queued:
            await flush()  # on failure the entries stay, and are sent (harmlessly) again
            for table in ("message_inbox", "fact_inbox"):
                rows = [(seq,) for name, seq in queued if name == table]
                await self._run(f"DELETE FROM {table} WHERE seq = ?", rows)
        return len(queued)

    async def journaled_messages(self, user_id: str, message_ids: Sequence[str]) -> list[bytes]:
        wanted = list(dict.fromkeys(message_ids))[:1000]

        def read() -> list[bytes]:
            marks = ",".join("?" * len(wanted))
            sql = f"SELECT value FROM message_inbox WHERE user_id = ? AND message_id IN ({marks})"
            with self._lock:
                return [bytes(row[0]) for row in self._db.execute(sql, (user_id, *wanted))]

        return await asyncio.to_thread(read) if wanted else []

    async def _read(self, select: str, limit: int, after: int = 0) -> list[Entry]:
        def read() -> list[Entry]:
            with self._lock:
                sql = f"{select} WHERE seq > ? ORDER BY seq LIMIT ?"
                cursor = self._db.execute(sql, (after, limit))
                return [Entry(int(s), str(u), str(p), bytes(v)) for s, u, p, v in cursor]

        return await asyncio.to_thread(read)

    async def settle(self, seqs: Sequence[int]) -> None:
        await self._run("DELETE FROM inbox WHERE seq = ?", [(seq,) for seq in seqs])

    async def forget_user(self, user_id: str) -> None:
        await self._run("DELETE FROM inbox WHERE user_id = ?", [(user_id,)])
        await self._run("DELETE FROM message_inbox WHERE user_id = ?", [(user_id,)])
        await self._run("DELETE FROM fact_inbox WHERE user_id = ?", [(user_id,)])

    async def problem(self) -> str | None:
        def probe() -> str | None:
            with self._lock:
                try:
                    self._db.execute("SELECT count(*) FROM sqlite_master").fetchone()
                except sqlite3.Error:
                    return "journal unavailable"
            return None

        return await asyncio.to_thread(probe)

    def close(self) -> None:
        self._file.close()
