"""``GET /v1/export`` and ``POST /v1/import``: a tenant's memory out as NDJSON, and back in
(scope ``admin``; ``adapters/export.py`` says what the lines hold)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

import orjson
from fastapi import FastAPI, Query, Request
from fastapi.responses import StreamingResponse

from adapters.export import FORMAT, header, import_lines, tenant_lines, tenant_refs
from adapters.keyring import KEY_DOC
from adapters.repository import MemoryRepository
from memoryos_client.models import Imported, error_responses
from schemas.errors import Forbidden, InvalidEvent
from schemas.tenants import valid_tenant
from schemas.turn import ID_PATTERN
from service.auth import Admin

NDJSON = "application/x-ndjson"


def add_export_routes(app: FastAPI, repo: MemoryRepository, dim: int) -> None:
    @app.get(
        "/v1/export",
        responses=error_responses(401, 403, 422, 429) | {200: {"content": {NDJSON: {}}}},
        response_class=StreamingResponse,
    )
    async def export(
        who: Admin,
        user_id: Annotated[str | None, Query(pattern=ID_PATTERN, max_length=128)] = None,
    ) -> StreamingResponse:
        """The tenant's memory (or one user's) as NDJSON: a header line, then one line per
        stored point. A user being deleted is left out."""
        refs = tenant_refs(await repo.users_holding(KEY_DOC), who.tenant, user_id)
        first = header(who.tenant, await repo.stored_embedder(), dim)

        async def lines() -> AsyncIterator[bytes]:
            yield orjson.dumps(first) + b"\n"
            async for line in tenant_lines(repo, who.tenant, refs):
                yield orjson.dumps(line) + b"\n"

        return StreamingResponse(lines(), media_type=NDJSON)

    @app.post(
        "/v1/import",
        response_model=Imported,
        responses=error_responses(400, 401, 403, 413, 422, 429, 503),
        openapi_extra={"requestBody": {"content": {NDJSON: {"schema": {"type": "string"}}}}},
    )
    async def import_(request: Request, who: Admin) -> dict[str, Any]:
        """Points of an export (its header line first), upserted as they are: importing twice
        changes nothing. The operator's key only; every point must be of the header's tenant."""
        raw = [line for line in (await request.body()).splitlines() if line.strip()]
        try:
            parsed = [orjson.loads(line) for line in raw]
        except orjson.JSONDecodeError as exc:
            raise InvalidEvent(f"the body is not NDJSON: {exc}", field="body") from None
        if not parsed or not isinstance(parsed[0], dict) or parsed[0].get("format") != FORMAT:
            raise InvalidEvent(f"the first line must be the {FORMAT} header", field="body")
        head = parsed[0]
        tenant = str(head.get("tenant", ""))
        if not who.operator:  # it writes store points as they are: the deployment's to do
            raise Forbidden("only the operator's key (MEMORYOS_API_KEYS) imports")
        if not valid_tenant(tenant):
            raise InvalidEvent("the header names no valid tenant", field="body")
        stored = await repo.stored_embedder()
        if head.get("dim") != dim or (stored and head.get("embedder") not in (None, stored)):
            raise InvalidEvent(
                f"the export's vectors ({head.get('embedder')}, {head.get('dim')}) are not this "
                f"store's ({stored}, {dim}): import into a deployment with the same embedder",
                field="body",
            )
        lines = [line for line in parsed[1:] if isinstance(line, dict)]
        if len(lines) != len(parsed) - 1:
            raise InvalidEvent("every line after the header must be a JSON object", field="body")
        return {"tenant": tenant, "imported": await import_lines(repo, tenant, dim, lines)}
