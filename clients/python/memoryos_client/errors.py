"""The API's errors as exceptions: one class per status, the service's message and field."""

from __future__ import annotations


class MemoryOSClientError(Exception):
    """Anything the client raises."""


class ConnectionFailed(MemoryOSClientError):
    """No reply: the service is not running at that URL, or the connection broke."""


class APIError(MemoryOSClientError):
    """The service answered with an error: ``status``, its ``message`` and the ``field``."""

    def __init__(
        self,
        status: int,
        message: str,
        field: str | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(f"{status}: {message}" + (f" (field: {field})" if field else ""))
        self.status = status
        self.message = message
        self.field = field
        self.retry_after_s = retry_after_s  # the Retry-After header, when the service sent one


class UnexpectedReply(APIError):
    """A 2xx the client cannot read (not JSON, or not the API's model: another service at
    the URL, or a server newer than this client), or a redirect, which the API never sends."""


class BadRequest(APIError):
    """400: the body is not valid JSON."""


class Unauthorized(APIError):
    """401: a missing or wrong API key."""


class Forbidden(APIError):
    """403: the key lacks the scope this call needs (read, write, forget, admin)."""


class NotFoundError(APIError):
    """404: no such route (is the URL the memory service's?), or no such object in the
    user's memory (a fact id unknown to that user)."""


class Conflict(APIError):
    """409: not in the user's present state: a fact edit while the user's DELETE has not
    completed. Send it again once the DELETE is done."""


class PayloadTooLarge(APIError):
    """413: the body is larger than MEMORYOS_MAX_BODY_BYTES."""


class InvalidInput(APIError):
    """422: a field is missing, of the wrong type or too long; ``field`` names it."""


class RateLimited(APIError):
    """429: the key is over its requests per second; the message says when to retry."""


class ServiceUnavailable(APIError):
    """503: a backend (store, LLM, embedder, broker, journal) failed; retry later. With
    ``retry_after_s`` the embedded broker is restarting (a log roll): the write was refused
    with nothing of it written, so sending it again as is after that long is safe."""


BY_STATUS: dict[int, type[APIError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFoundError,
    409: Conflict,
    413: PayloadTooLarge,
    422: InvalidInput,
    429: RateLimited,
    503: ServiceUnavailable,
}


def error_for(
    status: int, message: str, field: str | None, retry_after_s: float | None = None
) -> APIError:
    return BY_STATUS.get(status, APIError)(status, message, field, retry_after_s)
