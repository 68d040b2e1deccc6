"""Turns through the whole pipeline alone, in a minute: the bench's ingest part, smaller.

    python -m tools.ingest_load [--users 40] [--turns 60]

Seeds nothing: a fresh embedded stack takes ``users`` synthetic conversations of ``turns``
turns (the offline LLM unless configured otherwise), and the clock stops when every page is in
its final tier, as in ``memoryos bench`` (``bench_ingest.measure_ingest``). Prints one JSON
line. Run it from two checkouts, or twice with one setting changed, alternately, to compare.
"""

from __future__ import annotations

import argparse
import json

from adapters import event_loop
from adapters.settings import load_settings
from evaluation.bench_ingest import make_conversations, measure_ingest


async def run(users: int, turns: int, seed: int = 7) -> None:
    result = await measure_ingest(load_settings(), make_conversations(users, turns, seed), seed)
    row = {
        "users": users,
        "turns": result.turns,
        "placed_s": round(result.placed_s, 1),
        "turns_per_s": round(result.turns / result.placed_s, 1) if result.placed_s > 0 else 0.0,
        "loop_cpu_ms_per_turn": result.loop_cpu_ms_per_turn,
        "cpu_cores_used": round(result.cpu_cores_used, 2),
        "cpu_ms_per_turn_by_process": result.cpu_ms_per_turn_by_process,
        "texts_per_turn": round(result.texts_per_turn, 2),
        "texts_per_embed_call": round(result.texts_per_turn * result.turns / result.embed_calls, 1)
        if result.embed_calls
        else 0.0,
        "users_wrong": len(result.mismatched),
        "embedder": result.embedder,  # as the run's store recorded it: which vectors ran
    }
    print(json.dumps(row), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=40)
    parser.add_argument("--turns", type=int, default=60, help="turns per user")
    args = parser.parse_args()
    event_loop.run(run(args.users, args.turns))


if __name__ == "__main__":
    main()
