"""Tenants: every user belongs to one, and a user id is unique only within its tenant.

Inside the pipeline a user is one string, its *reference*: the user id itself in the
``default`` tenant (so existing data, topics and clients are unchanged), ``<tenant>/<user id>``
in any other. A user id cannot hold ``/``, so two tenants' users never share a reference: the
store's filters, the record keys, the tables, the caches, the locks and the dead letters all
work on references and keep tenants apart without knowing of them. Only the entries (HTTP,
MCP, the CLI) turn a tenant and a user id into a reference, and a reference back into the user
id their caller knows.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import get_args

# the API's models hold these (one definition for the server and the Python client)
from memoryos_client.models import TENANT_PATTERN as TENANT_PATTERN
from memoryos_client.models import Scope as Scope

DEFAULT_TENANT = "default"
SEPARATOR = "/"

SCOPES: tuple[Scope, ...] = get_args(Scope)
MIN_RATE, MAX_RATE = 0.001, 100_000.0
_LIMIT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:/\s*(\d+))?\s*$")


def valid_tenant(tenant: str) -> bool:
    return re.fullmatch(TENANT_PATTERN, tenant) is not None


def reference(tenant: str, user_id: str) -> str:
    """The pipeline's name for ``user_id`` of ``tenant``."""
    return user_id if tenant == DEFAULT_TENANT else f"{tenant}{SEPARATOR}{user_id}"


def tenant_of(ref: str) -> str:
    tenant, separator, _ = ref.partition(SEPARATOR)
    return tenant if separator else DEFAULT_TENANT


def user_of(ref: str) -> str:
    """The user id the tenant's callers know."""
    _, separator, user_id = ref.partition(SEPARATOR)
    return user_id if separator else ref


def parse_scopes(text: str) -> tuple[Scope, ...]:
    """``read,write`` -> ("read", "write"); ValueError naming what is not a scope."""
    named = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [part for part in named if part not in SCOPES]
    if unknown or not named:
        raise ValueError(
            f"scopes must be a comma-separated list of {', '.join(SCOPES)}; got {text!r}"
        )
    return tuple(scope for scope in SCOPES if scope in named)


@dataclass(frozen=True)
class Limit:
    rate: float  # requests per second
    burst: int  # requests at once after a pause

    def text(self) -> str:
        """The written form ``parse_limit`` reads back (no exponent)."""
        rate = f"{self.rate:.3f}".rstrip("0").rstrip(".")
        return f"{rate}/{self.burst}"


def parse_limit(text: str | None) -> Limit | None:
    """``"20"`` (20 a second, a burst of 20) or ``"20/50"`` (a burst of 50); empty or 0: none.
    ValueError says what the form is."""
    if text is None or not text.strip():
        return None
    match = _LIMIT.fullmatch(text)
    if match is None:
        raise ValueError(
            f"a rate limit is RATE or RATE/BURST (requests a second), e.g. 20/50; got {text!r}"
        )
    rate = float(match.group(1))
    if rate == 0:
        return None
    if not MIN_RATE <= rate <= MAX_RATE:
        raise ValueError(f"a rate limit is {MIN_RATE:g} to {MAX_RATE:,.0f} requests a second")
    burst = int(match.group(2)) if match.group(2) else max(1, math.ceil(rate))
    if not 1 <= burst <= MAX_RATE:
        raise ValueError(f"a rate limit's burst is 1 to {MAX_RATE:,.0f}")
    return Limit(rate, burst)
