"""The one input contract of turns and messages, at every entry (HTTP, MCP, `memoryos ingest`,
the raw topics ``memoryos.turns`` and ``memoryos.messages``).

Required: ``user_id``, the texts (``query`` and ``response``; ``role`` and ``text`` for a
message) and, for a message, ``conversation_id``. Optional, with the same defaults everywhere:

- ``timestamp``: when the entry accepted the record. The API and `memoryos ingest` take their
  clock; a raw topic takes the record's own Kafka timestamp, which a replay keeps.
- ``turn_id`` / ``message_id``: made from what the entry accepted. The API takes a new random
  id; `memoryos ingest` one from the file's line and its content, so a second run of the same
  file adds nothing; a raw topic one from the record's topic, partition, Kafka timestamp and
  bytes (and its offset when it has no timestamp): a replay, or a producer's retry of the same
  record, lands on the same id, and a broker that starts its offsets again (the embedded one,
  after a restart) does not reuse one.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

_IDS = uuid.UUID("6d6f7279-6f73-5e00-8000-616363657074")  # namespace of default ids
_LATEST_S = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()


@dataclass(frozen=True)
class Accepted:
    """What an entry knows of a record it accepts: when (seconds; None: now), and a seed
    unique to the record. The defaults are made only for a record that leaves them out."""

    at_s: float | None
    seed: str

    @classmethod
    def now(cls, seed: str | None = None) -> Accepted:
        """An API call or a file line: the clock, and ``seed`` or a random one."""
        return cls(None, seed or uuid.uuid4().hex)

    @classmethod
    def of_record(
        cls, topic: str, partition: int, offset: int, at_s: float | None, value: bytes
    ) -> Accepted:
        """A record of a raw topic: its place, its Kafka timestamp (seconds; none, zero or
        out of range: now) and a digest of its bytes."""
        valid = at_s is not None and 0 < at_s <= _LATEST_S
        digest = hashlib.sha256(value).hexdigest()[:32]
        if valid:
            # The same bytes at the same time are one record sent twice (a producer's retry):
            # one id, whatever offsets the copies got.
            return cls(at_s, f"{topic}/{partition}/{at_s:.3f}/{digest}")
        return cls(None, f"{topic}/{partition}/{offset}/-/{digest}")

    def at(self) -> datetime:
        return datetime.fromtimestamp(self.at_s, UTC) if self.at_s else datetime.now(UTC)

    def default_id(self) -> str:
        return uuid.uuid5(_IDS, self.seed).hex


def with_defaults(data: Mapping[str, Any], id_field: str, accepted: Accepted) -> dict[str, Any]:
    """``data`` with the contract's defaults for what it leaves out (or sends as null)."""
    filled = {key: value for key, value in data.items() if value is not None}
    if id_field not in filled:
        filled[id_field] = accepted.default_id()
    if "timestamp" not in filled:
        filled["timestamp"] = accepted.at()
    return filled
