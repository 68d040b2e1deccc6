"""`memoryos eval locomo` and `memoryos bench`: the evaluations, with a progress reporter.

This entry only picks the reporter (a bar on a terminal, plain lines otherwise) and hands
it down, so the evaluations stay free of display code. It lives here, above the runtime:
the CLI names it by string, so `streams` never imports `evaluation`.
"""

from __future__ import annotations

import argparse

from adapters.settings import Settings
from evaluation import bench as bench_eval
from evaluation import locomo as locomo_eval
from streams.progress import open_progress


def locomo(args: argparse.Namespace, settings: Settings) -> int:

    with open_progress("eval locomo", quiet=args.quiet) as progress:
        return locomo_eval.main(args, settings, progress)


def bench(args: argparse.Namespace, settings: Settings) -> int:

    with open_progress("bench", quiet=args.quiet) as progress:
        return bench_eval.main(args, settings, progress)
