"""The demo's answers in the README are the ones `memoryos up --demo` prints."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from streams.commands.demo import run_demo
from tests.support.paths import ROOT
from tests.support.stacks import running_stack

pytestmark = [pytest.mark.integration, pytest.mark.slow]
README = ROOT / "README.md"


async def test_the_readme_shows_the_answers_the_demo_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with running_stack(tmp_path / "data") as stack:
        await run_demo(stack, quiet=True)
    printed = capsys.readouterr().out
    answers = printed.split("\nanswers:\n", 1)[1].split("\n\n", 1)[0].strip("\n")
    block = re.search(r"<!-- demo-answers -->\n```\n(.*?)\n```", README.read_text(), re.S)
    assert block is not None
    assert block.group(1) == answers
