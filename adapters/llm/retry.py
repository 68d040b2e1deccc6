"""The retry loop (and client set-up) shared by the OpenAI chat and embedding adapters.

The ``openai`` client is built with ``max_retries=0``: this loop owns retrying so that the
policy (full-jitter exponential backoff, Retry-After, no retry on exhausted quota) is the same
for every call, is observable, and can be tested with an injected sleep and random source.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import aiohttp
import openai
from openai import AsyncOpenAI, DefaultAioHttpClient

from adapters.settings import Settings
from schemas.errors import MemoryOSError

log = logging.getLogger(__name__)

T = TypeVar("T")
Sleep = Callable[[float], Awaitable[None]]

# A provider asking for more than this is treated as asking for this: a worker blocked for
# longer would miss its Kafka session timeout, and the event would be redelivered anyway.
RETRY_AFTER_CEILING_S = 300.0
DEFAULT_BASE_URL = "https://api.openai.com/v1"
# Without a key the client refuses to start; OpenAI-compatible local servers ignore it.
NO_KEY = "not-needed"


def openai_client(settings: Settings) -> AsyncOpenAI:
    """The async client with its own retries off; key and URL passed explicitly, so the
    client does not fall back to reading the environment (Settings already did).

    Its HTTP goes through aiohttp (the client's own ``DefaultAioHttpClient``): more turns per
    second with many calls in flight in side-by-side runs of the bench's LLM part, though one
    full bench disagreed (docs/benchmarks.md, "The hot path, fourth pass"). Replies that are not
    HTTP surface as aiohttp's errors, which ``is_retryable`` takes as transient."""
    return AsyncOpenAI(
        api_key=settings.openai_key or NO_KEY,
        base_url=settings.openai_base_url or DEFAULT_BASE_URL,
        max_retries=0,
        timeout=settings.llm_timeout_s,
        http_client=DefaultAioHttpClient(timeout=settings.llm_timeout_s),
    )


@dataclass
class TaskUsage:
    calls: int = 0  # HTTP attempts, retries included
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failures: int = 0  # attempts that raised, and replies that could not be parsed
    fallbacks: int = 0  # tasks answered by the offline backend after a failed repair


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int
    base_s: float
    max_s: float

    @classmethod
    def from_settings(cls, settings: Settings) -> RetryPolicy:
        return cls(
            max_retries=settings.llm_max_retries,
            base_s=settings.llm_backoff_base_s,
            max_s=settings.llm_backoff_max_s,
        )

    def backoff(self, attempt: int, rng: random.Random) -> float:
        """Full jitter: uniform in [0, min(cap, base * 2**attempt)] (attempt counts from 0)."""
        ceiling = min(self.max_s, self.base_s * 2.0 ** min(attempt, 62))
        return rng.uniform(0.0, ceiling)


def is_quota_error(error: BaseException) -> bool:
    """A 429 that says the account has no quota left: waiting will not help."""
    if isinstance(error, ErrorReply):
        return error.quota
    if not isinstance(error, openai.RateLimitError):
        return False
    return "insufficient_quota" in (error.code, error.type)


class AttemptTimeout(Exception):
    """An attempt with no whole answer within the call's timeout: retried like a 5xx."""


class ErrorReply(Exception):
    """A 200 whose body is the provider's error object, not an answer (some proxies send it):
    retried like a 5xx, unless its type says the request itself is wrong or the quota spent."""

    PERMANENT = frozenset(
        {"invalid_request_error", "authentication_error", "permission_error", "not_found_error"}
    )

    def __init__(self, error: object, body: bytes) -> None:
        fields = error if isinstance(error, dict) else {}
        kind, code, message = (
            value if isinstance(value := fields.get(key), str) else None
            for key in ("type", "code", "message")
        )
        # its own message, or the body's start: never the repr of a nested object of any depth
        text = message if message is not None else body[:200].decode(errors="replace")
        super().__init__(f"the body is an error: {text[:200]}")
        self.quota = "insufficient_quota" in (kind, code)
        self.transient = not self.quota and kind not in self.PERMANENT


def is_retryable(error: BaseException) -> bool:
    if isinstance(error, ErrorReply):
        return error.transient
    if isinstance(error, (openai.APIConnectionError, AttemptTimeout)):  # APITimeoutError too
        return True
    if isinstance(error, aiohttp.ClientResponseError):
        # the one error the aiohttp transport leaves unmapped: a reply that is not HTTP (a bad
        # status line, an oversized header), retried as httpx's protocol errors were; aiohttp's
        # other errors (a bad URL, a certificate) are not transient
        return True
    if isinstance(error, openai.APIStatusError):
        return error.status_code == 429 or error.status_code >= 500
    return False


def retry_after_s(error: BaseException) -> float | None:
    """Seconds the server asked us to wait (``retry-after-ms`` or ``retry-after``), if any."""
    if not isinstance(error, openai.APIStatusError):
        return None
    headers = error.response.headers
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            seconds = float(raw) / divisor
        except ValueError:
            continue  # an HTTP date: rare from LLM providers; fall back to our own backoff
        if math.isfinite(seconds) and seconds >= 0:
            return min(seconds, RETRY_AFTER_CEILING_S)
    return None


def describe(error: BaseException) -> str:
    if isinstance(error, openai.APIStatusError):
        return f"HTTP {error.status_code}: {error.message}"
    return f"{type(error).__name__}: {error}"


async def call_with_retries(
    call: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    what: str,
    error: type[MemoryOSError],
    quota_error: type[MemoryOSError],
    sleep: Sleep = asyncio.sleep,
    rng: random.Random | None = None,
    on_failure: Callable[[BaseException], None] | None = None,
) -> T:
    """Run ``call``; retry transient failures; raise ``error`` (or ``quota_error``) at the end.

    ``on_failure`` sees every failed attempt (for usage counters). Non-retryable API errors
    (400, 401, 404, ...) are raised at once as ``error``; other exceptions propagate untouched.
    """
    rng = rng or random.Random()
    attempt = 0
    while True:
        try:
            return await call()
        except (
            openai.OpenAIError,
            aiohttp.ClientResponseError,
            AttemptTimeout,
            ErrorReply,
        ) as exc:
            if on_failure is not None:
                on_failure(exc)
            if is_quota_error(exc):
                raise quota_error(f"{what}: provider quota exhausted ({describe(exc)})") from exc
            if not is_retryable(exc):
                raise error(f"{what}: {describe(exc)}") from exc
            if attempt >= policy.max_retries:
                raise error(
                    f"{what}: gave up after {attempt + 1} attempts ({describe(exc)})"
                ) from exc
            delay = policy.backoff(attempt, rng)
            asked = retry_after_s(exc)
            if asked is not None:
                delay = max(delay, asked)
            log.info("%s: %s; retry %d in %.2fs", what, describe(exc), attempt + 1, delay)
            attempt += 1
            await sleep(delay)


@contextlib.asynccontextmanager
async def whole_answer_within(timeout_s: float) -> AsyncIterator[None]:
    """Bound one attempt, from the moment it holds its slot among the calls in flight to its
    answer's last byte: the HTTP client's own timeout bounds each read, so a server sending
    its answer a byte at a time would hold the call, and its slot, for good. Past the bound
    the attempt fails with ``AttemptTimeout``, a transient failure."""
    bound = asyncio.timeout(timeout_s)
    try:
        async with bound:
            yield
    except TimeoutError as exc:
        if not bound.expired():
            raise
        raise AttemptTimeout(f"no whole answer within {timeout_s:g} s") from exc
