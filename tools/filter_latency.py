"""Retrieves with filters beside the same retrieves without, on a seeded store of many users.

    python -m tools.filter_latency [--users 1000] [--turns 100] [--calls 500]

Seeds a fresh embedded stack the way ``memoryos bench`` does, then times ``calls`` retrieves
one at a time, each followed by its twin scoped to one channel (of three) and the later half of
the user's days (``bench_latency``): one JSON line with the percentiles of both and the mid-term
pages each returned.
"""

from __future__ import annotations

import argparse
import json

from adapters import event_loop
from adapters.settings import load_settings
from evaluation.bench_latency import measure_latency


async def run(users: int, turns: int, calls: int) -> None:
    result = await measure_latency(
        load_settings(), users, turns, 10, calls, responds=5, ryw_tries=1, seed=20250606
    )
    summary = result.summary()
    print(
        json.dumps(
            {
                "users": users,
                "turns": turns,
                "points_seeded": result.points_seeded,
                "seed_s": round(result.seed_s, 1),
                "calls": len(result.retrieve_s),
                "retrieve": summary["retrieve"],
                "retrieve_filtered": summary["retrieve_filtered"],
                "mid_term_pages": round(result.mid_term_hits, 2),
                "mid_term_pages_filtered": round(result.filtered_hits, 2),
            }
        ),
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()
    event_loop.run(run(args.users, args.turns, args.calls))


if __name__ == "__main__":
    main()
