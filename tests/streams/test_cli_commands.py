"""The long commands as a script and as a person see them: plain lines in a pipe (asserted on,
as a script would parse them) and a live bar on a terminal (a pty)."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from streams.broker import EmbeddedBroker, free_port
from streams.cli import main
from tests.support.builders import make_turns
from tests.support.stacks import UpProcess

pytestmark = pytest.mark.integration

CHAT = [
    (f"Question {i}: what about trip {i % 3}?", f"Answer {i}: the mountains.") for i in range(30)
]
BAR = "━"  # rich's bar glyph: drawn only on a terminal


def write_jsonl(path: Path, user: str, turns: int, bad_lines: int = 0) -> Path:
    lines = [orjson.dumps(t.model_dump(mode="json")) for t in make_turns(user, CHAT[:turns])]
    lines += [b'{"user_id": "%s"}' % user.encode()] * bad_lines
    path.write_bytes(b"\n".join(lines) + b"\n\n")  # a blank line is not a line of data
    return path


def memoryos(*args: str) -> list[str]:
    return [sys.executable, "-m", "streams.cli", *args]


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(free_port()) as running:
        yield running


def test_ingest_in_a_pipe_prints_plain_lines_and_a_summary(
    tmp_path: Path, broker: EmbeddedBroker
) -> None:
    path = write_jsonl(tmp_path / "turns.jsonl", "ann", 30, bad_lines=12)
    result = subprocess.run(
        memoryos("ingest", str(path), "--broker", broker.url),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr  # invalid lines
    out = result.stdout.splitlines()
    assert re.fullmatch(
        r"sent 30 turns to memoryos\.turns in [\d.]+ s \([\d.]+ turns/s, .+/s\)", out[0]
    )
    assert out[1:] == ["acknowledged 30 of 30 turns by the broker", "invalid 12 of 42 lines"]
    errors = result.stderr.splitlines()
    assert "ingest: send: started (" in errors[0]
    shown = [line for line in errors if re.match(rf"{re.escape(str(path))}:\d+: ", line)]
    assert shown[0] == f"{path}:31: query: Field required; response: Field required"
    assert len(shown) == 10
    assert f"{path}: 2 more invalid lines not shown" in errors
    assert any(line.startswith("ingest: send: done, ") for line in errors)
    assert BAR not in result.stderr


def test_ingest_of_a_clean_file_exits_0_and_quiet_keeps_the_done_line(
    tmp_path: Path, broker: EmbeddedBroker
) -> None:
    path = write_jsonl(tmp_path / "turns.jsonl", "cy", 5)
    result = subprocess.run(
        memoryos("ingest", str(path), "--broker", broker.url, "--quiet"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1:] == [
        "acknowledged 5 of 5 turns by the broker",
        "invalid 0 of 5 lines",
    ]
    assert [line.split(",")[0] for line in result.stderr.splitlines()] == ["ingest: send: done"]


def run_in_terminal(command: list[str], timeout_s: float = 120) -> tuple[int, str]:
    """``command`` with a pty as its terminal, as a person at a shell runs it."""
    leader, follower = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "160", "LINES": "40"}
    process = subprocess.Popen(command, stdin=follower, stdout=follower, stderr=follower, env=env)
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    return process.wait(timeout=timeout_s), seen.decode(errors="replace")


def test_ingest_on_a_terminal_shows_a_progress_bar(tmp_path: Path, broker: EmbeddedBroker) -> None:
    path = write_jsonl(tmp_path / "turns.jsonl", "dee", 20)
    code, screen = run_in_terminal(memoryos("ingest", str(path), "--broker", broker.url))
    assert code == 0, screen
    assert BAR in screen
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", screen)  # colours and cursor moves
    assert re.search(r"send .*20 lines", text)
    assert "ingest: send:" not in screen  # no plain lines where the bar is
    assert "acknowledged 20 of 20 turns by the broker" in screen


@pytest.mark.slow
@pytest.mark.asyncio
@pytest.mark.timeout(240)
async def test_up_then_ingest_wait_in_a_pipe(tmp_path: Path) -> None:
    up = UpProcess(tmp_path / "data")
    up.start()
    try:
        await up.wait_ready()
        path = write_jsonl(tmp_path / "turns.jsonl", "eve", 12)
        command = memoryos("ingest", str(path), "--wait", "--url", up.url)
        env = {**os.environ, "MEMORYOS_BROKER_PORT": str(up.broker_port)}
        result = await asyncio.to_thread(
            subprocess.run, command, capture_output=True, text=True, timeout=180, env=env
        )
    finally:
        up.terminate()
    log = up.log.read_text()
    for step in ("broker", "model", "worker", "http"):
        assert re.search(rf"^up: {step}: done in [\d.]+ s$", log, re.M), log
    assert re.search(
        r"^memoryos is up in [\d.]+ s \(broker [\d.]+ s, model [\d.]+ s, worker [\d.]+ s, "
        r"http [\d.]+ s\)$",
        log,
        re.M,
    )
    assert f"{up.url}/healthz" in log
    assert f"curl -s {up.url}/v1/users/alice/memory" in log

    assert result.returncode == 0, result.stdout + result.stderr
    placed = re.fullmatch(
        r"placed 12 of 12 turns in [\d.]+ s \((\d+) short-term, (\d+) mid-term\)",
        result.stdout.splitlines()[-1],
    )
    assert placed, result.stdout
    assert int(placed[1]) + int(placed[2]) == 12
    assert "ingest: placed: started (12 turns)" in result.stderr


LOCOMO_SAMPLE = {
    "sample_id": "s1",
    "conversation": {
        "speaker_a": "Ann",
        "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ann" if i % 2 == 0 else "Bob", "dia_id": f"D1:{i + 1}",
             "text": f"line {i} about the puppy Biscuit"}
            for i in range(6)
        ],
    },
    "qa": [
        {"question": "What is the puppy called?", "answer": "Biscuit", "evidence": ["D1:1"],
         "category": 4},
        {"question": "Who owns the puppy?", "answer": "Ann", "evidence": ["D1:2"], "category": 4},
    ],
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_eval_locomo_reports_samples_pages_and_questions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([LOCOMO_SAMPLE]))
    monkeypatch.setenv("MEMORYOS_LLM", "offline")
    monkeypatch.setenv("MEMORYOS_DATA_DIR", str(tmp_path / "data"))
    assert main(["eval", "locomo", str(data), "--out", str(tmp_path / "out")]) == 0
    steps = [line for line in capsys.readouterr().err.splitlines() if ": done" in line]
    assert [line.split(":")[1].strip() for line in steps] == [
        "start stack",
        "send",
        "placed",  # its count is sampled every 15 s: not asserted
        "questions",
    ]
    assert steps[1].startswith("eval locomo: send: done, 1 samples in ")
    assert steps[3].startswith("eval locomo: questions: done, 2 questions in ")


def test_ingest_messages_takes_a_plain_host_port_broker(
    tmp_path: Path, broker: EmbeddedBroker
) -> None:
    messages = [
        {"user_id": "ann", "conversation_id": "c1", "message_id": f"m{i}",
         "role": "user" if i % 2 == 0 else "assistant", "text": f"message {i}",
         "timestamp": "2024-05-01T10:00:00Z", "channel": "whatsapp"}
        for i in range(6)
    ]  # fmt: skip
    path = tmp_path / "messages.jsonl"
    lines = [orjson.dumps(m) for m in messages] + [b'{"user_id": "ann", "role": "bot"}']
    path.write_bytes(b"\n".join(lines) + b"\n")
    host_port = broker.url.removeprefix("kafka://")
    result = subprocess.run(
        memoryos("ingest", "--messages", str(path), "--broker", host_port, "--quiet"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr  # one invalid line
    out = result.stdout.splitlines()
    assert re.fullmatch(r"sent 6 messages to memoryos\.messages in .+", out[0])
    assert out[1:] == ["acknowledged 6 of 6 messages by the broker", "invalid 1 of 7 lines"]
    assert f"{path}:7: " in result.stderr
    refused = subprocess.run(
        memoryos("ingest", "--messages", "--wait", str(path), "--broker", host_port),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2
    assert "--wait" in refused.stderr


def test_ingest_without_a_running_stack_says_where_it_looked(tmp_path: Path) -> None:
    """With the embedded broker the turns go through the stack's HTTP API: no stack, no send,
    and the message says so and how to fix it (exit 2, as for a missing broker)."""
    path = write_jsonl(tmp_path / "turns.jsonl", "ann", 3)
    url = f"http://127.0.0.1:{free_port()}"
    result = subprocess.run(
        memoryos("ingest", str(path), "--url", url, "--quiet"),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"no memoryos stack answers at {url}" in result.stderr
    assert "memoryos up" in result.stderr
