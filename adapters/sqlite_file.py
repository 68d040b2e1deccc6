"""A small SQLite file that must survive a crash of every process: the journal and the outbox.

WAL mode with ``synchronous=FULL``: a committed write survives a power cut. One connection
shared by the event loop's worker threads under a lock; each write is one transaction.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

from schemas.errors import JournalError


class SqliteFile:
    """``what`` names the file in errors ("the turn journal"); ``cannot_open`` says what to
    do when it cannot be opened (what it holds, and how to start without it)."""

    def __init__(self, path: Path, schema: str, what: str, cannot_open: str) -> None:
        self.path = path
        self.what = what
        path.parent.mkdir(parents=True, exist_ok=True)
        self.lock = threading.Lock()
        try:
            self.db = sqlite3.connect(path, check_same_thread=False, timeout=30.0)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            self.db.executescript(schema)
        except sqlite3.Error as exc:
            raise JournalError(f"{what} {path} cannot be opened ({exc}). {cannot_open}") from None

    async def write(self, sql: str, rows: Sequence[tuple[object, ...]]) -> None:
        """``sql`` for each row, in one transaction committed (and fsynced) before it returns."""
        if not rows:
            return

        def write() -> None:
            with self.lock:
                try:
                    with self.db:
                        self.db.executemany(sql, rows)
                except sqlite3.Error as exc:
                    raise JournalError(f"{self.what} {self.path} failed: {exc}") from exc

        await asyncio.to_thread(write)

    def close(self) -> None:
        with self.lock:
            self.db.close()
