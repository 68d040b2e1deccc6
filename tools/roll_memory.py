"""Broker rolls alone: does a roll of the embedded broker keep memory in the process?

    python -m tools.roll_memory [--rolls 10]

Starts a private embedded stack, lets it settle, then rolls its broker ``rolls`` times with no
traffic (``Stack.recycle_broker``, what the memory budget triggers). After each roll a full
garbage collection and a glibc trim, then one JSON line of the process's memory parts
(``evaluation/memory_parts.py``). A part that steps up with every roll is memory the old
worker's clients left behind; under load a roll's saw-tooth sits on top of this.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os

from adapters import event_loop
from adapters.native_memory import release_freed_memory
from adapters.settings import load_settings
from evaluation.fresh_stack import fresh_stack
from evaluation.memory_parts import memory_parts

PARTS = ("rss_anon_mb", "malloc_in_use_mb", "malloc_free_mb", "pymalloc_arenas_mb",
         "pymalloc_in_use_mb", "py_blocks_k")  # fmt: skip
SETTLE_S = 3.0


async def run(rolls: int) -> None:
    # no memory watch: only this command's own rolls, never one of the watch's beside them
    settings = load_settings().model_copy(update={"broker_memory_budget_mb": 0})
    async with fresh_stack(settings, prefix="memoryos-rolls-") as stack:
        for roll in range(rolls + 1):
            if roll:
                await stack.recycle_broker()
            await asyncio.sleep(SETTLE_S)  # the old clients' last callbacks run out
            gc.collect()
            release_freed_memory()
            parts = memory_parts(os.getpid(), stack.settings.data_dir)
            row = {"rolls": roll, "broker_pid": stack.broker.pid if stack.broker else None}
            print(json.dumps({**row, **{k: parts.get(k) for k in PARTS}}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rolls", type=int, default=10)
    event_loop.run(run(parser.parse_args().rolls))


if __name__ == "__main__":
    main()
