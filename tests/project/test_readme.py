"""The docs document every setting and every command (a test fails when one is added or the
page is stale), and the README stays a front door."""

from __future__ import annotations

from adapters import settings_doc
from adapters.settings import ENV_PREFIX, Settings
from streams.cli import build_parser
from tests.support.paths import ROOT

README = (ROOT / "README.md").read_text()
CONFIGURATION = (ROOT / "docs" / "configuration.md").read_text()
USAGE = (ROOT / "docs" / "usage.md").read_text()


def test_every_setting_is_in_the_configuration_table() -> None:
    missing = [
        ENV_PREFIX + name.upper()
        for name in Settings.model_fields
        if f"`{ENV_PREFIX + name.upper()}`" not in CONFIGURATION
    ]
    assert not missing, f"docs/configuration.md lacks {missing}"


def test_the_configuration_page_is_made_from_the_settings() -> None:
    assert settings_doc.render() == CONFIGURATION, "stale: run `make docs`"


def test_every_command_is_documented() -> None:
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    missing = [name for name in commands if f"memoryos {name}" not in USAGE]
    assert not missing, f"docs/usage.md lacks commands {missing}"


def test_readme_opens_with_the_two_commands() -> None:
    head = README[:1500]
    assert "make run" in head
    assert "make test" in head


def test_the_readme_is_a_front_door_and_its_links_resolve() -> None:
    import re

    assert len(README.splitlines()) <= 300
    for target in re.findall(r"\]\(([^)#]+)\)", README):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), target
