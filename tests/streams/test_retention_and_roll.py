"""Retention per topic and the pieces of the broker's log roll, without a broker."""

from __future__ import annotations

import asyncio
import os

import pytest

from adapters import native_memory
from adapters.process_stats import rss_bytes
from adapters.settings import Settings
from schemas.errors import BrokerError
from schemas.topics import DLQ, EVENTS, MESSAGES, MTM, PIPELINE_TOPICS, TURNS
from streams.retention import TABLES, changelog_topic, topic_configs
from streams.roll import BrokerWatch, GatedSink


def test_every_topic_has_a_policy_and_turns_keep_text_briefly() -> None:
    settings = Settings(turns_retention_s=7200, stage_retention_s=86_400, topic_segment_s=3600)
    configs = topic_configs(settings)
    changelogs = {changelog_topic("memoryos", table) for table in TABLES}
    assert set(configs) == {*PIPELINE_TOPICS, DLQ, EVENTS, *changelogs}
    assert configs[TURNS] == {"cleanup.policy": "delete", "retention.ms": "7200000",
                              "segment.ms": "3600000"}  # fmt: skip
    assert configs[MTM]["retention.ms"] == "86400000"
    assert int(configs[DLQ]["retention.ms"]) > int(configs[MTM]["retention.ms"])
    for name in changelogs:  # compacted, and old values gone within the turns' retention
        assert configs[name]["cleanup.policy"] == "compact"
        assert configs[name]["max.compaction.lag.ms"] == "7200000"


def test_a_segment_never_outlives_a_short_retention() -> None:
    configs = topic_configs(Settings(turns_retention_s=1800, topic_segment_s=3600))
    assert configs[TURNS]["segment.ms"] == "1800000"


class Recorder:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes]] = []

    async def send(self, topic: str, key: bytes, value: bytes) -> None:
        self.sent.append((topic, value))


@pytest.mark.asyncio
async def test_a_closed_gate_drops_journaled_turns_counting_them_and_holds_the_rest() -> None:
    old, new = Recorder(), Recorder()
    gate = GatedSink(old.send, journaled=True, timeout_s=30)
    gate.close()
    await gate.send(TURNS, b"u", b"t1")  # journaled already: sent from the journal
    await gate.send(MESSAGES, b"u", b"m1")  # a bus message is journaled as well
    assert gate.dropped == 2, "a catch-up read knows a turn came while it ran"
    visit = asyncio.create_task(gate.send(MTM, b"u", b"visit"))
    await asyncio.sleep(0)
    assert not visit.done()
    gate.open(new.send)
    await visit
    await gate.send(TURNS, b"u", b"t3")
    assert old.sent == []
    assert new.sent == [(MTM, b"visit"), (TURNS, b"t3")]
    assert gate.dropped == 2


@pytest.mark.asyncio
async def test_without_a_journal_a_closed_gate_holds_turns_too() -> None:
    target = Recorder()
    gate = GatedSink(target.send, journaled=False, timeout_s=30)
    gate.close()
    held = asyncio.create_task(gate.send(TURNS, b"u", b"turn"))
    await asyncio.sleep(0)
    assert not held.done()
    gate.open(target.send)
    await held
    assert target.sent == [(TURNS, b"turn")]


@pytest.mark.asyncio
async def test_a_gate_closed_too_long_fails_visibly() -> None:
    gate = GatedSink(Recorder().send, journaled=True, timeout_s=0.01)
    gate.close()
    with pytest.raises(BrokerError):
        await gate.send(MTM, b"u", b"visit")


@pytest.mark.asyncio
async def test_the_watch_recycles_a_process_over_its_budget() -> None:
    recycled = asyncio.Event()

    async def recycle() -> None:
        recycled.set()

    watch = BrokerWatch(os.getpid, budget_bytes=1, interval_s=0.01, recycle=recycle)
    task = asyncio.create_task(watch.run_forever())
    await asyncio.wait_for(recycled.wait(), 30)
    task.cancel()
    assert rss_bytes(os.getpid()) > 1
    assert rss_bytes(None) == 0


@pytest.mark.asyncio
async def test_the_trim_runs_again_and_again_and_survives_a_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []
    trimmed_twice = asyncio.Event()

    def trim() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise OSError("first trim fails")
        if len(calls) >= 3:
            trimmed_twice.set()

    monkeypatch.setattr(native_memory, "release_freed_memory", trim)
    task = asyncio.create_task(native_memory.release_forever(0.01))
    await asyncio.wait_for(trimmed_twice.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(calls) >= 3


def test_the_stack_trims_every_few_seconds() -> None:
    assert 0 < native_memory.TRIM_INTERVAL_S <= 10
    native_memory.release_freed_memory()  # the real call: glibc trims, elsewhere a no-op
