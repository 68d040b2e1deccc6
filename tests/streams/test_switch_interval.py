"""The GIL switch interval: half a millisecond, set by `memoryos` before its command runs."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from streams.switch_interval import SWITCH_INTERVAL_MS, set_switch_interval


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    before = sys.getswitchinterval()
    yield
    sys.setswitchinterval(before)


def test_the_interval_is_set_in_milliseconds() -> None:
    sys.setswitchinterval(0.005)  # Python's own
    set_switch_interval()
    assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL_MS / 1000) == 0.0005


def test_memoryos_sets_it_before_the_command_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    from streams import cli
    from streams.commands import inspect

    sys.setswitchinterval(0.005)
    ran: list[float] = []
    monkeypatch.setattr(
        inspect, "main", lambda args, settings: ran.append(sys.getswitchinterval()) or 0
    )
    assert cli.main(["inspect", "alice"]) == 0
    assert ran == [pytest.approx(0.0005)], "set before the command ran"
