"""The production process model in one test process: a broker, a `worker` and a stateless
`serve` replica (sharing one store here, as they share a Qdrant server in production)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from adapters.settings import load_settings
from adapters.wiring import build_deps, close_deps
from streams.broker import EmbeddedBroker, free_port
from streams.stack import Stack
from tests.support.stacks import FAST_GROUP, eventually

pytestmark = [pytest.mark.integration]


@pytest.mark.asyncio
async def test_worker_and_service_replica_cooperate_through_kafka(tmp_path: Path) -> None:
    with EmbeddedBroker(free_port()) as broker:
        settings = load_settings(data_dir=tmp_path, broker_url=broker.url, port=0, **FAST_GROUP)
        deps = await build_deps(settings)
        worker = Stack(settings, "worker", deps=deps)
        replica = Stack(settings, "service", deps=deps)
        await worker.start()
        await replica.start()
        try:
            async with httpx.AsyncClient() as client:
                api = f"http://127.0.0.1:{replica.port}"
                health = f"http://127.0.0.1:{worker.port}"
                posted = await client.post(
                    f"{api}/v1/users/carol/turns",
                    json={"query": "I moved to Oslo.", "response": "Welcome to Oslo!"},
                )
                assert posted.status_code == 202

                async def visible() -> bool:
                    found = await client.post(
                        f"{api}/v1/users/carol/retrieve", json={"query": "Where do I live?"}
                    )
                    return [p["query"] for p in found.json()["short_term"]] == ["I moved to Oslo."]

                await eventually(visible, 60)
                assert (await client.get(f"{health}/readyz")).status_code == 200
                assert (await client.get(f"{api}/readyz")).status_code == 200
                assert "memoryos_events_total" in (await client.get(f"{health}/metrics")).text
                # A worker serves health and metrics, not the memory API.
                assert (await client.get(f"{health}/v1/users/carol/memory")).status_code == 404
        finally:
            await replica.stop()
            await worker.stop()
            await close_deps(deps)


def test_production_roles_need_a_broker(tmp_path: Path) -> None:
    from schemas.errors import ConfigError

    with pytest.raises(ConfigError, match="MEMORYOS_BROKER_URL"):
        Stack(load_settings(data_dir=tmp_path), "worker")


@pytest.mark.parametrize(
    ("role", "store"),
    [("worker", {}), ("service", {}), ("service", {"store": "qdrant"})],
)
def test_production_roles_refuse_a_store_no_other_process_can_see(
    tmp_path: Path, role: str, store: dict[str, str]
) -> None:
    """Before: `serve --broker kafka://...` on the default edge store took turns (202) that
    its own GET memory never showed, and MEMORYOS_STORE=qdrant without a URL was :memory:."""
    from schemas.errors import ConfigError

    settings = load_settings(data_dir=tmp_path, broker_url="kafka://127.0.0.1:9092", **store)
    with pytest.raises(ConfigError, match="MEMORYOS_STORE=qdrant and MEMORYOS_QDRANT_URL"):
        Stack(settings, role)  # type: ignore[arg-type]
    shared = settings.model_copy(update={"store": "qdrant", "qdrant_url": "http://qdrant:6333"})
    Stack(shared, role)  # type: ignore[arg-type]


@pytest.mark.parametrize("role", ["all", "service"])
def test_the_api_beyond_loopback_needs_a_key(tmp_path: Path, role: str) -> None:
    from schemas.errors import ConfigError

    shared = {"store": "qdrant", "qdrant_url": "http://qdrant:6333"}
    broker = {} if role == "all" else {"broker_url": "kafka://127.0.0.1:9092"} | shared
    open_to_all = load_settings(data_dir=tmp_path, host="0.0.0.0", **broker)
    with pytest.raises(ConfigError, match="MEMORYOS_API_KEYS"):
        Stack(open_to_all, role)  # type: ignore[arg-type]
    Stack(open_to_all.model_copy(update={"api_keys": "k" * 32}), role)  # type: ignore[arg-type]
    Stack(open_to_all, "worker" if role == "service" else role, serve_http=False)  # type: ignore[arg-type]
