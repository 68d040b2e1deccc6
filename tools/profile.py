"""`make profile`: where one process spends its time on a short ingest and a retrieve run.

cProfile over the embedded stack (broker, worker, store in this process; the embedder's
threads are not followed, so their time shows as waiting). Prints the functions with the most
cumulative and the most own time, and writes the raw profile for snakeviz or pstats.
"""

from __future__ import annotations

import cProfile
import pstats
import random
import sys
from pathlib import Path

from adapters import event_loop
from adapters.settings import load_settings
from evaluation.bench_common import parts, wait_placed
from evaluation.bench_data import conversation, interleaved, query_for
from evaluation.fresh_stack import fresh_stack

USERS, TURNS, RETRIEVES = 8, 30, 200


async def workload() -> None:
    settings = load_settings()
    rng = random.Random(7)
    talks = [conversation(f"profile-u{i}", TURNS, rng) for i in range(USERS)]
    async with fresh_stack(settings, prefix="memoryos-profile-") as stack:
        service, deps = parts(stack)
        await service.add_turns(interleaved(talks))
        await wait_placed(deps, USERS * TURNS, 0, 600)
        for _ in range(RETRIEVES):
            talk = rng.choice(talks)
            await service.retrieve(talk[0].turn.user_id, query_for(rng.choice(talk).topic, rng))


def main(out: Path = Path("out/profile.prof")) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    profiler = cProfile.Profile()
    profiler.enable()
    event_loop.run(workload())
    profiler.disable()
    profiler.dump_stats(out)
    stats = pstats.Stats(profiler, stream=sys.stdout).strip_dirs()
    stats.sort_stats("cumulative").print_stats(25)
    stats.sort_stats("tottime").print_stats(25)
    print(f"raw profile: {out} (python -m pstats {out})")


if __name__ == "__main__":
    main()
