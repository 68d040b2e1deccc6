"""The event loop every command runs on: uvloop's.

The worker's stages, the broker client, the service and the LLM calls share one loop thread,
and asyncio's own machinery (the ready queue, handles, the selector, transports) was about a
sixth of that thread's samples under load; uvloop runs it in C. What it bought is measured in
docs/benchmarks.md, "The hot path, fourth pass" (with the full bench that disagreed).
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

import uvloop

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on a uvloop loop."""
    return uvloop.run(main)
