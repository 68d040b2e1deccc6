"""``/v1/keys``: a tenant's API keys, made, listed and revoked through a running service.

An admin key manages its own tenant's keys; the operator's (``MEMORYOS_API_KEYS``) every
tenant's. A new key is in the reply once and never again: only its hash is stored.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Path, Request

from adapters.api_keys import ApiKeys
from memoryos_client.models import KeyCreated, KeyIn, KeyList, KeyOut, WhoAmI, error_responses
from schemas.errors import Forbidden, InvalidEvent
from schemas.tenants import Limit, parse_limit
from service.auth import Admin, Gatekeeper, Principal

ERRORS = error_responses(401, 403, 404, 422, 503)


MAX_LIVE_KEYS = 100  # per tenant: each key has a bucket of its own


def _within_the_operators_rate(asked: str | None, operators: Limit | None) -> None:
    """A tenant's admin may give a key a lower rate than MEMORYOS_RATE_LIMIT, not a higher one
    (nor none at all); the operator may give any."""
    if operators is None or asked is None:
        return
    try:
        wanted = parse_limit(asked)
    except ValueError as exc:
        raise InvalidEvent(str(exc), field="rate_limit") from None
    if wanted is None or wanted.rate > operators.rate or wanted.burst > operators.burst:
        raise Forbidden(
            f"a tenant's key may have at most the deployment's rate ({operators.text()}); "
            "the operator's key may set more"
        )


def add_key_routes(app: FastAPI, keys: ApiKeys, gate: Gatekeeper) -> None:
    @app.get("/v1/whoami", response_model=WhoAmI, responses=error_responses(401, 503))
    async def whoami(request: Request) -> dict[str, Any]:
        """The tenant and scopes of the key this request carries."""
        who: Principal = request.state.principal
        return {"tenant": who.tenant, "scopes": sorted(who.scopes), "key_id": who.key_id}

    @app.post("/v1/keys", status_code=201, response_model=KeyCreated, responses=ERRORS)
    async def create_key(body: KeyIn, who: Admin) -> dict[str, Any]:
        tenant = body.tenant or who.tenant
        who.manages(tenant)
        if not who.operator:
            _within_the_operators_rate(body.rate_limit, gate.limit)
        live = [key for key in await keys.all(tenant) if key.revoked_at is None]
        if len(live) >= MAX_LIVE_KEYS:
            raise InvalidEvent(
                f"tenant {tenant} has {MAX_LIVE_KEYS} live keys, the most it may: revoke one first",
                field="tenant",
            )
        record, key = await keys.create(tenant, tuple(body.scopes), body.name, body.rate_limit)
        gate.tenant_keys = True
        return record.public() | {"key": key}

    @app.get("/v1/keys", response_model=KeyList, responses=ERRORS)
    async def list_keys(who: Admin, tenant: str | None = None) -> dict[str, Any]:
        wanted = tenant if who.operator else who.tenant
        if tenant is not None:
            who.manages(tenant)
        return {"keys": [record.public() for record in await keys.all(wanted)]}

    @app.delete("/v1/keys/{key_id}", response_model=KeyOut, responses=ERRORS)
    async def revoke_key(
        who: Admin,
        key_id: str = Path(pattern=r"^[0-9a-f]{16}$", description="the key's id"),
    ) -> dict[str, Any]:
        record = await keys.get(key_id)
        who.manages(record.tenant)
        return (await keys.revoke(key_id)).public()
