"""`memoryos --help` reads as documentation: every command and argument explained, a version,
and the Commands table of docs/usage.md saying the same."""

from __future__ import annotations

import argparse
import re
from importlib.metadata import version

import pytest

from schemas.codec import decode
from schemas.turn import TurnEvent
from streams.cli import build_parser, main
from streams.cli_help import EXAMPLE_TURN, HELP
from tests.support.paths import ROOT

USAGE = (ROOT / "docs" / "usage.md").read_text()
GROUPS = {"eval", "events"}  # commands that only hold subcommands: their subcommands have the rows


def commands(
    parser: argparse.ArgumentParser, prefix: str = ""
) -> dict[str, argparse.ArgumentParser]:
    """Every (sub)command parser by its full name: "up", "eval", "eval locomo", ..."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found[prefix + name] = sub
                found |= commands(sub, f"{prefix}{name} ")
    return found


def help_of(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 0
    return capsys.readouterr().out


@pytest.fixture(autouse=True)
def _wide_help(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # argparse wraps at the terminal width


def test_every_command_has_its_one_line_description() -> None:
    parsers = commands(build_parser())
    assert set(parsers) == set(HELP)
    assert {name for name, parser in parsers.items() if parser._subparsers} == GROUPS


def test_every_argument_has_a_description() -> None:
    undescribed = [
        f"{name} {action.dest}"
        for name, parser in commands(build_parser()).items()
        for action in parser._actions
        if not isinstance(action, argparse._SubParsersAction) and not (action.help or "").strip()
    ]
    assert not undescribed


def test_top_level_help_lists_the_tasks_in_a_users_words(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = help_of(["--help"], capsys)
    for name, line in HELP.items():
        if " " not in name:
            assert re.search(rf"^\s+{name}\s+{re.escape(line)}$", text, re.M), name
    assert "memoryos ingest chats.jsonl --wait" in text
    assert "Settings once" not in text  # the module's docstring is for developers


@pytest.mark.parametrize("name", sorted(HELP))
def test_each_command_help_opens_with_its_description(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    text = help_of([*name.split(), "--help"], capsys)
    assert HELP[name][0].upper() + HELP[name][1:] + "." in text


def test_ingest_help_shows_a_line_that_ingest_accepts(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_of(["ingest", "--help"], capsys)
    example = next(line for line in text.splitlines() if line.startswith('{"user_id"'))
    assert example == EXAMPLE_TURN
    turn = decode(TurnEvent, example.encode())
    assert turn.user_id == "alice"
    assert "--wait" in text
    assert "Exit status" in text


def test_version_is_the_installed_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert help_of(["--version"], capsys).strip() == f"memoryos {version('memoryos-streams')}"


def commands_section() -> str:
    start = USAGE.index("## Commands")
    return USAGE[start : USAGE.index("\n## ", start + 1)]


@pytest.mark.parametrize("name", sorted(set(HELP) - GROUPS))
def test_the_usage_commands_table_matches_the_help(name: str) -> None:
    """Each command's row names its description and every one of its options."""
    row_start = re.compile(rf"^\| `memoryos {name}( [^a-z]|`)")
    rows = [row for row in commands_section().splitlines() if row_start.match(row)]
    assert len(rows) == 1, f"docs/usage.md, Commands: one row for memoryos {name}"
    row = rows[0]
    assert HELP[name] in row
    options = [
        option
        for action in commands(build_parser())[name]._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    ]
    missing = [option for option in options if option not in row]
    assert not missing, f"memoryos {name}: its row in docs/usage.md lacks {missing}"
