"""The HTTP app over the in-memory pipeline, with a journal and a key of each tenant: what the
route tests of facts, the client and MCP drive."""

from __future__ import annotations

from collections.abc import Sequence
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


@dataclass
class TenantApp:
    pipeline: Pipeline
    service: ResponseService
    app: FastAPI
    keys: ApiKeys
    journal: SqliteJournal
    secrets: dict[str, str] = field(default_factory=dict)  # each tenant's key

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
    app = create_http_app(service, Settings(), Metrics(), _ready, _ready, tenant_keys=keys)
    made = TenantApp(pipeline, service, app, keys, journal)
    for tenant in tenants:
        made.secrets[tenant] = (await keys.create(tenant, tuple(scopes)))[1]
    return made
