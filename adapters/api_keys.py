"""API keys of tenants, kept hashed in the store.

A key is ``mos_<key id>_<secret>``: the id names its record, the secret (32 random bytes) is
shown once, at creation, and only its SHA-256 is stored. The secret has the entropy of a random
key, so a fast hash is enough (there is nothing to guess), and a check compares digests in
constant time. Records are documents of a reserved owner, ``~keys`` (no user id can start with
``~``), so they live and are backed up with the rest of the store; every check reads the record,
so a revoked key is refused on its next request.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from adapters.doc_codec import doc_data
from adapters.ports import PERSONAS
from adapters.repository import MemoryRepository
from schemas.errors import InvalidEvent, NotFound
from schemas.tenants import SCOPES, Scope, parse_limit, valid_tenant

OWNER = "~keys"
KIND = "api_key:"
PREFIX = "mos_"
_KEY = re.compile(r"^mos_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$")
MAX_NAME_CHARS = 100


@dataclass(frozen=True)
class KeyRecord:
    key_id: str
    tenant: str
    scopes: tuple[Scope, ...]
    name: str = ""
    created_at: float = 0.0
    revoked_at: float | None = None
    rate_limit: str | None = None  # RATE/BURST of this key; None: MEMORYOS_RATE_LIMIT
    digest: str = field(default="", repr=False)

    def public(self) -> dict[str, Any]:
        """What a listing shows: never the digest."""
        shown = asdict(self)
        shown.pop("digest")
        shown["scopes"] = list(self.scopes)
        return shown

    @classmethod
    def from_doc(cls, data: dict[str, Any]) -> KeyRecord:
        scopes = tuple(scope for scope in SCOPES if scope in data.get("scopes", []))
        return cls(
            key_id=str(data["key_id"]),
            tenant=str(data["tenant"]),
            scopes=scopes,
            name=str(data.get("name", "")),
            created_at=float(data.get("created_at", 0.0)),
            revoked_at=data.get("revoked_at"),
            rate_limit=data.get("rate_limit"),
            digest=str(data.get("digest", "")),
        )


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class ApiKeys:
    def __init__(self, repo: MemoryRepository) -> None:
        self.repo = repo

    async def create(
        self, tenant: str, scopes: tuple[Scope, ...], name: str = "", rate_limit: str | None = None
    ) -> tuple[KeyRecord, str]:
        """A new key of ``tenant``: its record and the key itself (shown once, never stored)."""
        if not valid_tenant(tenant):
            raise InvalidEvent(
                "tenant must be 1-63 characters of lowercase letters, digits, _ and -, "
                "starting with a letter or digit",
                field="tenant",
            )
        if not scopes or any(scope not in SCOPES for scope in scopes):
            raise InvalidEvent(f"scopes must be some of {', '.join(SCOPES)}", field="scopes")
        if len(name) > MAX_NAME_CHARS:
            raise InvalidEvent(f"name is longer than {MAX_NAME_CHARS} characters", field="name")
        try:
            limit = parse_limit(rate_limit)
        except ValueError as exc:
            raise InvalidEvent(str(exc), field="rate_limit") from None
        key_id, secret = secrets.token_hex(8), secrets.token_urlsafe(32)
        shown = limit.text() if limit else None
        record = KeyRecord(key_id, tenant, scopes, name, time.time(), None, shown, _digest(secret))
        await self._save(record)
        return record, f"{PREFIX}{key_id}_{secret}"

    async def check(self, key: str) -> KeyRecord | None:
        """The live record of ``key``, or None (unknown, wrong secret, revoked)."""
        match = _KEY.fullmatch(key)
        if match is None:
            return None
        key_id, secret = match.groups()
        data = await self.repo.load_doc(OWNER, KIND + key_id)
        if data is None:
            hmac.compare_digest(_digest(secret), _digest(""))  # the same work either way
            return None
        record = KeyRecord.from_doc(data)
        if not hmac.compare_digest(_digest(secret), record.digest) or record.key_id != key_id:
            return None
        return None if record.revoked_at is not None else record

    async def all(self, tenant: str | None = None) -> list[KeyRecord]:
        """Every key (revoked ones too), of one tenant or of all, oldest first."""
        points = await self.repo.store.scroll(PERSONAS, OWNER)
        records = [
            KeyRecord.from_doc(doc_data(point.payload))
            for point in points
            if str(point.payload.get("kind", "")).startswith(KIND)
        ]
        mine = [r for r in records if tenant is None or r.tenant == tenant]
        return sorted(mine, key=lambda record: (record.created_at, record.key_id))

    async def any_live(self) -> bool:
        return any(record.revoked_at is None for record in await self.all())

    async def get(self, key_id: str) -> KeyRecord:
        data = await self.repo.load_doc(OWNER, KIND + key_id) if key_id.isalnum() else None
        if data is None:
            raise NotFound(f"no key {key_id!r}")
        return KeyRecord.from_doc(data)

    async def revoke(self, key_id: str) -> KeyRecord:
        """Revoke the key (kept, marked, for the audit); revoking twice keeps the first time."""
        record = await self.get(key_id)
        if record.revoked_at is None:
            record = KeyRecord(**{**asdict(record), "revoked_at": time.time()})
            await self._save(record)
        return record

    async def _save(self, record: KeyRecord) -> None:
        data = asdict(record) | {"scopes": list(record.scopes)}
        await self.repo.save_doc(OWNER, KIND + record.key_id, data)
        await self.repo.store.flush()  # a key handed out is durable
