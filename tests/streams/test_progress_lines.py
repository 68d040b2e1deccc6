"""The plain-line progress a pipe or a log gets, and the choice between it and the live bar."""

from __future__ import annotations

import io
import os

import pytest

from streams.progress import LineProgress, amount, duration, open_progress, wants_bar


class Clock:
    """A clock the test moves, so rates and times left are exact."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def lines(stream: io.StringIO) -> list[str]:
    return stream.getvalue().splitlines()


def test_a_step_reports_start_progress_and_end() -> None:
    out, clock = io.StringIO(), Clock()
    progress = LineProgress("ingest", out, every_s=10, clock=clock)
    progress.phase("send", total=4096, unit="bytes")
    clock.now += 2
    progress.advance(1024)  # within every_s of the start: no line yet
    progress.detail("250 lines")
    clock.now += 10
    progress.advance(1024)
    progress.close()
    assert lines(out) == [
        "ingest: send: started (4.0 kB)",
        "ingest: send: 2.0 kB of 4.0 kB (50%), 171 B/s, 12 s left, 250 lines",
        "ingest: send: done, 2.0 kB in 12.0 s",
    ]


def test_lines_come_at_most_every_so_often() -> None:
    out, clock = io.StringIO(), Clock()
    progress = LineProgress("eval locomo", out, every_s=10, clock=clock)
    progress.phase("questions", total=100, unit="questions")
    for _ in range(100):
        clock.now += 0.5
        progress.advance(1)
    progress.close()
    running = [line for line in lines(out) if "%" in line]
    assert len(running) == 5  # 50 s of work, a line per 10 s
    assert (
        running[0] == "eval locomo: questions: 20 of 100 questions (20%), 2 questions/s, 40 s left"
    )


def test_steps_of_unknown_size_say_only_how_long_they_took() -> None:
    out, clock = io.StringIO(), Clock()
    progress = LineProgress("up", out, clock=clock)
    progress.phase("broker")
    clock.now += 0.5
    progress.phase("model")
    clock.now += 3
    progress.close()
    assert lines(out) == [
        "up: broker: started",
        "up: broker: done in 0.5 s",
        "up: model: started",
        "up: model: done in 3.0 s",
    ]
    assert [(step.name, step.seconds) for step in progress.finished] == [
        ("broker", 0.5),
        ("model", 3.0),
    ]


def test_quiet_keeps_one_line_per_finished_step() -> None:
    out, clock = io.StringIO(), Clock()
    progress = LineProgress("bench", out, quiet=True, every_s=0, clock=clock)
    progress.phase("ingest", total=10, unit="turns")
    clock.now += 1
    progress.advance(10)
    progress.phase("latency")
    progress.close()
    assert lines(out) == ["bench: ingest: done, 10 turns in 1.0 s", "bench: latency: done in 0.0 s"]


def test_a_pipe_or_quiet_gets_plain_lines() -> None:
    out = io.StringIO()
    with open_progress("ingest", stream=out) as progress:
        progress.phase("send", total=3, unit="turns")
        progress.advance(3)
    assert isinstance(progress, LineProgress)
    assert lines(out)[-1].startswith("ingest: send: done, 3 turns in ")


def test_only_a_terminal_gets_the_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm-256color")
    leader, follower = os.openpty()
    with os.fdopen(follower, "w") as terminal:
        assert wants_bar(terminal, quiet=False)
        assert not wants_bar(terminal, quiet=True)
        monkeypatch.setenv("TERM", "dumb")
        assert not wants_bar(terminal, quiet=False)
    os.close(leader)
    assert not wants_bar(io.StringIO(), quiet=False)


@pytest.mark.parametrize(
    ("value", "unit", "shown"),
    [
        (512, "bytes", "512 B"),
        (1536, "bytes", "1.5 kB"),
        (3 * 2**20, "bytes", "3.0 MB"),
        (1234567, "lines", "1,234,567 lines"),
        (2.5, "turns", "2.5 turns"),
        (3, "", "3"),
    ],
)
def test_amounts(value: float, unit: str, shown: str) -> None:
    assert amount(value, unit) == shown


@pytest.mark.parametrize(
    ("seconds", "shown"), [(12.4, "12 s"), (600, "10 min"), (7200 + 900, "2 h 15 min")]
)
def test_durations(seconds: float, shown: str) -> None:
    assert duration(seconds) == shown
