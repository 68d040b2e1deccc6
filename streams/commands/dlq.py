"""`memoryos dlq list` and `memoryos dlq replay`: what was dead-lettered, and sending it back
(``streams/dead_letters.py``)."""

from __future__ import annotations

import argparse
import sys

import orjson

from adapters import event_loop
from adapters.settings import Settings
from streams.dead_letters import bootstrap_of, read_dead_letters, replay


def main(args: argparse.Namespace, settings: Settings) -> int:
    bootstrap = bootstrap_of(settings)
    letters = event_loop.run(read_dead_letters(bootstrap, settings, args.reason))
    if args.action == "list":
        for letter in letters:
            sys.stdout.write(orjson.dumps(letter.summary()).decode() + "\n")
        print(f"{len(letters)} dead letters", file=sys.stderr)
        return 0
    replayed, skipped = event_loop.run(replay(bootstrap, settings, letters))
    print(f"replayed {replayed} dead letters; skipped {skipped} too large to replay")
    return 0
