"""`memoryos eval locomo` and `memoryos bench`: the evaluations, with a progress reporter.

The evaluations live in ``streams.evaluation``; this entry only picks the reporter (a bar on a
terminal, plain lines otherwise) and hands it down, so they stay free of display code.
"""

from __future__ import annotations

import argparse

from streams.progress import open_progress
from streams.settings import Settings


def locomo(args: argparse.Namespace, settings: Settings) -> int:
    from streams.evaluation import locomo as evaluation

    with open_progress("eval locomo", quiet=args.quiet) as progress:
        return evaluation.main(args, settings, progress)


def bench(args: argparse.Namespace, settings: Settings) -> int:
    from streams.evaluation import bench as evaluation

    with open_progress("bench", quiet=args.quiet) as progress:
        return evaluation.main(args, settings, progress)
