"""Retrieves under concurrent callers alone, in minutes: the bench's latency store, smaller.

    python -m tools.retrieve_load [--users 50] [--turns 300] [--callers 1,16] [--calls 1200]

Seeds a fresh embedded stack the way ``memoryos bench`` does (``bench_seed``), then times
``calls`` retrieves for each caller count and prints one JSON line each. Every query carries a
random suffix, so the embedder's cache never answers one: each retrieve embeds its query. Run it
twice with one setting changed (``MEMORYOS_MINILM_RUNTIME=torch``, say) to compare side by side.
Each line also counts the full garbage collections during its retrieves and their longest pause.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import random
import time
from collections.abc import Iterator

import numpy as np

from adapters import event_loop
from adapters.settings import load_settings
from evaluation.bench_common import parts
from evaluation.bench_data import query_for
from evaluation.bench_latency import WARMUP_CALLS, _concurrent_retrieves, _flush
from evaluation.bench_seed import seed_users
from evaluation.fresh_stack import fresh_stack


async def run(users: int, turns: int, callers: list[int], calls: int, seed: int) -> None:
    rng, vectors = random.Random(seed), np.random.default_rng(seed)
    async with fresh_stack(load_settings(), drain_timeout_s=1.0) as stack:
        service, deps = parts(stack)
        topics = await seed_users(deps, users, turns, 20, rng, vectors)
        await _flush(deps)

        def pick() -> tuple[str, str]:
            user, own = rng.choice(topics)
            return user, f"{query_for(rng.choice(own), rng)} {rng.random():.6f}"

        for _ in range(WARMUP_CALLS):
            await service.retrieve(*pick())
        for count in callers:
            with full_collections() as pauses:
                row = await _concurrent_retrieves(service, pick, count, calls)
            full = {"gc_full_collections": len(pauses), "gc_full_max_ms": max(pauses, default=0)}
            print(json.dumps({"users": users, "turns": turns, **row, **full}), flush=True)


@contextlib.contextmanager
def full_collections() -> Iterator[list[float]]:
    """The pauses (ms) of Python's full (generation 2) collections while the block runs: each
    one stops the event loop, and every retrieve in flight waits."""
    pauses: list[float] = []
    started = [0.0]

    def timer(phase: str, info: dict[str, int]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            pauses.append(round((time.perf_counter() - started[0]) * 1000, 1))

    gc.callbacks.append(timer)
    try:
        yield pauses
    finally:
        gc.callbacks.remove(timer)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--callers", default="1,16", help="comma-separated caller counts")
    parser.add_argument("--calls", type=int, default=1200, help="retrieves per caller count")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    callers = [int(c) for c in args.callers.split(",")]
    event_loop.run(run(args.users, args.turns, callers, args.calls, args.seed))


if __name__ == "__main__":
    main()
