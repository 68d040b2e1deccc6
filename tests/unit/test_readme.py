"""The README documents every setting and every command (a test fails when one is added)."""

from __future__ import annotations

from pathlib import Path

from adapters.settings import ENV_PREFIX, Settings
from streams.cli import build_parser

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_every_setting_is_in_the_configuration_table() -> None:
    missing = [
        ENV_PREFIX + name.upper()
        for name in Settings.model_fields
        if f"`{ENV_PREFIX + name.upper()}`" not in README
    ]
    assert not missing, f"README configuration table lacks {missing}"


def test_every_command_is_documented() -> None:
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    missing = [name for name in commands if f"memoryos {name}" not in README]
    assert not missing, f"README lacks commands {missing}"


def test_readme_opens_with_the_two_commands() -> None:
    head = README[:1500]
    assert "make run" in head
    assert "make test" in head
