"""The README's code blocks, as the quick-start tests run them."""

from __future__ import annotations

import re

from tests.support.paths import ROOT

README = ROOT / "README.md"
DEFAULT_URL = "http://127.0.0.1:8080"  # `memoryos up`'s default port: what the README says


def block(language: str, containing: str) -> str:
    """The one ``language`` block of the README that holds ``containing``."""
    blocks = re.findall(rf"```{language}\n(.*?)```", README.read_text(), re.DOTALL)
    [found] = [text for text in blocks if containing in text]
    assert DEFAULT_URL in found, "as written: `memoryos up` on its default port"
    return str(found)


def python_quick_start() -> str:
    return block("python", "memory.respond(")


def langchain_quick_start() -> str:
    return block("python", "memoryos_client.langchain")


def typescript_quick_start() -> str:
    return block("js", 'from "memoryos-client"')
