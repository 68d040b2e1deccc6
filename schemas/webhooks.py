"""A webhook as ``MEMORYOS_WEBHOOKS`` names it: where to POST, the signing secret, which types."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from schemas.events import EVENT_TYPES
from schemas.records import Record

MAX_WEBHOOKS = 20
_UNSAFE = re.compile(r"[\s\x00-\x1f\x7f]")
SECRET_PREFIX = "whsec_"


class Webhook(Record):
    url: str = Field(max_length=2000)
    secret: str = Field(repr=False)
    types: list[str] | None = Field(None, description="event types wanted; all when absent")

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        """One that can be called: http(s), a host, a port in range, no spaces or control
        characters (a header could be smuggled in), an ASCII host (IDNA-encode it first)."""
        if _UNSAFE.search(value):
            raise ValueError("a webhook url must not hold spaces or control characters")
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("a webhook url must be http(s)://host/...")
        if parts.username or parts.password:
            raise ValueError("a webhook url must not carry credentials: sign with the secret")
        if not parts.hostname.isascii():
            raise ValueError("a webhook url's host must be ASCII (its IDNA form: xn--...)")
        try:
            port = parts.port  # raises for a port out of range or not a number
        except ValueError:
            port = 0
        if port == 0:
            raise ValueError("a webhook url's port must be a number from 1 to 65535")
        return value

    @field_validator("secret")
    @classmethod
    def _standard_secret(cls, value: str) -> str:
        """Standard Webhooks' form: whsec_ and the key in base64 (24 to 64 bytes)."""
        if not value.startswith(SECRET_PREFIX):
            raise ValueError("a webhook secret must be whsec_<base64 key>")
        try:
            key = base64.b64decode(value.removeprefix(SECRET_PREFIX), validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("a webhook secret must be whsec_<base64 key>: not base64") from None
        if not 24 <= len(key) <= 64:
            raise ValueError(f"a webhook secret's key must be 24 to 64 bytes, not {len(key)}")
        return value

    @field_validator("types")
    @classmethod
    def _known_types(cls, value: list[str] | None) -> list[str] | None:
        unknown = sorted(set(value or ()) - set(EVENT_TYPES))
        if unknown:
            raise ValueError(f"unknown event types {unknown}; known: {', '.join(EVENT_TYPES)}")
        return value

    @property
    def key(self) -> bytes:
        return base64.b64decode(self.secret.removeprefix(SECRET_PREFIX))

    @property
    def ref(self) -> str:
        """How a dead letter names it: a digest of its URL, never the URL (a receiver's path
        or query may hold its own credential)."""
        return hashlib.sha256(self.url.encode()).hexdigest()[:16]

    @property
    def name(self) -> str:
        """How metrics and logs name it: its host and port, never its path or query."""
        parts = urlsplit(self.url)
        return f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)

    def wants(self, event_type: str) -> bool:
        return self.types is None or event_type in self.types


def signature(key: bytes, msg_id: str, timestamp: int, body: bytes) -> str:
    """Standard Webhooks' ``webhook-signature``: v1 and the base64 HMAC-SHA256 of
    ``{id}.{timestamp}.{body}``."""
    content = f"{msg_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, content, hashlib.sha256).digest()).decode()
