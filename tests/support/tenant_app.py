"""The HTTP app over the in-memory pipeline, with a journal and a key of each tenant: what the
route tests of facts, the client and MCP drive."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI

from adapters.api_keys import ApiKeys
from adapters.journal import SqliteJournal
from adapters.metrics import Metrics
from adapters.settings import Settings
from service.http import create_http_app
from service.response import ResponseService
from tests.support.fakes import Pipeline, make_deps


async def _ready() -> dict[str, Any]:
    return {"ready": True}


class Replays:
    """The dead-letter topic of these in-memory apps: records what it was asked to replay (the
    embedded stack's tests replay real dead letters)."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, Collection[tuple[str, int, int]] | None]] = []

    async def replay_user(
        self, user_ref: str, wanted: Collection[tuple[str, int, int]] | None
    ) -> dict[str, int]:
        self.asked.append((user_ref, wanted))
        return {"replayed": len(wanted or ()), "skipped": 0, "missing": 0}


@dataclass
class TenantApp:
    pipeline: Pipeline
    service: ResponseService
    app: FastAPI
    keys: ApiKeys
    journal: SqliteJournal
    secrets: dict[str, str] = field(default_factory=dict)  # each tenant's key
    replays: Replays = field(default_factory=lambda: Replays())

    def http(self, tenant: str, secret: str | None = None) -> httpx.AsyncClient:
        """A client of the app with ``tenant``'s key (or ``secret``)."""
        return httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app),
            base_url="http://memoryos",
            headers={"Authorization": f"Bearer {secret or self.secrets[tenant]}"},
        )


async def tenant_app(
    folder: Path,
    tenants: Sequence[str] = ("acme", "zeta"),
    scopes: Sequence[str] = ("read", "write", "forget"),
) -> TenantApp:
    deps = await make_deps()
    journal = SqliteJournal(folder / "journal.sqlite3")
    pipeline = Pipeline(deps, journal=journal)
    service = ResponseService(deps, pipeline, journal)
    keys = ApiKeys(deps.repo)
    replays = Replays()
    app = create_http_app(
        service, Settings(), Metrics(), _ready, _ready, tenant_keys=keys, dead_letters=replays
    )
    made = TenantApp(pipeline, service, app, keys, journal, replays=replays)
    for tenant in tenants:
        made.secrets[tenant] = (await keys.create(tenant, tuple(scopes)))[1]
    return made
