"""Every Kafka client of ours over TLS, against a real broker (Tansu behind a TLS proxy).

The broker advertises only the TLS port, so nothing reaches it in plaintext: the service
replica's producer, `memoryos ingest`, `memoryos dlq`, the lag probe, `memoryos doctor` and the
Faust worker each verify the broker's certificate against MEMORYOS_KAFKA_SSL_CAFILE.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.settings import Settings, load_settings
from adapters.wiring import build_deps, close_deps
from evaluation.fake_openai import FakeOpenAI
from schemas.codec import dumps
from schemas.topics import DLQ, TURNS, user_key
from streams.commands.doctor import check_broker
from streams.commands.ingest import send_file
from streams.dead_letters import read_dead_letters
from streams.lag import LagProbe
from streams.progress import NO_PROGRESS
from streams.stack import KafkaSink, Stack
from tests.support.builders import make_turns
from tests.support.fixtures import settings_for
from tests.support.stacks import FAST_GROUP, eventually
from tests.support.tls import TlsBroker, broker_behind_tls, self_signed

pytestmark = [pytest.mark.integration]


@pytest.fixture
def tls_broker(tmp_path: Path) -> Iterator[TlsBroker]:
    with broker_behind_tls(tmp_path / "tls") as broker:
        yield broker


def tls_settings(tmp_path: Path, broker: TlsBroker, **overrides: Any) -> Settings:
    tls = {"kafka_security_protocol": "SSL", "kafka_ssl_cafile": broker.server.cert}
    return load_settings(data_dir=tmp_path / "data", broker_url=broker.url, **(tls | overrides))


@pytest.mark.asyncio
async def test_the_producers_the_cli_and_the_lag_probe_speak_tls(
    tmp_path: Path, tls_broker: TlsBroker
) -> None:
    settings = tls_settings(tmp_path, tls_broker)
    bootstrap = tls_broker.bootstrap
    turns = make_turns(
        "ada", [("I live in Oslo.", "Nice."), ("I like tea.", "Noted."), ("Hi", "Hi")]
    )

    sink = KafkaSink(bootstrap, settings)  # the service replica's producer
    await sink.start()
    try:
        await sink.send(TURNS, user_key("ada"), dumps(turns[0]))
        await sink.send(DLQ, b"ada", b"a dead letter")
    finally:
        await sink.stop()

    lines = tmp_path / "turns.jsonl"
    lines.write_bytes(b"\n".join(dumps(turn) for turn in turns[1:]) + b"\n")
    report = await send_file(lines, bootstrap, settings, NO_PROGRESS)
    assert (report.acknowledged, report.failed) == (2, 0)

    letters = await read_dead_letters(bootstrap, settings)
    assert [letter.value for letter in letters] == [b"a dead letter"]

    probe = LagProbe(bootstrap, "nobody-committed", [TURNS], settings)
    await probe.start()
    try:
        # No group has committed: every turn is lag. (Not "== 3": Tansu 0.6 answers
        # ListOffsets with one less than Kafka after a batch of several records.)
        async def turns_are_lag() -> bool:
            lag = await probe.lag()
            return len(lag) == settings.topic_partitions and sum(lag.values()) > 0

        await eventually(turns_are_lag, 30)
    finally:
        await probe.stop()

    assert (await check_broker(tls_broker.url, settings))["ok"] is True
    assert tls_broker.proxy.handshakes > 0


@pytest.mark.asyncio
async def test_a_client_without_tls_or_trusting_another_ca_is_refused(
    tmp_path: Path, tls_broker: TlsBroker
) -> None:
    plaintext = load_settings(data_dir=tmp_path, broker_url=tls_broker.url)
    assert (await check_broker(tls_broker.url, plaintext))["ok"] is False

    stranger = self_signed(tmp_path / "other", "stranger")
    wrong_ca = tls_settings(tmp_path, tls_broker, kafka_ssl_cafile=stranger.cert)
    assert (await check_broker(tls_broker.url, wrong_ca))["ok"] is False
    assert tls_broker.proxy.handshakes == 0  # neither got through a handshake


@pytest.mark.asyncio
async def test_mutual_tls_needs_the_client_certificate(tmp_path: Path) -> None:
    client = self_signed(tmp_path / "client", "client")
    with broker_behind_tls(tmp_path / "tls", client_ca=client.cert) as broker:
        anonymous = tls_settings(tmp_path, broker)
        assert (await check_broker(broker.url, anonymous))["ok"] is False
        known = tls_settings(
            tmp_path, broker, kafka_ssl_certfile=client.cert, kafka_ssl_keyfile=client.key
        )
        assert (await check_broker(broker.url, known))["ok"] is True


@pytest.mark.asyncio
async def test_worker_and_service_replica_run_over_tls(
    tmp_path: Path, tls_broker: TlsBroker, fake_openai: FakeOpenAI
) -> None:
    """The Faust worker (consumers, producer, tables, topic creation) and the replica."""
    settings = settings_for(
        fake_openai,
        data_dir=tmp_path / "data",
        broker_url=tls_broker.url,
        kafka_security_protocol="SSL",
        kafka_ssl_cafile=tls_broker.server.cert,
        port=0,
        **FAST_GROUP,
    )
    deps = await build_deps(settings)
    worker = Stack(settings, "worker", deps=deps)
    replica = Stack(settings, "service", deps=deps)
    await worker.start()
    await replica.start()
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{replica.port}") as client:
            posted = await client.post(
                "/v1/users/carol/turns",
                json={"query": "I moved to Oslo.", "response": "Welcome to Oslo!"},
            )
            assert posted.status_code == 202

            async def placed() -> bool:
                found = await client.post("/v1/users/carol/retrieve", json={"query": "Oslo?"})
                return [p["query"] for p in found.json()["short_term"]] == ["I moved to Oslo."]

            await eventually(placed, 60)
        assert await worker.wait_idle(30)  # the lag probe reads offsets over TLS too
    finally:
        await replica.stop()
        await worker.stop()
        await close_deps(deps)
