"""A throw-away embedded stack for evaluations: its own folder, broker and free ports.

A replayed turn id would be a no-op in an existing store, and an evaluation must never touch a
real deployment's memory or ports.
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from adapters.settings import Settings
from streams.broker import free_port
from streams.stack import Stack


@asynccontextmanager
async def fresh_stack(
    settings: Settings,
    drain_timeout_s: float = 5.0,
    prefix: str = "memoryos-eval-",
    **overrides: Any,
) -> AsyncIterator[Stack]:
    """A private embedded stack (broker, worker, store) in a throw-away folder on free ports.

    The folder is thrown away, so work still in flight at the end need not finish: the drain
    is short.
    """
    with tempfile.TemporaryDirectory(prefix=prefix) as folder:
        run_settings = settings.model_copy(
            update={
                "data_dir": Path(folder),
                "broker_url": None,
                "broker_port": free_port(),
                "port": 0,
                **overrides,
            }
        )
        stack = Stack(run_settings, serve_http=False)
        await stack.start()
        try:
            yield stack
        finally:
            await stack.stop(drain_timeout_s=drain_timeout_s)
