"""One error hierarchy for the whole project.

Callers catch ``MemoryOSError`` at the edges (CLI, HTTP, agents) and turn it into an exit status,
a 4xx reply or a dead-letter record; nothing below the edges swallows errors silently.
"""

from __future__ import annotations


class MemoryOSError(Exception):
    """Base of every error this project raises on purpose."""


class ConfigError(MemoryOSError):
    """A setting is missing or invalid; the message names the variable and what is allowed."""


class InvalidEvent(MemoryOSError):
    """An event or request body failed validation; the message names the field."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class LLMError(MemoryOSError):
    """The LLM could not produce a usable answer (after retries)."""


class LLMQuotaExceeded(LLMError):
    """The provider says the account has no quota left; retrying cannot help."""


class LLMUnparseable(LLMError):
    """The reply could not be parsed, even after one repair attempt."""


class EmbedderError(MemoryOSError):
    """The embedding backend failed."""


class StoreError(MemoryOSError):
    """The vector store failed or returned something unexpected."""


class UnstorablePayload(InvalidEvent, StoreError):
    """A point's payload is one the store could not read back (too deep, too large, not JSON).

    An InvalidEvent, so agents dead-letter it at once (retrying cannot help), and a StoreError,
    so callers that guard store calls see it too. The message names the collection and point.
    """


class BrokerError(MemoryOSError):
    """The Kafka broker could not be started or reached."""


class NotFound(MemoryOSError):
    """The requested user or object does not exist."""
