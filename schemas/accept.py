"""The one input contract of turns and messages, at every entry (HTTP, MCP, `memoryos ingest`,
the raw topics ``memoryos.turns`` and ``memoryos.messages``).

Required: ``user_id``, the texts (``query`` and ``response``; ``role`` and ``text`` for a
message) and, for a message, ``conversation_id``. Optional, with the same defaults everywhere:

- ``timestamp``: when the entry accepted the record. The API and `memoryos ingest` take their
  clock; a raw topic takes the record's own Kafka timestamp, which a replay keeps.
- ``turn_id`` / ``message_id``: made from what the entry accepted. The API and `memoryos
  ingest` take a new random id; a raw topic derives it from the record's topic, partition and
  offset, so a replay of that record lands on the same id and changes nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

_IDS = uuid.UUID("6d6f7279-6f73-5e00-8000-616363657074")  # namespace of default ids


@dataclass(frozen=True)
class Accepted:
    """What an entry knows of a record it accepts: when, and a seed unique to the record."""

    at: datetime
    seed: str

    @classmethod
    def now(cls) -> Accepted:
        """An API call or a file line: the clock, and a random seed."""
        return cls(datetime.now(UTC), uuid.uuid4().hex)

    @classmethod
    def of_record(cls, topic: str, partition: int, offset: int, at_s: float | None) -> Accepted:
        """A record of a raw topic: its place, and its Kafka timestamp in seconds (now if it
        has none)."""
        at = datetime.fromtimestamp(at_s, UTC) if at_s else datetime.now(UTC)
        return cls(at, f"{topic}/{partition}/{offset}")

    def default_id(self) -> str:
        return uuid.uuid5(_IDS, self.seed).hex


def with_defaults(data: Mapping[str, Any], id_field: str, accepted: Accepted) -> dict[str, Any]:
    """``data`` with the contract's defaults for what it leaves out (or sends as null)."""
    filled = {key: value for key, value in data.items() if value is not None}
    filled.setdefault(id_field, accepted.default_id())
    filled.setdefault("timestamp", accepted.at)
    return filled
