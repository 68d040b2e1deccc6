"""One error hierarchy for the whole project.

    MemoryOSError
    ├── ConfigError          a setting is missing or invalid (CLI exit 2)
    ├── InvalidEvent         bad input: HTTP 422, or a dead letter with reason ``invalid``
    │   └── UnauthorizedForget   a forget marker without the DELETE's tombstone
    ├── LLMError             the LLM failed after its own retries (stage: retried, then DLQ)
    │   ├── LLMQuotaExceeded     no quota left: dead-lettered at once
    │   └── LLMUnparseable       unusable reply even after a repair attempt
    ├── EmbedderError        the embedding backend failed (transient)
    ├── StoreError           the vector store failed (HTTP 503 "store unavailable")
    │   └── UnstorablePayload    also an InvalidEvent: a payload the store could not read back
    ├── JournalError         the embedded stack's inbox could not take a turn (HTTP 503)
    ├── DiskFull             the data folder is under its free-space floor (HTTP 503)
    ├── BrokerError          the Kafka broker could not be started or reached
    │   └── Restarting           the embedded broker is being rolled: writes refused (HTTP 503
    │                            with Retry-After), nothing written; sending again is safe
    ├── Forbidden            the key lacks the scope or the tenant (HTTP 403)
    ├── BudgetExhausted      the tenant spent its LLM tokens of the day (HTTP 429)
    └── NotFound             HTTP 404

Callers catch ``MemoryOSError`` at the edges (CLI, HTTP, stages) and turn it into an exit
status, a 4xx/5xx reply or a dead letter (``agents/policy.py`` decides which); nothing below
the edges swallows errors silently.
"""

from __future__ import annotations


class MemoryOSError(Exception):
    """Base of every error this project raises on purpose."""


class ConfigError(MemoryOSError):
    """A setting is missing or invalid; the message names the variable and what is allowed."""


class InvalidEvent(MemoryOSError):
    """An event or request body failed validation; the message names the field."""

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        problems: list[tuple[str, str]] | None = None,
    ) -> None:
        """``problems``: every (field, message) when there are several (``field`` the first)."""
        super().__init__(message)
        self.field = field
        self.problems = problems or [(field or "body", message)]


class UnauthorizedForget(InvalidEvent):
    """A forget marker that no DELETE stored a tombstone for: refused, never acted on."""


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


class JournalError(MemoryOSError):
    """The embedded stack's on-disk inbox failed: the turn is not acknowledged."""


class DiskFull(MemoryOSError):
    """The data folder has less free space than its floor: writes are refused until it has."""


class BrokerError(MemoryOSError):
    """The Kafka broker could not be started or reached."""


class Restarting(BrokerError):
    """The embedded broker and worker are restarting (a log roll, streams/roll.py): a write is
    refused before anything of it is journaled or sent, so the client may send it again as is
    after ``retry_after_s``."""

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(f"the embedded broker is restarting: retry in {retry_after_s} s")
        self.retry_after_s = retry_after_s


class Forbidden(MemoryOSError):
    """The request's key may not do this: a scope it lacks, or another tenant's keys."""


class BudgetExhausted(MemoryOSError):
    """The tenant has spent its LLM tokens of the day (HTTP 429 with ``retry_after_s``)."""

    def __init__(self, tenant: str, retry_after_s: int) -> None:
        super().__init__(
            f"tenant {tenant} has spent its LLM tokens of the day; retry in {retry_after_s} s"
        )
        self.retry_after_s = retry_after_s


class Conflict(MemoryOSError):
    """The request cannot be applied in the user's present state (HTTP 409): say, an edit of
    a user whose DELETE has not completed."""


class NotFound(MemoryOSError):
    """The requested user or object does not exist."""
