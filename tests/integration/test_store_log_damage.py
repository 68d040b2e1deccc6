"""A store log damaged after a SIGKILL: every acknowledged turn comes back, or the start is
refused with what to do.

Qdrant Edge reads its write-ahead log up to the first entry it cannot decode and takes that for
the log's end; it refuses to open when a segment's header is unreadable. Journal entries are
settled only after the store flushed, so what a damaged log loses the journal still holds.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.builders import make_turns
from tests.support.stacks import (
    UpProcess,
    eventually,
    kill_everything,
    memory_with,
    summary,
    the_line,
    up_once,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

USER = "wal-user"
ENV = {"MEMORYOS_RECONCILE_INTERVAL_S": "1", "MEMORYOS_STM_CAPACITY": "3"}


def damage(data: Path, offset: int) -> list[Path]:
    """64 KiB of junk over every collection's open log segment, at ``offset``."""
    logs = sorted((data / "qdrant").glob("*/wal/open-1"))
    assert logs, "the store has no log to damage"
    for log in logs:
        with log.open("r+b") as handle:
            handle.seek(offset)
            handle.write(b"\xab" * 65536)
    return logs


async def post(up: UpProcess, turns: list[dict[str, Any]]) -> None:
    async with httpx.AsyncClient() as client:
        response = await client.post(f"{up.url}/v1/turns", json=turns, timeout=60)
        assert response.status_code == 202, response.text


def journaled(data: Path) -> int:
    with sqlite3.connect(data / "journal.sqlite3") as db:
        return int(db.execute("SELECT count(*) FROM inbox").fetchone()[0])


async def restarted_with(data: Path, env: dict[str, str], turns: list[dict[str, Any]]) -> Any:
    """Start again on ``data`` and wait for every one of ``turns``; the memory, then stop."""
    up = UpProcess(data, **env)
    up.start()
    try:
        await up.wait_ready()
        memory = await memory_with(up, USER, len(turns))
        assert sorted(summary(memory)[2]) == sorted(t["turn_id"] for t in turns)
        return memory
    finally:
        kill_everything(up)


async def test_a_damaged_store_log_loses_no_acknowledged_turn(tmp_path: Path) -> None:
    data = tmp_path / "data"
    turns = [
        t.model_dump(mode="json")
        for t in make_turns(
            USER, [(f"My pet number {i} is a cat.", f"Cat {i}.") for i in range(24)]
        )
    ]
    up = UpProcess(data, **ENV)
    up.start()
    try:
        await up.wait_ready()
        await post(up, turns[:20])
        await memory_with(up, USER, 20)
        # settled: the journal no longer holds them, so only the store's copy is left
        await eventually(lambda: journaled(data) == 0, 60)
        await post(up, turns[20:])  # acknowledged, in flight when the stack dies
    finally:
        kill_everything(up)

    damage(data, 8)  # past the header: Edge stops reading there and opens without a word
    await restarted_with(data, ENV, turns)

    [first, *_] = damage(data, 0)  # the header itself: Edge refuses the log
    done, _ = await asyncio.to_thread(up_once, data)
    line = the_line(done)
    assert "write-ahead log is damaged in 5 collection(s)" in line, done.stderr
    assert line.count("wal.damaged") == 5
    for log in (data / "qdrant").glob("*/wal"):
        log.rename(log.with_name("wal.damaged"))  # what the line says to do
    await restarted_with(data, ENV, turns)
    assert first.parent.with_name("wal.damaged").exists()


async def test_one_collections_damaged_log_loses_no_mid_term_page(tmp_path: Path) -> None:
    """Each collection has its own log: the segments' log damaged alone once left the pages
    naming segments the store no longer had, and the user's mid-term memory read empty."""
    data = tmp_path / "data"
    env = ENV | {"MEMORYOS_RECONCILE_INTERVAL_S": "600"}  # the journal still holds every turn
    talk = [(f"My locker number {i} is on floor {i}.", f"Locker {i} noted.") for i in range(12)]
    turns = [t.model_dump(mode="json") for t in make_turns(USER, talk)]
    up = UpProcess(data, **env)
    up.start()
    try:
        await up.wait_ready()
        await post(up, turns)
        memory = await memory_with(up, USER, 12)
        assert len(summary(memory)[1]) == 9  # three in STM, nine in segments
    finally:
        kill_everything(up)
    log = data / "qdrant" / "segments" / "wal" / "open-1"
    with log.open("r+b") as handle:
        handle.seek(8)
        handle.write(b"\xab" * 65536)
    short, mid, _ = summary(await restarted_with(data, env, turns))
    assert (len(short), len(mid)) == (3, 9)
