"""MemoryApp.send, the service's and the reconciler's way onto the broker: a turn returns
once delivered, a visit once buffered."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from schemas.errors import BrokerError
from schemas.topics import MTM, TURNS
from streams import app as app_module
from streams.app import MemoryApp

pytestmark = pytest.mark.asyncio


def app_with(deliveries: dict[str, asyncio.Future[Any]], journaled: bool = False) -> MemoryApp:
    """Senders as Faust's: the send returns the delivery's future, not yet resolved."""

    def sender(topic: str) -> Any:
        async def send(key: bytes | None, value: bytes, headers: Any = None) -> Any:
            return deliveries[topic]

        return send

    senders = {topic: sender(topic) for topic in deliveries}
    return MemoryApp(app=None, topics={}, settings=None, senders=senders,  # type: ignore[arg-type]
                     await_delivery=not journaled)  # fmt: skip


async def test_a_turn_returns_only_once_the_broker_has_it() -> None:
    loop = asyncio.get_running_loop()
    deliveries = {TURNS: loop.create_future(), MTM: loop.create_future()}
    app = app_with(deliveries)
    await asyncio.wait_for(app.send(MTM, b"u", b"visit"), 1.0)  # buffered is enough
    turn = asyncio.create_task(app.send(TURNS, b"u", b"turn"))
    await asyncio.sleep(0.05)
    assert not turn.done(), "acknowledged before the broker had it"
    deliveries[TURNS].set_result(None)
    await asyncio.wait_for(turn, 1.0)


async def test_a_failed_delivery_is_a_broker_error() -> None:
    deliveries = {TURNS: asyncio.get_running_loop().create_future()}
    deliveries[TURNS].set_exception(ConnectionError("broker gone"))
    with pytest.raises(BrokerError, match=r"did not take a record for memoryos\.turns"):
        await app_with(deliveries).send(TURNS, b"u", b"turn")


async def test_a_delivery_that_never_comes_fails_within_its_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(app_module, "DELIVERY_TIMEOUT_S", 0.05)
    deliveries = {TURNS: asyncio.get_running_loop().create_future()}
    with pytest.raises(BrokerError):
        await asyncio.wait_for(app_with(deliveries).send(TURNS, b"u", b"turn"), 5.0)
    assert not deliveries[TURNS].cancelled(), "Faust's own future is left to complete"


async def test_with_the_journal_a_turn_is_not_held_for_the_broker() -> None:
    """The journal makes it durable; waiting per send made a roll's catch-up one record per
    round trip, slower than a bulk ingest journals them."""
    deliveries = {TURNS: asyncio.get_running_loop().create_future()}
    await asyncio.wait_for(app_with(deliveries, journaled=True).send(TURNS, b"u", b"t"), 1.0)
