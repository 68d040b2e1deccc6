"""Consumer lag: how many records of each pipeline topic the workers have not committed yet.

Used to wait until an ingest has been absorbed (drain on stop, `eval`, tests) and for the
``memoryos_consumer_lag`` gauge.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from aiokafka import AIOKafkaConsumer, TopicPartition

from adapters.settings import Settings
from schemas.errors import BrokerError
from streams.kafka_security import kafka_client_options

Lag = dict[tuple[str, int], int]
LAG_TIMEOUT_S = 10.0


class LagProbe:
    def __init__(
        self, bootstrap: str, group_id: str, topics: Sequence[str], settings: Settings
    ) -> None:
        self.bootstrap = bootstrap
        self.settings = settings
        self.group_id = group_id
        self.topics = list(topics)
        self._consumer: AIOKafkaConsumer | None = None

    async def start(self) -> None:
        # A consumer of the workers' group that never subscribes: it can read the group's
        # committed offsets without joining it (Tansu does not answer the admin API's
        # OffsetFetch version).
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group_id,
            enable_auto_commit=False,
            **kafka_client_options(self.settings),
        )
        await self._consumer.start()

    async def stop(self) -> None:
        if self._consumer is not None:
            await self._consumer.stop()

    async def lag(self, timeout_s: float | None = None) -> Lag:
        """Records not yet committed per partition. Bounded: a probe whose broker went away
        (a roll replaced it while a call was under way) would wait for a coordinator forever,
        and whoever samples the lag would hang with it."""
        bound_s = LAG_TIMEOUT_S if timeout_s is None else timeout_s
        try:
            async with asyncio.timeout(bound_s):
                return await self._lag()
        except TimeoutError:
            raise BrokerError(
                f"no consumer lag from {self.bootstrap} within {bound_s:.1f} s"
            ) from None

    async def _lag(self) -> Lag:
        assert self._consumer is not None, "call start() first"
        partitions = []
        for topic in self.topics:
            for partition in self._consumer.partitions_for_topic(topic) or ():
                partitions.append(TopicPartition(topic, partition))
        if not partitions:
            await self._consumer._client.force_metadata_update()  # topics may be new
            return {}
        ends = await self._consumer.end_offsets(partitions)
        result: Lag = {}
        for tp in partitions:
            position = await self._consumer.committed(tp) or 0
            result[(tp.topic, tp.partition)] = max(0, ends[tp] - position)
        return result

    async def wait_idle(self, timeout_s: float, settle_s: float = 0.5) -> bool:
        """Wait until every partition's lag is 0 twice in a row; False on timeout."""
        deadline = time.monotonic() + timeout_s
        quiet_since: float | None = None
        while time.monotonic() < deadline:
            try:
                # never past the caller's deadline (the stop's drain has its own cap)
                lag = await self.lag(min(LAG_TIMEOUT_S, max(0.0, deadline - time.monotonic())))
            except BrokerError:  # no answer this time: not idle, ask again
                lag = {}
            if lag and not any(lag.values()):
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since >= settle_s:
                    return True
            else:
                quiet_since = None
            await asyncio.sleep(0.2)
        return False
