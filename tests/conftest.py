"""Shared fixtures: each suite's fixtures live in tests/support and are imported here."""

import sys
from pathlib import Path

import pytest

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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow files first, then the whole-stack ones: the workers take files as they free
    up, and a long file taken last would run alone at the end while the other cores idle.
    A file moves as a whole, its tests in their order (its module fixtures are made once)."""

    def weight(item: pytest.Item) -> int:
        if item.get_closest_marker("slow"):
            return 0
        return 1 if item.get_closest_marker("integration") else 2

    files: dict[Path, int] = {}
    for item in items:
        files[item.path] = min(files.get(item.path, 2), weight(item))
    order = {id(item): index for index, item in enumerate(items)}
    items.sort(key=lambda item: (files[item.path], order[id(item)]))
