"""The error policy: what a stage does when processing an event raises.

Injected by the app factory (quix-streams' error callbacks are the model), so tests and
operators can change it without touching the runner. The default:

- bad input (``InvalidEvent``) and a provider that refuses for good (``LLMQuotaExceeded``,
  ``UnauthorizedForget``): dead-lettered at once, retrying cannot help;
- programming errors (``TypeError``, ``KeyError``, ...): dead-lettered at once with reason
  ``bug`` and the traceback logged, never retried as if they were a flaky network;
- anything else (a flaky LLM, store or embedder): retried with backoff, then dead-lettered
  with reason ``exhausted``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from schemas.errors import InvalidEvent, LLMQuotaExceeded, UnauthorizedForget

BUGS = (TypeError, KeyError, AttributeError, IndexError, NameError, AssertionError, LookupError)
PERMANENT = (InvalidEvent, LLMQuotaExceeded, UnauthorizedForget)


class Verdict(StrEnum):
    RETRY = "retry"
    DEAD_LETTER = "dead_letter"


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    reason: str  # the dead letter's ``error`` header and the metric label
    delay_s: float = 0.0


ErrorPolicy = Callable[[BaseException, int], Decision]


def default_policy(max_attempts: int, base_delay_s: float = 0.2) -> ErrorPolicy:
    """Retry transient failures up to ``max_attempts`` in all, with exponential backoff."""

    def decide(exc: BaseException, attempt: int) -> Decision:
        if isinstance(exc, InvalidEvent):
            return Decision(Verdict.DEAD_LETTER, "invalid")
        if isinstance(exc, PERMANENT):
            return Decision(Verdict.DEAD_LETTER, "permanent")
        if isinstance(exc, BUGS):
            return Decision(Verdict.DEAD_LETTER, "bug")
        if attempt >= max_attempts:
            return Decision(Verdict.DEAD_LETTER, "exhausted")
        return Decision(Verdict.RETRY, "transient", base_delay_s * 2 ** (attempt - 1))

    return decide
