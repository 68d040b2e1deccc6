"""Segment heat (paper eq. 4): H = alpha N_visit + beta L_interaction + gamma R_recency.

R_recency = exp(-dt / mu) with dt the seconds since the segment's last access. Heat decides
both which segment leaves a full MTM (the coldest) and which one updates the persona (H > tau).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class HeatParams:
    """The heat weights and recency time constant; the defaults are the paper's."""

    alpha: float = 1.0
    beta: float = 1.0
    gamma: float = 1.0
    mu: float = 1e7

    def __post_init__(self) -> None:
        if not self.mu > 0.0:
            raise ValueError(f"mu must be a positive number of seconds, got {self.mu!r}")


def recency(last_access: float, now: float, mu: float) -> float:
    """exp(-dt / mu), with dt = max(0, now - last_access).

    Clocks of different processes disagree and can step backwards; an access "in the future"
    counts as happening now, so recency never exceeds 1 and a skewed clock cannot make a
    segment hotter than a fresh one.
    """
    if not mu > 0.0:
        raise ValueError(f"mu must be a positive number of seconds, got {mu!r}")
    elapsed = max(0.0, now - last_access)
    return math.exp(-elapsed / mu)


def heat(
    n_visit: int, l_interaction: int, last_access: float, now: float, params: HeatParams
) -> float:
    """alpha * N_visit + beta * L_interaction + gamma * exp(-dt / mu)."""
    return (
        params.alpha * n_visit
        + params.beta * l_interaction
        + params.gamma * recency(last_access, now, params.mu)
    )
