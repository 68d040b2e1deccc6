"""Topic names and record keys: the wire contract every producer and consumer shares."""

from __future__ import annotations

TURNS = "memoryos.turns"
PAGES = "memoryos.pages"
EVICTED = "memoryos.stm-evicted"
SEGMENTS = "memoryos.segments"
RETRIEVALS = "memoryos.retrievals"
PERSONA = "memoryos.persona"
CONTROL = "memoryos.control"
DLQ = "memoryos.dlq"
PIPELINE_TOPICS = (TURNS, PAGES, EVICTED, SEGMENTS, RETRIEVALS, PERSONA, CONTROL)


def user_key(user_id: str) -> bytes:
    """Every topic is keyed by user, so one user's events share a partition and stay ordered."""
    return user_id.encode()
