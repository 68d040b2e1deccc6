"""`memoryos up` as users run it: restart keeps memory, kill -9 loses and duplicates nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from streams.broker import EmbeddedBroker, free_port, port_is_open
from tests.support.builders import make_turns
from tests.support.stacks import UpProcess, eventually, model_processes, running, strip_volatile

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]

CHAT = [
    (f"Question {i}: I am planning trip number {i % 3} to the mountains.", f"Answer {i}: enjoy!")
    for i in range(30)
]


def write_jsonl(path: Path, user: str, count: int, extra_lines: list[bytes] = ()) -> Path:
    lines = [orjson.dumps(t.model_dump(mode="json")) for t in make_turns(user, CHAT[:count])]
    path.write_bytes(b"\n".join([*lines[:2], *extra_lines, *lines[2:]]) + b"\n")
    return path


def ingest(path: Path, port: int | None = None, broker: str | None = None) -> Any:
    """Into the embedded stack through its HTTP API at ``port``, or to the Kafka ``broker``."""
    command = [sys.executable, "-m", "streams.cli", "ingest", str(path)]
    command += ["--broker", broker] if broker else []
    command += ["--url", f"http://127.0.0.1:{port}"] if port else []
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


async def settled(up: UpProcess, user: str) -> dict[str, Any]:
    """The user's memory once two reads a few seconds apart agree (persona jobs done)."""
    previous: dict[str, Any] | None = None

    async def same() -> dict[str, Any] | None:
        nonlocal previous
        current = strip_volatile(await up.memory(user))
        agreed = current if current == previous else None
        previous = current
        return agreed

    result: dict[str, Any] = await eventually(same, 120, every_s=3.0)
    return result


def page_turn_ids(memory: dict[str, Any]) -> list[str]:
    pages = memory["short_term"] + [p for s in memory["mid_term"] for p in s["pages"]]
    return sorted(p["turn_id"] for p in pages)


async def test_restart_keeps_memory_and_leaves_no_broker_behind(tmp_path: Path) -> None:
    up = UpProcess(tmp_path / "data")
    up.start()
    try:
        await up.wait_ready()
        bad = [b'{"user_id": "alice"}', b"not json at all"]
        result = ingest(write_jsonl(tmp_path / "turns.jsonl", "alice", 12, bad), up.port)
        assert result.returncode == 1, result.stdout + result.stderr
        assert ":3:" in result.stderr
        assert ":4:" in result.stderr
        assert "sent 12 turns" in result.stdout
        expected = [f"t{i:03d}" for i in range(12)]

        async def all_in() -> Any:
            memory = await up.memory("alice")
            return memory if page_turn_ids(memory) == expected and memory["mid_term"] else None

        await eventually(all_in, 120)
        before = await settled(up, "alice")
        (model,) = model_processes(up.process.pid)  # MiniLM in its own process (the default)
        assert up.interrupt() == 0  # Ctrl-C: the broker must outlive the drain
        assert not running(model), "the model process outlived memoryos up"
        assert not port_is_open("127.0.0.1", up.broker_port), "the embedded broker was stopped"
    finally:
        if up.process and up.process.poll() is None:
            up.kill()
    again = UpProcess(tmp_path / "data")
    again.start()
    try:
        await again.wait_ready()
        after = await again.memory("alice")
        assert strip_volatile(after) == strip_volatile(before)
    finally:
        again.terminate()


async def test_kill_9_mid_ingest_loses_nothing_and_duplicates_nothing(tmp_path: Path) -> None:
    with EmbeddedBroker(free_port()) as broker:
        up = UpProcess(tmp_path / "data", broker=broker.url)
        up.start()
        await up.wait_ready()
        result = ingest(write_jsonl(tmp_path / "turns.jsonl", "bob", 30), broker=broker.url)
        assert result.returncode == 0, result.stderr

        async def some_in() -> bool:
            return len(page_turn_ids(await up.memory("bob"))) >= 5

        await eventually(some_in, 120, every_s=0.05)
        models = model_processes(up.process.pid)
        assert models, "MiniLM runs in a process of its own by default"
        up.kill()  # SIGKILL: no drain, no clean shutdown

        async def models_gone() -> bool:  # their stdin closed with the parent: they exit
            return not any(running(pid) for pid in models)

        await eventually(models_gone, 30)
        restarted = UpProcess(tmp_path / "data", broker=broker.url)
        restarted.start()
        try:
            await restarted.wait_ready()
            expected = [f"t{i:03d}" for i in range(30)]

            async def complete() -> Any:
                ids = page_turn_ids(await restarted.memory("bob"))
                return ids if len(ids) >= 30 else None

            ids = await eventually(complete, 180)
            assert ids == expected, "every turn exactly once"
        finally:
            restarted.terminate()
