"""The GIL switch interval setting: applied when positive, Python's own kept at 0."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from adapters.settings import load_settings
from adapters.switch_interval import set_switch_interval
from schemas.errors import ConfigError


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    before = sys.getswitchinterval()
    yield
    sys.setswitchinterval(before)


def test_a_positive_interval_is_set_in_milliseconds() -> None:
    set_switch_interval(0.5)
    assert sys.getswitchinterval() == pytest.approx(0.0005)


def test_zero_keeps_what_the_process_has() -> None:
    sys.setswitchinterval(0.005)
    set_switch_interval(0)
    assert sys.getswitchinterval() == pytest.approx(0.005)


def test_the_setting_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORYOS_GIL_SWITCH_INTERVAL_MS", "2")
    assert load_settings().gil_switch_interval_ms == 2.0
    monkeypatch.setenv("MEMORYOS_GIL_SWITCH_INTERVAL_MS", "-1")
    with pytest.raises(ConfigError, match="MEMORYOS_GIL_SWITCH_INTERVAL_MS"):
        load_settings()


def test_memoryos_sets_it_from_the_settings_before_the_command_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from streams import cli
    from streams.commands import inspect

    seen: list[float] = []
    ran: list[float] = []
    monkeypatch.setattr(cli, "set_switch_interval", seen.append)
    monkeypatch.setattr(inspect, "main", lambda args, settings: ran.append(len(seen)) or 0)
    monkeypatch.setenv("MEMORYOS_GIL_SWITCH_INTERVAL_MS", "0.7")
    assert cli.main(["inspect", "alice"]) == 0
    assert seen == [0.7]
    assert ran == [1], "set before the command ran"
