"""The token bucket of each key, on an injected clock, and the rate limit's written form."""

from __future__ import annotations

import pytest

from schemas.tenants import Limit, parse_limit
from service.rate_limit import MAX_TENANT_LABELS, RateLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_then_the_rate_then_a_wait_that_says_how_long() -> None:
    clock = Clock()
    limiter = RateLimiter(clock)
    limit = Limit(rate=2.0, burst=3)
    assert [limiter.wait_s("k", limit) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.wait_s("k", limit) == pytest.approx(0.5)  # one token back in 1/2 s
    clock.now += 0.5
    assert limiter.wait_s("k", limit) == 0.0
    assert limiter.wait_s("other", limit) == 0.0, "each key has its own bucket"
    clock.now += 60
    assert [limiter.wait_s("k", limit) for _ in range(4)][-1] > 0, "refills to the burst only"


def test_the_written_form() -> None:
    assert parse_limit("20/50") == Limit(20.0, 50)
    assert parse_limit("0.5") == Limit(0.5, 1)
    assert parse_limit("") is None
    assert parse_limit("0") is None
    with pytest.raises(ValueError, match="RATE"):
        parse_limit("fast")
    with pytest.raises(ValueError, match="burst"):
        parse_limit("5/0")


def test_tenant_labels_are_bounded() -> None:
    limiter = RateLimiter()
    labels = {limiter.tenant_label(f"t{i}") for i in range(MAX_TENANT_LABELS + 50)}
    assert len(labels) == MAX_TENANT_LABELS + 1
    assert "other" in labels
    assert limiter.tenant_label("t0") == "t0", "a tenant keeps its label"
