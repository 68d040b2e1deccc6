"""Where a process's busy samples go, by component: read from a ``py-spy record --format raw``.

    py-spy record --format raw -t -o out/loop.txt -- python -m tools.llm_load
    python -m tools.loop_shares out/loop.txt [--thread MainThread]

Own time: each sample counts for the component of its innermost frame. Inclusive, for the
calls out of our code (the store, the LLM client, the model host; not Faust, which is at the
root of every agent's stack): a sample counts for each of them with a frame on its stack (a
store call that ends in pydantic is the store's). With ``--thread``, only that thread's
samples count (``-t`` puts the thread's name on py-spy's lines). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

# In order: a frame takes the first component whose pattern its file matches (py-spy names a
# file by its module path: "faust/agents/agent.py").
COMPONENTS: tuple[tuple[str, str], ...] = (
    ("store", r"^adapters/stores/|^qdrant"),
    ("llm client", r"^adapters/llm/retry|^(openai|aiohttp|httpx|httpx2|httpcore|yarl)/"),
    ("model host", r"^adapters/embedders/"),
    ("faust, mode, aiokafka", r"^(faust|mode|aiokafka|kafka)/"),
    ("pydantic", r"^pydantic"),
    ("prometheus_client", r"^prometheus_client/"),
    ("event loop", r"^asyncio/|uvloop|^contextlib|^selectors"),
    ("our code", r"^(agents|streams|service|schemas|memory|adapters|evaluation|tools)/"),
)
# Counted inclusively too: the calls out of our code, with what they call.
BOUNDARIES = ("store", "llm client", "model host")
FRAME = re.compile(r"\((?P<file>[^():]+)(?::\d+)?\)$")


def component(frame: str) -> str:
    found = FRAME.search(frame)
    path = found.group("file") if found else frame
    for name, pattern in COMPONENTS:
        if re.search(pattern, path):
            return name
    return "other"


def shares(lines: list[str], thread: str | None) -> dict[str, Any]:
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    for line in lines:
        stack, _, count_text = line.rstrip().rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        frames = stack.split(";")
        if thread is not None and not frames[0].endswith(f": {thread}"):
            continue
        count = int(count_text)
        total += count
        named = [component(frame) for frame in frames[1:]]  # the first names the thread
        for name in set(named) & set(BOUNDARIES):
            inclusive[name] += count
        own[named[-1] if named else "other"] += count
    if total == 0:
        return {"samples": 0}
    return {
        "samples": total,
        "inclusive": {name: round(n / total, 3) for name, n in inclusive.most_common()},
        "own": {name: round(n / total, 3) for name, n in own.most_common()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("raw", type=Path, help="py-spy's --format raw output")
    parser.add_argument("--thread", help="only this thread's samples (py-spy -t)")
    args = parser.parse_args()
    lines = args.raw.read_text(errors="replace").splitlines()
    print(json.dumps(shares(lines, args.thread)))


if __name__ == "__main__":
    main()
