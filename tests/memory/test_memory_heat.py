"""Heat (paper eq. 4) computed by hand from the formula."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.settings import Settings
from memory.heat import HeatParams, heat, recency

PAPER = HeatParams()


def test_paper_defaults() -> None:
    assert HeatParams(alpha=1.0, beta=1.0, gamma=1.0, mu=1e7) == PAPER


def test_heat_by_hand_with_paper_parameters() -> None:
    # 2 visits, 3 pages, last access exactly one time constant ago
    assert heat(2, 3, last_access=0.0, now=1e7, params=PAPER) == pytest.approx(5 + math.exp(-1))


def test_each_weight_multiplies_its_own_term() -> None:
    params = HeatParams(alpha=2.0, beta=3.0, gamma=5.0, mu=100.0)
    value = heat(7, 11, last_access=1_000.0, now=1_100.0, params=params)
    assert value == pytest.approx(2 * 7 + 3 * 11 + 5 * math.exp(-1))


def test_gamma_scales_recency() -> None:
    fresh = heat(0, 0, last_access=10.0, now=10.0, params=HeatParams(gamma=4.0))
    assert fresh == pytest.approx(4.0)


def test_recency_decays_exponentially_with_mu() -> None:
    assert recency(0.0, 0.0, 1e7) == 1.0
    assert recency(0.0, 2e7, 1e7) == pytest.approx(math.exp(-2))
    assert recency(50.0, 80.0, 10.0) == pytest.approx(math.exp(-3))


def test_clock_going_backwards_counts_as_now() -> None:
    assert recency(last_access=1_000.0, now=10.0, mu=1e7) == 1.0
    value = heat(1, 1, last_access=1e12, now=0.0, params=PAPER)
    assert math.isfinite(value)
    assert value == 3.0


@pytest.mark.parametrize("mu", [0.0, -1.0, math.nan])
def test_mu_must_be_positive(mu: float) -> None:
    with pytest.raises(ValueError, match="mu"):
        recency(0.0, 1.0, mu)
    with pytest.raises(ValueError, match="mu"):
        HeatParams(mu=mu)


def test_from_settings_takes_every_weight() -> None:
    settings = Settings(heat_alpha=0.5, heat_beta=2.0, heat_gamma=3.0, heat_mu=60.0)
    assert settings.heat_params == HeatParams(0.5, 2.0, 3.0, 60.0)
    assert Settings().heat_params == PAPER


@given(
    last=st.floats(-1e12, 1e12),
    now=st.floats(-1e12, 1e12),
    mu=st.floats(1e-3, 1e9),
)
def test_recency_stays_in_unit_interval(last: float, now: float, mu: float) -> None:
    value = recency(last, now, mu)
    assert 0.0 <= value <= 1.0


@given(last=st.floats(0, 1e9), now=st.floats(0, 1e9), later=st.floats(0, 1e9))
def test_recency_never_rises_as_time_passes(last: float, now: float, later: float) -> None:
    assert recency(last, now + later, 1e7) <= recency(last, now, 1e7)
