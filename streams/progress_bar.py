"""The live progress bar (rich) shown when a person runs a long command at a terminal."""

from __future__ import annotations

import logging
import sys
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, ProgressColumn, SpinnerColumn, Task, TaskID, TextColumn
from rich.progress import Progress as RichProgress
from rich.text import Text

from streams.progress import Step, Steps, amount, duration

UPDATE_EVERY_S = 0.05


class CountColumn(ProgressColumn):
    """``1.2 MB/45.6 MB  3.4 MB/s``: how much, of how much, how fast, in the step's unit."""

    def render(self, task: Task) -> Text:
        unit = str(task.fields.get("unit", ""))
        if not unit:
            return Text("")
        shown = amount(task.completed, unit)
        if task.total is not None:  # "3/40 turns", "1.2 MB/8.4 MB": the unit once
            shown = shown.removesuffix(f" {unit}") + f"/{amount(task.total, unit)}"
        if task.speed and not task.finished:
            shown += f"  {amount(task.speed, unit)}/s"
        return Text(shown)


class TimeColumn(ProgressColumn):
    """Seconds so far and time left while a step runs; the time it took once it is done."""

    def render(self, task: Task) -> Text:
        elapsed = task.elapsed or 0.0
        if task.finished:
            return Text(f"{elapsed:.1f} s", style="green")
        shown = duration(elapsed)
        if task.time_remaining is not None:
            shown += f", {duration(task.time_remaining)} left"
        return Text(shown, style="cyan")


class BarProgress(Steps):
    def __init__(self, command: str, stream: TextIO) -> None:
        super().__init__()
        self.bar = RichProgress(
            SpinnerColumn(finished_text="[green]✓"),
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            CountColumn(),
            TimeColumn(),
            TextColumn("{task.fields[detail]}"),
            console=Console(file=stream),
            redirect_stdout=True,  # prints and log lines scroll above the bar, not through it
            redirect_stderr=True,
        )
        self.task: TaskID | None = None
        self.updated = 0.0
        self.terminal = sys.stderr
        self.bar.start()
        self.moved = _follow_stderr(self.terminal)

    def on_start(self) -> None:
        self.task = self.bar.add_task(self.name or "", total=self.total, unit=self.unit, detail="")

    def on_advance(self) -> None:
        # Work may advance a million times (a line each); the bar redraws 10 times a second,
        # so updates in between would only cost time.
        now = self.clock()
        if self.task is not None and now - self.updated >= UPDATE_EVERY_S:
            self.updated = now
            self.bar.update(self.task, completed=self.done, detail=self.text)

    def on_finish(self, step: Step) -> None:
        if self.task is None:
            return
        self.bar.update(self.task, completed=step.done)
        if self.total is None:  # a step of unknown size is whole once it ends
            whole = step.done or 1
            self.bar.update(self.task, total=whole, completed=whole)
        self.bar.update(self.task, detail=self.text)  # one cut short keeps its partial bar
        self.bar.stop_task(self.task)
        self.task = None

    def on_close(self) -> None:
        self.bar.stop()
        for handler in self.moved:
            handler.setStream(self.terminal)


def _follow_stderr(terminal: TextIO) -> list[logging.StreamHandler[TextIO]]:
    """Point log handlers that write to the terminal at the bar's stderr, so log lines print
    above the bar instead of tearing it; the handlers moved are returned to be put back."""
    moved = []
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and handler.stream is terminal:
            handler.setStream(sys.stderr)  # rich's proxy while the bar runs
            moved.append(handler)
    return moved
