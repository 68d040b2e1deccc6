"""Qdrant Edge alone under churn: does it keep memory per point written once points are deleted?

    python -m tools.edge_churn [--live 20000] [--churn 5000] [--rounds 12]

Writes ``live`` points (384-d, a page's payload of about 0.8 KB, sparse lexical vectors), then
each round writes ``churn`` new points, deletes the ``churn`` oldest and vacuums, so the live
count stays the same while the points written grow. After each round it trims glibc's heap and
prints one JSON line of the process's memory parts (``evaluation/memory_parts.py``). Memory
that follows the points written, not the live ones, is what a long run would keep.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import uuid
from pathlib import Path

import numpy as np

from adapters import event_loop
from adapters.native_memory import release_freed_memory
from adapters.ports import PAGES, Point
from adapters.stores.edge import EdgeStore
from evaluation.memory_parts import memory_parts
from memory.text import lexical_vector

DIM, USERS = 384, 200
WORDS = ["trip", "budget", "dog", "recipe", "train", "plan", "miso", "bike", "paris", "yoga"]
PARTS = ("rss_anon_mb", "rss_data_files_mb", "malloc_in_use_mb", "malloc_free_mb",
         "pymalloc_arenas_mb", "py_blocks_k")  # fmt: skip


def page(index: int, rng: random.Random, vectors: np.random.Generator) -> Point:
    text = " ".join(rng.choice(WORDS) for _ in range(30))
    vector = vectors.normal(size=DIM)
    payload = {
        "user_id": f"u{index % USERS:03d}",
        "page_id": f"p{index}",
        "seq": index // USERS,
        "tier": "mtm",
        "timestamp": "2024-03-01T09:00:00+00:00",
        "text": text * 3,
    }
    point_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"p{index}"))
    return Point(
        point_id, (vector / np.linalg.norm(vector)).tolist(), payload, lexical_vector(text)
    )


async def run(live: int, churn: int, rounds: int) -> None:
    rng, vectors = random.Random(1), np.random.default_rng(1)
    with tempfile.TemporaryDirectory(prefix="memoryos-edge-churn-") as folder:
        store = EdgeStore(folder)
        await store.ensure_collections(DIM)
        ids: list[str] = []
        written = 0

        async def write(count: int) -> None:
            nonlocal written
            batch = [page(written + offset, rng, vectors) for offset in range(count)]
            written += count
            for start in range(0, count, 64):
                await store.upsert(PAGES, batch[start : start + 64])
            ids.extend(point.id for point in batch)

        try:
            await write(live)
            for round_ in range(rounds + 1):
                if round_:
                    await write(churn)
                    gone, ids[:] = ids[:churn], ids[churn:]
                    for start in range(0, churn, 256):
                        await store.delete(PAGES, gone[start : start + 256])
                    await store.vacuum()
                release_freed_memory()
                parts = memory_parts(os.getpid(), Path(folder))
                row = {"round": round_, "written": written, "live": len(ids)}
                print(json.dumps({**row, **{k: parts.get(k) for k in PARTS}}), flush=True)
        finally:
            await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--live", type=int, default=20_000)
    parser.add_argument("--churn", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=12)
    args = parser.parse_args()
    event_loop.run(run(args.live, args.churn, args.rounds))


if __name__ == "__main__":
    main()
