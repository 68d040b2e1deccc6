"""SIGKILL of the whole embedded stack (process, broker and all) while turns are in flight.

The embedded broker keeps nothing on disk; the journal and the reconciler must make every
acknowledged turn end in memory exactly once after a restart on the same data dir.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from adapters.journal import SqliteJournal, journal_path
from adapters.settings import load_settings
from evaluation.fake_openai import FakeOpenAI
from streams import reconciler as reconciler_module
from streams.broker import free_port
from tests.support.builders import make_turns
from tests.support.stacks import (
    FAST_GROUP,
    UpProcess,
    eventually,
    kill_everything,
    memory_with,
    running_stack,
    summary,
    up_env,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio]

USERS = ("crash-a", "crash-b", "crash-c")
PER_USER = 70  # 210 turns in all
STM_CAPACITY = 7


async def post_turns(up: UpProcess, batch: list[dict[str, Any]]) -> None:
    async with httpx.AsyncClient() as client:
        response = await client.post(f"{up.url}/v1/turns", json=batch, timeout=60)
        assert response.status_code == 202, response.text
        assert response.json()["accepted"] == len(batch)


@pytest.mark.slow
async def test_sigkill_of_the_whole_stack_loses_no_acknowledged_turn(tmp_path: Path) -> None:
    data = tmp_path / "data"
    turns = {user: make_turns(user, [(f"{user} asks about topic {i % 5} detail {i}",
                                       f"answer {i}") for i in range(PER_USER)])
             for user in USERS}  # fmt: skip
    with FakeOpenAI(latency_s=0.02) as server:
        up = UpProcess(data, **up_env(server))
        up.start()
        await up.wait_ready()
        # Kill 1: right after the first half is acknowledged, with most of it in flight.
        half = PER_USER // 2
        await post_turns(up, [t.model_dump(mode="json") for u in USERS for t in turns[u][:half]])
        await asyncio.sleep(0.3)
        kill_everything(up)

        up = UpProcess(data, **up_env(server))
        up.start()
        await up.wait_ready()
        # Kill 2: the rest acknowledged while the recovered work still runs.
        await post_turns(up, [t.model_dump(mode="json") for u in USERS for t in turns[u][half:]])
        await asyncio.sleep(1.0)
        kill_everything(up)

        up = UpProcess(data, **up_env(server))
        up.start()
        try:
            await up.wait_ready()
            for user in USERS:
                memory = await memory_with(up, user, PER_USER)
                short, mid, every = summary(memory)
                expected = sorted(t.turn_id for t in turns[user])
                assert sorted(every) == expected, "every acknowledged turn exactly once"
                assert short == expected[-STM_CAPACITY:], "STM holds the newest 7 pages"
                assert len(mid) == len(set(mid)) == PER_USER - STM_CAPACITY
        finally:
            up.terminate()


async def test_sigkill_after_ingest_loses_no_acknowledged_turn(tmp_path: Path) -> None:
    data = tmp_path / "data"
    lines = [
        orjson.dumps(turn.model_dump(mode="json"))
        for user in USERS
        for turn in make_turns(user, [(f"{user} likes item {i}", f"ok {i}") for i in range(30)])
    ]
    source = tmp_path / "turns.jsonl"
    source.write_bytes(b"\n".join(lines) + b"\n")
    with FakeOpenAI(latency_s=0.02) as server:
        up = UpProcess(data, **up_env(server))
        up.start()
        await up.wait_ready()
        result = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "streams.cli", "ingest", str(source), "--data-dir", str(data),
             "--url", f"http://127.0.0.1:{up.port}", "--quiet"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr
        assert "acknowledged 90 of 90 turns by the stack" in result.stdout
        kill_everything(up)  # at once: most turns are still in the broker only

        up = UpProcess(data, **up_env(server))
        up.start()
        try:
            await up.wait_ready()
            for user in USERS:
                memory = await memory_with(up, user, 30)
                assert sorted(summary(memory)[2]) == [f"t{i:03d}" for i in range(30)]
        finally:
            up.terminate()


@pytest.mark.slow
async def test_a_backlog_longer_than_one_reconciler_read_is_sent_whole_and_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A restart finds more acknowledged turns in the journal than one reconciler pass reads
    (10,000; 3 here). The rest must go out at start, before a client's new turn of the same
    user is stored: after that, the reconciler would take them for processed."""
    monkeypatch.setattr(reconciler_module, "JOURNAL_READ", 3)
    user, count = "backlog-a", 9
    turns = make_turns(user, [(f"{user} crate {i}", f"crate {i} noted") for i in range(count)])
    data_dir = tmp_path / "data"
    settings = load_settings(data_dir=data_dir, broker_port=free_port(), port=0, **FAST_GROUP)
    journal = SqliteJournal(journal_path(settings))
    await journal.append(turns[:-1])  # acknowledged, then the process died before sending
    journal.close()
    async with running_stack(data_dir) as stack:
        assert stack.service is not None
        await stack.service.add_turns(turns[-1:])  # a client's next turn, right after start
        memory = await eventually(lambda: _all_pages(stack, user, count), 90, every_s=1.0)
    short = [p["turn_id"] for p in memory["short_term"]]
    mid = [p["turn_id"] for s in memory["mid_term"] for p in s["pages"]]
    expected = [t.turn_id for t in turns]
    assert sorted(short + mid) == expected, "every acknowledged turn, exactly once"
    assert short == expected[-STM_CAPACITY:], "the STM window holds the newest, in order"


async def _all_pages(stack: Any, user: str, count: int) -> dict[str, Any] | None:
    memory = await stack.service.get_memory(user)
    pages = len(memory["short_term"]) + sum(len(s["pages"]) for s in memory["mid_term"])
    return memory if pages >= count else None
