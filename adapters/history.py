"""Each user's recent dead letters, kept in the store for `GET /v1/users/{id}/history`.

Where a user's turns are in the pipeline needs no record of its own: the store already says
it (pages and their tier, segments, heat state). What it cannot say is what failed, so each
stage keeps a small ring of the user's last dead letters: a payload-only point per user and
stage, written only when a record is dead-lettered, so the hot path pays nothing. One writer
per ring (a stage handles one user's events in order), so no two writes race.

The `memoryos.dlq` topic stays the authority (`memoryos dlq list`); this is the operator's
view of one user, which survives the embedded broker's restarts (it keeps the DLQ in memory
only). A failing note is logged, never retried: the dead letter itself is already written.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from adapters import tracing
from adapters.doc_codec import doc_data
from adapters.ports import PERSONAS, Clock
from adapters.repository import MemoryRepository
from schemas.errors import StoreError
from schemas.turn import DEFAULT_PREFIX, MAX_USER_REF_CHARS, USER_REF_PATTERN

log = logging.getLogger(__name__)
RING = 20  # dead letters kept per user and stage
REASON_CHARS = 300
FLAG = "dead_letter_ring"  # the top-level payload field that finds a user's rings
_USER_ID = re.compile(USER_REF_PATTERN)


def _kind(stage: str) -> str:
    return f"dead_letters:{stage}"


class DeadLetterNotes:
    """The dead-letter sink's hook: adds the record to its user's ring for this stage."""

    def __init__(self, repo: MemoryRepository, clock: Clock) -> None:
        self.repo = repo
        self.clock = clock

    async def __call__(
        self, stage: str, source: Any, kind: str, reason: str, attempts: int
    ) -> None:
        user_id = _user_of(source.key)
        if user_id is None:
            return  # a key that is no user id: the DLQ topic has it, no user's page can
        entry = {
            "at": datetime.fromtimestamp(self.clock.now(), UTC).isoformat(),
            "stage": stage,
            "error": kind,
            "reason": reason[:REASON_CHARS],
            "topic": source.topic,
            "partition": source.partition,
            "offset": source.offset,
            "attempts": attempts,
            "trace_id": tracing.trace_id(source.headers),
        }
        try:
            ring = await self.repo.load_doc(user_id, _kind(stage)) or {}
            entries = [*ring.get("entries", []), entry][-RING:]
            await self.repo.save_doc(user_id, _kind(stage), {"entries": entries}, **{FLAG: 1})
        except Exception as exc:
            log.warning("could not note a dead letter of %s in its history: %r", stage, exc)


def _user_of(key: bytes | None) -> str | None:
    if key is None:
        return None
    text = key.decode("utf-8", "replace")
    if text.startswith(DEFAULT_PREFIX) or len(text) > MAX_USER_REF_CHARS:
        return None
    return text if _USER_ID.fullmatch(text) else None


async def dead_letters(repo: MemoryRepository, user_id: str) -> list[dict[str, Any]]:
    """The user's noted dead letters of every stage, oldest first."""
    points = await repo.flagged_docs(user_id, FLAG)
    entries = [
        dict(entry)
        for point in points
        for entry in _entries(point.payload)
        if isinstance(entry, Mapping)
    ]
    return sorted(entries, key=lambda entry: str(entry.get("at", "")))


def _entries(payload: Mapping[str, Any]) -> list[Any]:
    """A ring's entries; a ring that is not a readable document has none to show."""
    try:
        data = doc_data(payload)
    except StoreError:
        return []
    return list(data.get("entries", []))


async def purge(repo: MemoryRepository, user_id: str) -> None:
    """Forget the user's rings (the last stage, on a DELETE's marker)."""
    points = await repo.flagged_docs(user_id, FLAG)
    if points:
        await repo.store.delete(PERSONAS, [point.id for point in points])
