"""Topic names and record keys: the wire contract every producer and consumer shares."""

from __future__ import annotations

TURNS = "memoryos.turns"
MESSAGES = "memoryos.messages"  # public: one event per message; paired into turns
PAGES = "memoryos.pages"
MTM = "memoryos.mtm"  # evicted pages, retrieval visits and persona acks: one order per user
PERSONA = "memoryos.persona"
DLQ = "memoryos.dlq"
EVENTS = "memoryos.events"  # public: CloudEvents of memory changes (schemas/events.py)
PIPELINE_TOPICS = (MESSAGES, TURNS, PAGES, MTM, PERSONA)


def user_key(user_id: str) -> bytes:
    """Every topic is keyed by user, so one user's events share a partition and stay ordered."""
    return user_id.encode()
