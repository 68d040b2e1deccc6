"""Progress of long commands: a live bar on a terminal, plain lines in a pipe or with --quiet.

Work code reports through the small `Progress` interface (``phase``, ``advance``, ``detail``)
and never learns whether a person or a script is reading. Progress goes to stderr, so a
command's results on stdout stay clean for a script to parse.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol, TextIO

PLAIN_EVERY_S = 10.0  # a pipe or a CI log needs a sign of life, not a line per item


class Progress(Protocol):
    def phase(self, name: str, total: float | None = None, unit: str = "") -> None:
        """Start the next step (ending the current one); ``total`` None: size unknown."""

    def advance(self, amount: float = 1) -> None:
        """``amount`` more of the current step's ``unit`` are done."""

    def detail(self, text: str) -> None:
        """A short status shown beside the current step (e.g. a second counter)."""

    def close(self) -> None:
        """End the current step; a finished reporter accepts no more calls."""


@dataclass(frozen=True)
class Step:
    name: str
    seconds: float
    done: float
    unit: str


class Steps:
    """Bookkeeping shared by every reporter: the current step and the finished ones."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock  # a test's clock makes rates and times left exact
        self.finished: list[Step] = []
        self.name: str | None = None
        self.total: float | None = None
        self.unit = ""
        self.done = 0.0
        self.text = ""
        self.started = 0.0

    def phase(self, name: str, total: float | None = None, unit: str = "") -> None:
        self.end_step()
        self.name, self.total, self.unit = name, total, unit
        self.done, self.text, self.started = 0.0, "", self.clock()
        self.on_start()

    def advance(self, amount: float = 1) -> None:
        self.done += amount
        self.on_advance()

    def detail(self, text: str) -> None:
        self.text = text
        self.on_advance()

    def close(self) -> None:
        self.end_step()
        self.on_close()

    def end_step(self) -> None:
        if self.name is None:
            return
        step = Step(self.name, self.clock() - self.started, self.done, self.unit)
        self.finished.append(step)
        self.name = None
        self.on_finish(step)

    def rate(self) -> float:
        elapsed = self.clock() - self.started
        return self.done / elapsed if elapsed > 0 else 0.0

    # What a reporter shows; the bookkeeping above is the same for all of them.
    def on_start(self) -> None: ...

    def on_advance(self) -> None: ...

    def on_finish(self, step: Step) -> None: ...

    def on_close(self) -> None: ...


class NoProgress:
    """Shows nothing and keeps nothing, so one shared instance can be every default."""

    def phase(self, name: str, total: float | None = None, unit: str = "") -> None: ...

    def advance(self, amount: float = 1) -> None: ...

    def detail(self, text: str) -> None: ...

    def close(self) -> None: ...


NO_PROGRESS: Progress = NoProgress()


class LineProgress(Steps):
    """Plain lines, ``COMMAND: STEP: ...``, for pipes, logs and ``--quiet``.

    A line when a step starts, at most one every ``every_s`` while it runs, and one when it
    ends; ``quiet`` keeps only the last kind.
    """

    def __init__(
        self,
        command: str,
        stream: TextIO,
        quiet: bool = False,
        every_s: float = PLAIN_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(clock)
        self.command, self.stream, self.quiet, self.every_s = command, stream, quiet, every_s
        self.last_line = 0.0

    def on_start(self) -> None:
        self.last_line = self.clock()
        if not self.quiet:
            size = f" ({amount(self.total, self.unit)})" if self.total is not None else ""
            self.say(f"started{size}")

    def on_advance(self) -> None:
        if self.quiet or self.clock() - self.last_line < self.every_s:
            return
        self.last_line = self.clock()
        parts = [amount(self.done, self.unit)]
        if self.total:  # "20 of 100 questions", "2.0 kB of 4.0 kB": the unit once
            parts[0] = parts[0].removesuffix(f" {self.unit}")
            parts[0] += f" of {amount(self.total, self.unit)} ({self.done / self.total:.0%})"
        rate = self.rate()
        if self.unit and rate > 0:
            parts.append(f"{amount(rate, self.unit)}/s")
            if self.total:
                parts.append(f"{duration(max(0.0, self.total - self.done) / rate)} left")
        if self.text:
            parts.append(self.text)
        self.say(", ".join(parts))

    def on_finish(self, step: Step) -> None:
        what = f", {amount(step.done, step.unit)}" if step.unit else ""
        self.say(f"done{what} in {step.seconds:.1f} s")

    def say(self, message: str) -> None:
        print(f"{self.command}: {self.name or self.finished[-1].name}: {message}",
              file=self.stream, flush=True)  # fmt: skip


def amount(value: float, unit: str) -> str:
    """``1.5 MB`` for bytes, ``1,234 lines`` for anything else counted."""
    if unit == "bytes":
        for size, suffix in ((2**30, "GB"), (2**20, "MB"), (2**10, "kB")):
            if value >= size:
                return f"{value / size:.1f} {suffix}"
        return f"{value:.0f} B"
    number = f"{value:,.0f}" if value >= 10 or value == int(value) else f"{value:.1f}"
    return f"{number} {unit}".rstrip()


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds // 3600:.0f} h {seconds % 3600 / 60:.0f} min"


def wants_bar(stream: TextIO, quiet: bool) -> bool:
    """A live bar only for a person at a terminal: never in a pipe, a file, or a dumb TERM."""
    return not quiet and stream.isatty() and os.environ.get("TERM", "") != "dumb"


@contextmanager
def open_progress(
    command: str, quiet: bool = False, stream: TextIO | None = None
) -> Iterator[Steps]:
    """The reporter for ``command``: a bar on a terminal, plain lines otherwise."""
    stream = stream or sys.stderr
    # Our own steps replace the libraries' bars (the model's "Loading weights" tqdm).
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    reporter: Steps
    if wants_bar(stream, quiet):
        from streams.progress_bar import BarProgress  # rich loads only for a terminal

        reporter = BarProgress(command, stream)
    else:
        reporter = LineProgress(command, stream, quiet)
    try:
        yield reporter
    finally:
        reporter.close()
