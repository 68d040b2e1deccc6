"""LagProbe's calls are bounded: a probe whose broker went away must not hang its caller."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import TopicPartition

from adapters.settings import Settings
from schemas.errors import BrokerError
from streams import lag as lag_module
from streams.lag import LagProbe

pytestmark = pytest.mark.asyncio


class Stranded:
    """A consumer whose coordinator is gone: `committed` never answers (aiokafka waits for
    one), as after a broker roll replaced the probe's broker mid-call."""

    def partitions_for_topic(self, topic: str) -> set[int]:
        return {0}

    async def end_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        return dict.fromkeys(partitions, 5)

    async def committed(self, tp: TopicPartition) -> int:
        await asyncio.Event().wait()
        return 0


async def test_a_lag_call_that_gets_no_answer_fails_instead_of_hanging(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A soak's sampling hung for good on one such call after a roll."""
    monkeypatch.setattr(lag_module, "LAG_TIMEOUT_S", 0.05)
    probe = LagProbe("127.0.0.1:1", "memoryos", ["memoryos.turns"], Settings())
    probe._consumer = Stranded()  # type: ignore[assignment]
    with pytest.raises(BrokerError, match="no consumer lag"):
        await asyncio.wait_for(probe.lag(), 5)
    assert await asyncio.wait_for(probe.wait_idle(0.2), 5) is False
    monkeypatch.setattr(lag_module, "LAG_TIMEOUT_S", 60.0)  # a call is still cut at the deadline
    assert await asyncio.wait_for(probe.wait_idle(0.2), 5) is False


async def test_an_answering_probe_still_counts_the_lag() -> None:
    probe = LagProbe("127.0.0.1:1", "memoryos", ["memoryos.turns"], Settings())
    consumer = Stranded()

    async def committed(tp: TopicPartition) -> int:
        return 3

    consumer.committed = committed  # type: ignore[method-assign]
    probe._consumer = consumer  # type: ignore[assignment]
    assert await probe.lag() == {("memoryos.turns", 0): 2}
