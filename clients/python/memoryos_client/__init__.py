"""A Python client for the MemoryOS Streams HTTP API: ``MemoryClient`` and
``AsyncMemoryClient`` (httpx), typed results (the API's own response models) and the API's
errors as exceptions. It imports neither Faust nor the pipeline: install the package and talk
to any `memoryos up` or `memoryos serve`."""

from memoryos_client.aio import AsyncMemoryClient
from memoryos_client.errors import (
    APIError,
    BadRequest,
    Conflict,
    ConnectionFailed,
    Forbidden,
    InvalidInput,
    MemoryOSClientError,
    NotFoundError,
    PayloadTooLarge,
    RateLimited,
    ServiceUnavailable,
    Unauthorized,
    UnexpectedReply,
)
from memoryos_client.sync import MemoryClient

__all__ = [
    "APIError",
    "AsyncMemoryClient",
    "BadRequest",
    "Conflict",
    "ConnectionFailed",
    "Forbidden",
    "InvalidInput",
    "MemoryClient",
    "MemoryOSClientError",
    "NotFoundError",
    "PayloadTooLarge",
    "RateLimited",
    "ServiceUnavailable",
    "Unauthorized",
    "UnexpectedReply",
]
