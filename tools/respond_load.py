"""Responds one after another, and what makes their tail: the bench's respond part, three ways.

    python -m tools.respond_load [--users 50] [--turns 100] [--calls 300]

Seeds a fresh embedded stack as ``memoryos bench`` does (``bench_seed``), then times ``calls``
responds (offline LLM) in each of three ways and prints one JSON line each:

- ``back_to_back``: as the bench does; each answered exchange is a turn the pipeline works on
  while the next respond runs, in the same process;
- ``not_remembered``: ``record=False``, no turn written: the respond's own work alone;
- ``idle_between``: remembered, with a pause of ``PAUSE_S`` after each (at most 100 calls),
  in which the pipeline is done with the turn before the next respond.

The first against the other two tells what the pipeline's work on the turns costs the tail.
Run it from two checkouts, alternately, to compare.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time

import numpy as np

from adapters import event_loop
from adapters.settings import load_settings
from evaluation.bench_common import parts, percentiles_ms
from evaluation.bench_data import query_for
from evaluation.bench_latency import WARMUP_CALLS, _flush
from evaluation.bench_seed import seed_users
from evaluation.fresh_stack import fresh_stack

WAYS = ("back_to_back", "not_remembered", "idle_between")
PAUSE_S = 0.5  # a turn's pipeline work takes tens of milliseconds
SETTLE_S = 3.0  # before each way: the turns of the one before are worked off


async def run(users: int, turns: int, calls: int, seed: int = 1) -> None:
    rng, vectors = random.Random(seed), np.random.default_rng(seed)
    async with fresh_stack(load_settings(), drain_timeout_s=1.0) as stack:
        service, deps = parts(stack)
        topics = await seed_users(deps, users, turns, 10, rng, vectors)
        await _flush(deps)

        def pick() -> tuple[str, str]:
            user, own = rng.choice(topics)
            return user, query_for(rng.choice(own), rng)

        for _ in range(WARMUP_CALLS):
            await service.respond(*pick())
        for way in WAYS:
            await asyncio.sleep(SETTLE_S)
            seconds: list[float] = []
            for _ in range(min(calls, 100) if way == "idle_between" else calls):
                user, query = pick()
                started = time.perf_counter()
                await service.respond(user, query, record=way != "not_remembered")
                seconds.append(time.perf_counter() - started)
                if way == "idle_between":
                    await asyncio.sleep(PAUSE_S)
            row = {"way": way, "users": users, "turns": turns, "calls": len(seconds)}
            print(json.dumps({**row, **percentiles_ms(seconds)}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--turns", type=int, default=100, help="turns per user")
    parser.add_argument("--calls", type=int, default=300, help="responds per way")
    args = parser.parse_args()
    event_loop.run(run(args.users, args.turns, args.calls))


if __name__ == "__main__":
    main()
