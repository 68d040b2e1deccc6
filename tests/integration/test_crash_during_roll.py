"""SIGKILL of the whole embedded stack while its broker rolls, under steady writes.

A roll is a plain restart: client writes are refused (503 with Retry-After; the writers send
them again), the worker and the broker stop, fresh ones start as at start-up (the reconciler's
start pass, then `Stack.catch_up_journal`), writes are accepted again. A kill in any of those
steps must lose no acknowledged turn, link none twice and keep each user's order.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import httpx
import pytest

from adapters.ports import PAGES
from adapters.settings import Settings
from adapters.stores.edge import EdgeStore
from evaluation.fake_openai import FakeOpenAI
from tests.support.builders import make_turns
from tests.support.stacks import UpProcess, eventually, kill_everything, up_env

pytestmark = [
    pytest.mark.integration,
    pytest.mark.asyncio,
    pytest.mark.slow,
    pytest.mark.timeout(900),
]

USERS = ("roll-a", "roll-b", "roll-c", "roll-d")
PER_REQUEST = 3
PAUSE_S = 0.5  # between a user's requests: about 24 turns/s in all, a steady load
ROLL_LINE = "over its budget: recycling it"
CATCH_UP_LINE = "catching up from the journal"
# Where each kill lands, after the roll's line: as the worker stops; as the catch-up starts
# (its own line is waited for); and once later turns went through the reopened API and were
# stored, so a turn the roll failed to send would be settled as passed and lost.
KILLS = ((ROLL_LINE, 0.2), (CATCH_UP_LINE, 0.0), (CATCH_UP_LINE, 4.0))


def no_eviction_env(server: FakeOpenAI) -> dict[str, str]:
    """The embedded default; MTM never full, so every linked turn keeps its page and the
    chain's seq runs 1..n with no gap."""
    return {**up_env(server), "MEMORYOS_MTM_CAPACITY": "100000"}


def roll_env(server: FakeOpenAI) -> dict[str, str]:
    """As above, with a broker budget it passes within a hundred turns or so (a fresh broker
    is under 20 MB)."""
    return {
        **no_eviction_env(server),
        "MEMORYOS_BROKER_MEMORY_BUDGET_MB": "35",
        "MEMORYOS_BROKER_CHECK_INTERVAL_S": "0.5",
    }


class Writers:
    """One client per user, each posting its user's next turns in order until stopped; a
    turn counts as acknowledged only when its request got 202. A 503 with Retry-After (a
    roll) is sent again, the same turns, a short pause later."""

    def __init__(self) -> None:
        turns = [(f"{{u}} asks about thing {i}", f"thing {i} noted") for i in range(2000)]
        self.turns = {u: make_turns(u, [(q.format(u=u), r) for q, r in turns]) for u in USERS}
        self.posted = dict.fromkeys(USERS, 0)
        self.acked: set[tuple[str, str]] = set()  # (user, turn id): turn ids are per user
        self.refused = 0  # 503s with Retry-After: refused during a roll, nothing written

    async def write(self, url: str, stop: asyncio.Event) -> None:
        await asyncio.gather(*(self._user(url, user, stop) for user in USERS))

    async def _user(self, url: str, user: str, stop: asyncio.Event) -> None:
        async with httpx.AsyncClient(timeout=30) as client:
            while not stop.is_set():
                first = self.posted[user]
                batch = self.turns[user][first : first + PER_REQUEST]
                self.posted[user] += len(batch)  # sent: it may be stored even unacknowledged
                try:
                    response = await client.post(
                        f"{url}/v1/turns", json=[t.model_dump(mode="json") for t in batch]
                    )
                except httpx.HTTPError:
                    return  # the stack was killed under this request
                if response.status_code == 503 and "retry-after" in response.headers:
                    self.refused += 1
                    self.posted[user] -= len(batch)  # refused with nothing written: again
                    await asyncio.sleep(0.2)
                    continue
                if response.status_code != 202:
                    return  # a 503 while the stack goes down: not acknowledged
                self.acked.update((user, t.turn_id) for t in batch)
                await asyncio.sleep(PAUSE_S)


def log_count(up: UpProcess, line: str) -> int:
    return up.log.read_text(errors="replace").count(line) if up.log.exists() else 0


async def kill_in_a_roll(up: UpProcess, writers: Writers, line: str, delay_s: float) -> int:
    """Kill ``delay_s`` after the next ``line``; returns the turns acknowledged from that line
    to the kill (none while the roll refuses writes; some once it reopened them)."""
    stop = asyncio.Event()
    task = asyncio.create_task(writers.write(up.url, stop))
    seen = log_count(up, line)
    try:
        await eventually(lambda: _more(up, line, seen), 180, every_s=0.05)
        at_line = len(writers.acked)
        await asyncio.sleep(delay_s)
        kill_everything(up)
        in_window = len(writers.acked) - at_line
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 60)
    return in_window


async def _more(up: UpProcess, line: str, seen: int) -> bool:
    return log_count(up, line) > seen


async def test_sigkill_at_each_step_of_a_roll_loses_no_acknowledged_turn(tmp_path: Path) -> None:
    data, writers, after_lines = tmp_path / "data", Writers(), 0
    with FakeOpenAI(latency_s=0.01) as server:
        for line, delay_s in KILLS:
            up = UpProcess(data, **roll_env(server))
            up.start()
            await up.wait_ready()
            after_lines += await kill_in_a_roll(up, writers, line, delay_s)
        up = UpProcess(data, **no_eviction_env(server))  # recovery without rolls
        up.start()
        try:
            await up.wait_ready()
            await eventually(lambda: _every_acked_stored(up, writers), 300, every_s=2.0)
        finally:
            up.terminate()
    store = EdgeStore(data / "qdrant")
    await store.ensure_collections(Settings().embedding_dim)
    try:
        for user in USERS:
            points = await store.scroll(PAGES, user)
            stored = sorted((int(p.payload["seq"]), str(p.payload["turn_id"])) for p in points)
            order = [t.turn_id for t in writers.turns[user][: writers.posted[user]]]
            ids = [turn_id for _, turn_id in stored]
            assert [seq for seq, _ in stored] == list(range(1, len(stored) + 1)), (
                f"{user}: each stored turn linked once, seq 1..n with no gap"
            )
            assert len(ids) == len(set(ids)), f"{user}: no turn stored twice"
            stored_ids = set(ids)
            assert ids == [t for t in order if t in stored_ids], f"{user}: the posting order kept"
            acked = [t for t in order if (user, t) in writers.acked]
            assert set(acked) <= set(ids), f"{user}: every acknowledged turn stored"
    finally:
        await store.close()
    assert len(writers.acked) > 100, "the kills landed under load"
    assert writers.refused > 0, "writes were refused during the rolls"
    assert after_lines > 0, "turns were acknowledged after a roll reopened writes, then killed"


async def _every_acked_stored(up: UpProcess, writers: Writers) -> bool:
    for user in USERS:
        memory = await up.memory(user)
        listed = {p["turn_id"] for p in memory["short_term"]}
        listed |= {p["turn_id"] for s in memory["mid_term"] for p in s["pages"]}
        wanted = {t for u, t in writers.acked if u == user}
        if not wanted <= listed:
            return False
    return True
