"""POSTing a webhook: one httpx client, no redirects followed, the answer's body never read."""

from __future__ import annotations

import asyncio
from typing import Protocol

import httpx


class Poster(Protocol):
    async def post(self, url: str, body: bytes, headers: dict[str, str], timeout_s: float) -> int:
        """The answer's status; raises on a timeout or a connection that fails."""
        ...

    async def close(self) -> None: ...


class HttpPoster:
    """A receiver decides only by its status: its body is not read, so one that answers a
    huge body slowly costs a status line, and the whole request is bounded by ``timeout_s``.
    A redirect is an answer (3xx), not followed: a webhook URL names its receiver."""

    def __init__(self, max_connections: int = 100) -> None:
        self._limits = httpx.Limits(max_connections=max_connections)
        self._client: httpx.AsyncClient | None = None

    async def post(self, url: str, body: bytes, headers: dict[str, str], timeout_s: float) -> int:
        if self._client is None:  # made in the loop that uses it
            # the standard proxy variables apply, as to any HTTP client here
            self._client = httpx.AsyncClient(follow_redirects=False, limits=self._limits)
        async with asyncio.timeout(timeout_s):
            request = self._client.build_request(
                "POST", url, content=body, headers=headers, timeout=timeout_s
            )
            response = await self._client.send(request, stream=True)
            await response.aclose()
            return response.status_code

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
