"""Who a request acts for: a tenant and the scopes of its key.

Two kinds of key open the API:
- the operator's, ``MEMORYOS_API_KEYS``: the default tenant with every scope, and the keys of
  every tenant to manage;
- a tenant's, made by ``memoryos keys create`` (``adapters/api_keys.py``): its tenant only,
  within its scopes.
With neither configured the API is open, as the default tenant's operator, on loopback only
(``streams/stack.py`` refuses a wider bind without keys); once a tenant key exists every
request needs a key.
"""

from __future__ import annotations

import hmac
import re
import time
from dataclasses import dataclass, replace
from typing import Annotated, Any

from fastapi import Depends, Request

from adapters.api_keys import PREFIX, ApiKeys, KeyRecord
from schemas.errors import Forbidden, InvalidEvent
from schemas.tenants import DEFAULT_TENANT, SCOPES, Limit, Scope, parse_limit, reference
from schemas.turn import ID_PATTERN

OPEN_RECHECK_S = 2.0


@dataclass(frozen=True)
class Principal:
    tenant: str
    scopes: frozenset[Scope]
    key_id: str | None = None  # None: the operator (or an API without keys)
    limit: Limit | None = None  # requests per second and burst; None: none

    @property
    def operator(self) -> bool:
        return self.key_id is None

    def require(self, scope: Scope) -> None:
        if scope not in self.scopes:
            raise Forbidden(f"this key lacks the {scope!r} scope")

    def user(self, user_id: str, field: str = "user_id") -> str:
        """The pipeline's reference of the tenant's ``user_id`` (a public id: no tenant in it)."""
        if not re.fullmatch(ID_PATTERN, user_id):
            raise InvalidEvent(
                f"{field} must be 1-128 characters of letters, digits and . _ : @ -, starting "
                "with a letter or digit",
                field=field,
            )
        return reference(self.tenant, user_id)

    def manages(self, tenant: str) -> None:
        """Keys of ``tenant`` may be managed: by the operator, or by that tenant's admin."""
        self.require("admin")
        if not self.operator and tenant != self.tenant:
            raise Forbidden("a tenant's key manages only its own tenant's keys")


OPERATOR = Principal(DEFAULT_TENANT, frozenset(SCOPES))


class Gatekeeper:
    """Turns an Authorization header into a Principal, or None (401)."""

    def __init__(
        self, operator_keys: list[str], keys: ApiKeys | None, limit: Limit | None = None
    ) -> None:
        self.operator_keys = [key.encode() for key in operator_keys]
        self.keys = keys
        self.limit = limit  # MEMORYOS_RATE_LIMIT: of every key that names none
        self.tenant_keys = False  # a tenant key exists: then every request needs a key
        self._checked_at: float | None = None

    async def start(self) -> None:
        """Learn whether tenant keys exist (the store is open by the first request)."""
        self.tenant_keys = self.keys is not None and await self.keys.any_live()
        self._checked_at = time.monotonic()

    @property
    def open(self) -> bool:
        return not self.operator_keys and not self.tenant_keys

    async def principal(self, authorization: str) -> Principal | None:
        # While open, look again every few seconds: a key made by another process (the CLI
        # on a shared Qdrant server, another replica) closes this one too. With operator keys
        # it is never open, and a tenant key is checked whatever this flag says.
        stale = self._checked_at is None or time.monotonic() - self._checked_at > OPEN_RECHECK_S
        if not self.operator_keys and not self.tenant_keys and stale:
            await self.start()
        scheme, _, token = authorization.strip().partition(" ")
        supplied = token.strip() if scheme.lower() == "bearer" else ""
        if self.open and not supplied.startswith(PREFIX):
            return OPERATOR  # nobody to tell apart: no limit (a tenant key still acts as one)
        if not supplied:
            return None
        raw = supplied.encode("latin-1", "replace")  # how the header arrived on the wire
        # every operator key is compared, in constant time, whatever matched before
        if any([hmac.compare_digest(raw, key) for key in self.operator_keys]):
            return replace(OPERATOR, limit=self.limit)
        if self.keys is None or not supplied.startswith(PREFIX):
            return None
        record = await self.keys.check(supplied)
        if record is None:
            return None
        return Principal(
            record.tenant, frozenset(record.scopes), record.key_id, self._limit_of(record)
        )

    def _limit_of(self, record: KeyRecord) -> Limit | None:
        """The key's own rate, else MEMORYOS_RATE_LIMIT (a stored rate that no longer reads,
        written by an older version, falls back to it too)."""
        try:
            own = parse_limit(record.rate_limit) if record.rate_limit else None
        except ValueError:
            own = None
        return own or self.limit


def needs(scope: Scope) -> Any:
    """A route's dependency: the request's principal, if its key has ``scope`` (else 403)."""

    async def principal(request: Request) -> Principal:
        found: Principal = request.state.principal
        found.require(scope)
        return found

    return Depends(principal)


Reader = Annotated[Principal, needs("read")]
Writer = Annotated[Principal, needs("write")]
Forgetter = Annotated[Principal, needs("forget")]
Admin = Annotated[Principal, needs("admin")]
