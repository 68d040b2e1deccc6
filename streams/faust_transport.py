"""A Faust app whose Kafka consumer polls with a short fetch wait.

faust-streaming hard-codes ``fetch_max_wait_ms=1500``. Kafka answers a waiting fetch as soon as
data arrives, but the embedded Tansu broker holds it for the whole wait, so each hop of the
pipeline could take up to 1.5 s. Here the wait is a setting
(``MEMORYOS_CONSUMER_FETCH_MAX_WAIT_MS``; docs/configuration.md says why it is short).
"""

from __future__ import annotations

from typing import Any

import faust
from faust.transport.drivers import aiokafka as faust_aiokafka


def _consumer_thread_class(fetch_max_wait_ms: int) -> type[Any]:
    class ShortWaitConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
        def _create_worker_consumer(self, transport: Any) -> Any:
            consumer = super()._create_worker_consumer(transport)
            consumer._fetch_max_wait_ms = fetch_max_wait_ms  # read when the fetcher starts
            return consumer

    return ShortWaitConsumerThread


def _transport_class(fetch_max_wait_ms: int) -> type[Any]:
    thread_class = _consumer_thread_class(fetch_max_wait_ms)

    class ShortWaitConsumer(faust_aiokafka.Consumer):
        def _new_consumer_thread(self) -> Any:
            return thread_class(self, loop=self.loop, beacon=self.beacon)

    class ShortWaitTransport(faust_aiokafka.Transport):
        Consumer = ShortWaitConsumer

    return ShortWaitTransport


class ShortWaitApp(faust.App):
    """``faust.App`` with ``fetch_max_wait_ms`` under our control."""

    def __init__(self, *args: Any, fetch_max_wait_ms: int, **kwargs: Any) -> None:
        self._transport_class = _transport_class(fetch_max_wait_ms)
        super().__init__(*args, **kwargs)

    def _new_transport(self) -> Any:
        return self._transport_class(self.conf.broker_consumer, self)
