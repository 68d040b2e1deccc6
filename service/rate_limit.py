"""Requests per second per API key, with a burst: a token bucket per key, in this process.

Each key's bucket holds up to ``burst`` requests and refills at ``rate`` a second; a request
that finds it empty is refused (429) with how long until a token is back (``Retry-After``).
Buckets are per service process: with several replicas behind a balancer a key gets up to the
rate at each. A tenant's label on the refusals' counter is bounded (``MAX_TENANT_LABELS``
tenants by name, the rest as ``other``), so a flood of tenants cannot grow ``/metrics``.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from schemas.tenants import Limit

MAX_BUCKETS = 100_000  # keys with a bucket; the least recently used goes first
MAX_TENANT_LABELS = 100


class RateLimiter:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # tokens, at
        self._tenants: set[str] = set()

    def wait_s(self, key: str, limit: Limit) -> float:
        """0.0 and one token taken, or the seconds until ``key`` has a token again."""
        now = self.clock()
        tokens, at = self._buckets.pop(key, (float(limit.burst), now))
        tokens = min(float(limit.burst), tokens + (now - at) * limit.rate)
        if tokens >= 1.0:
            self._remember(key, (tokens - 1.0, now))
            return 0.0
        self._remember(key, (tokens, now))
        return (1.0 - tokens) / limit.rate

    def tenant_label(self, tenant: str) -> str:
        if tenant in self._tenants or len(self._tenants) < MAX_TENANT_LABELS:
            self._tenants.add(tenant)
            return tenant
        return "other"

    def _remember(self, key: str, bucket: tuple[float, float]) -> None:
        self._buckets[key] = bucket
        if len(self._buckets) > MAX_BUCKETS:
            self._buckets.popitem(last=False)
