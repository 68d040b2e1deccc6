"""`memoryos ingest --wait`: follow the pipeline until every sent turn is placed in memory.

A turn is placed when its page is in the user's short-term or mid-term memory, as the HTTP API
(`GET /v1/users/{user}/memory`) shows it: the same view every reader of the memory gets, and
the only one another process can have of an embedded store. Heat-based forgetting may evict a
page before it is ever seen, so the wait ends when nothing new was placed for a while rather
than only when every page was seen.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from adapters.settings import Settings
from streams.progress import Progress

POLL_EVERY_S = 1.0
USERS_AT_ONCE = 8  # memory reads in flight: quick rounds, without crowding the service


@dataclass
class Placed:
    expected: int
    placed: int = 0
    short_term: int = 0
    mid_term: int = 0
    seconds: float = 0.0
    gave_up: str = ""
    missing: dict[str, set[str]] = field(default_factory=dict)  # user -> turn ids not seen

    @classmethod
    def expecting(cls, turns: dict[str, set[str]]) -> Placed:
        missing = {user: set(ids) for user, ids in turns.items() if ids}
        return cls(expected=sum(len(ids) for ids in missing.values()), missing=missing)


def service_url(settings: Settings, port: int | None = None) -> str:
    """Where a client on this machine reaches the service (a wildcard bind is not an address)."""
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::", "") else settings.host
    return f"http://{host}:{settings.port if port is None else port}"


def placed_turns(memory: dict[str, Any]) -> dict[str, str]:
    """turn id -> "short-term" or "mid-term", for every page in a memory document."""
    tiers = {page["turn_id"]: "short-term" for page in memory["short_term"]}
    for segment in memory["mid_term"]:
        tiers.update({page["turn_id"]: "mid-term" for page in segment["pages"]})
    return tiers


async def wait_placed(
    url: str,
    api_key: str | None,
    report: Placed,
    progress: Progress,
    stall_s: float,
    every_s: float = POLL_EVERY_S,
    transport: httpx.AsyncBaseTransport | None = None,
) -> None:
    """Poll each user's memory until every missing turn is placed, or none was for ``stall_s``.

    ``report`` is filled in as turns are found, so it is true even after a Ctrl-C.
    """
    progress.phase("placed", total=report.expected, unit="turns")
    started = last_placed = time.monotonic()
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    limit = asyncio.Semaphore(USERS_AT_ONCE)
    async with httpx.AsyncClient(
        base_url=url.rstrip("/"), headers=headers, timeout=30, transport=transport
    ) as client:

        async def look(user: str) -> None:
            async with limit:
                response = await client.get(f"/v1/users/{user}/memory")
            response.raise_for_status()
            found = placed_turns(response.json())
            for turn_id in report.missing[user] & found.keys():
                report.short_term += found[turn_id] == "short-term"
                report.mid_term += found[turn_id] == "mid-term"
                report.placed += 1
                progress.advance(1)
            report.missing[user] -= found.keys()

        reached = False
        while True:
            before = report.placed
            try:
                await asyncio.gather(*(look(user) for user, ids in report.missing.items() if ids))
                reached = True
            except httpx.HTTPError as exc:
                if not reached:  # a wrong --url or no service: say so at once
                    report.gave_up = f"cannot read memory from {url}: {exc}"
                    break
                progress.detail(f"service: {exc}")  # a restart in progress: keep trying
            report.missing = {user: ids for user, ids in report.missing.items() if ids}
            if report.placed > before:
                last_placed = time.monotonic()
            if not report.missing:
                break
            if time.monotonic() - last_placed > stall_s:
                report.gave_up = f"nothing new placed for {stall_s:.0f} s"
                break
            report.seconds = time.monotonic() - started
            await asyncio.sleep(every_s)
    report.seconds = time.monotonic() - started
