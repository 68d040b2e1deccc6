"""Shared fixtures: each suite's fixtures live in tests/support and are imported here."""

import sys
from pathlib import Path

# `tests.support` must import under plain `pytest` too, which (unlike `python -m pytest`) does
# not put the project root on sys.path; `pythonpath = ["."]` in pyproject would do the same.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.fixtures import (  # noqa: F401
    fake_openai,
    fake_openai_server,
    fake_openai_settings,
)


def pytest_asyncio_loop_factories(config: object, item: object) -> dict[str, object]:
    """The tests run on the loop the commands run on (adapters/event_loop.py)."""
    import uvloop

    return {"uvloop": uvloop.new_event_loop}
