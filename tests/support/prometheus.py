"""Prometheus' own binaries for the deploy tests: `promtool` and a throw-away `prometheus`.

Both come from Debian's `prometheus` package (.ci/run installs it). A machine without them
fails the tests that need them, naming the package: a skip would hide that the alert rules
and the dashboard went untested.
"""

from __future__ import annotations

import shutil

import pytest

PACKAGE = "prometheus"


def binary(name: str) -> str:
    """The path of `prometheus` or `promtool`, or a failure that says what to install."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(
            f"{name} is not on PATH: install Debian's {PACKAGE!r} package "
            f"(apt-get install -y {PACKAGE}); .ci/run does this before `make test`",
            pytrace=False,
        )
    return path
