"""Turns through the pipeline with a slow OpenAI-compatible LLM: the bench's LLM part alone.

    python -m tools.llm_load [--concurrency 64 ...] [--latency-ms 200] [--turns 25] [--seed N]

A fresh embedded stack talks to the fake OpenAI server (every call answered after
``latency_ms``), with ``concurrency`` calls at most in flight and two users per slot of
``turns`` turns each, as ``memoryos bench`` measures C = 8 .. 128. Several limits run one after
another in this one process and against one server, as in the bench. Prints one JSON line per
limit: turns per second and their share of the concurrency bound (C / (latency x calls per
turn)). Run it from two checkouts, alternately, to compare.
"""

from __future__ import annotations

import argparse
import asyncio
import json

from adapters import event_loop
from adapters.settings import load_settings
from evaluation.bench import FULL
from evaluation.bench_llm import FakeLLMServer, measure_concurrency


async def run(concurrencies: list[int], latency_ms: int, turns: int, seed: int = FULL.seed) -> None:
    server = await asyncio.to_thread(FakeLLMServer(latency_ms / 1000.0).start)
    try:
        for concurrency in concurrencies:
            await run_one(server, concurrency, latency_ms, turns, seed)
    finally:
        await asyncio.to_thread(server.stop)


async def run_one(
    server: FakeLLMServer, concurrency: int, latency_ms: int, turns: int, seed: int
) -> None:
    users = max(2, concurrency * FULL.llm_users_per_slot)
    done = await measure_concurrency(load_settings(), server, concurrency, users, turns, seed)
    row = {
        "concurrency": concurrency,
        "latency_ms": latency_ms,
        "turns": done.turns,
        "turns_per_s": round(done.turns_per_s, 1),
        "calls_per_turn": round(done.calls_per_turn, 3),
        "bound_ratio": round(done.bound_ratio, 3),
        "cpu_cores_used": round(done.cpu_cores_used, 2),
        "errors": done.errors,
        "users_wrong": len(done.mismatched),
    }
    print(json.dumps(row), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[64])
    parser.add_argument("--latency-ms", type=int, default=200)
    parser.add_argument("--turns", type=int, default=FULL.llm_turns, help="turns per user")
    parser.add_argument("--seed", type=int, default=FULL.seed, help="the conversations' seed")
    args = parser.parse_args()
    event_loop.run(run(args.concurrency, args.latency_ms, args.turns, args.seed))


if __name__ == "__main__":
    main()
