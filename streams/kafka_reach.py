"""Reaching a given Kafka broker at start: a few tries, then one clear line (no traceback)."""

from __future__ import annotations

import asyncio
import logging

from aiokafka.admin import AIOKafkaAdminClient

from adapters.settings import Settings
from schemas.errors import BrokerError
from streams.kafka_security import kafka_client_options

log = logging.getLogger(__name__)
ATTEMPTS = 3  # 1 + 2 s apart: a broker that is still starting gets a moment, a wrong one does not
TIMEOUT_S = 5.0


async def reach_kafka(bootstrap: str, settings: Settings, attempts: int = ATTEMPTS) -> None:
    """Raise ``BrokerError`` naming the address and the setting once every try has failed."""
    last: Exception | None = None
    quiet = logging.getLogger("aiokafka")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)  # aiokafka logs an error per try; one line says it below
    try:
        for attempt in range(attempts):
            last = await _try(bootstrap, settings, attempt, attempts)
            if last is None:
                return
    finally:
        quiet.setLevel(level)
    raise BrokerError(
        f"cannot reach the Kafka broker at {bootstrap} after {attempts} tries ({last}); check "
        "MEMORYOS_BROKER_URL (or --broker) and, for TLS or SASL, the MEMORYOS_KAFKA_* settings"
    )


async def _try(bootstrap: str, settings: Settings, attempt: int, attempts: int) -> Exception | None:
    """One try: None if the broker answered, else why not."""
    if attempt:
        await asyncio.sleep(float(attempt))
    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap,
        request_timeout_ms=int(TIMEOUT_S * 1000),
        **kafka_client_options(settings),
    )
    try:
        await asyncio.wait_for(admin.start(), TIMEOUT_S * 2)
        return None
    except Exception as exc:  # connection refused, DNS, TLS, a timeout: all say the same
        log.debug("Kafka at %s: try %d of %d failed: %r", bootstrap, attempt + 1, attempts, exc)
        return exc
    finally:
        await admin.close()
