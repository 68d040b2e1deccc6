"""``GET /v1/users``: the users a tenant holds, paged (scope ``admin``).

A user is listed once the pipeline holds memory of them (their data key exists: the chain stage
made it for their first turn); a DELETE makes a key of a new generation, so a deleted user stays
listed, with an empty memory (a known limit); ids in order, ``cursor`` the last id of the
previous page.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import FastAPI, Query

from adapters.keyring import KEY_DOC
from adapters.repository import MemoryRepository
from memoryos_client.models import UserList, error_responses
from schemas.tenants import tenant_of, user_of
from schemas.turn import ID_PATTERN
from service.auth import Admin


def add_user_routes(app: FastAPI, repo: MemoryRepository) -> None:
    @app.get("/v1/users", response_model=UserList, responses=error_responses(401, 403, 422, 429))
    async def list_users(
        who: Admin,
        cursor: Annotated[str | None, Query(pattern=ID_PATTERN, max_length=128)] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> dict[str, Any]:
        """The tenant's users with memory, ``limit`` at a time after ``cursor``."""
        mine = [
            user_of(ref)
            for ref in await repo.users_holding(KEY_DOC)
            if tenant_of(ref) == who.tenant
        ]
        mine.sort()
        after = [user for user in mine if cursor is None or user > cursor]
        page = after[:limit]
        more = len(after) > limit
        return {"users": page, "next_cursor": page[-1] if more else None}
