"""`memoryos doctor [--json]`: check each configured backend live, exit 0 only if all pass."""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaProducer

from adapters.embedders import build_embedder
from adapters.llm import build_llm
from adapters.ports import Point
from adapters.settings import Settings
from adapters.stores import build_store
from schemas.errors import ConfigError
from schemas.records import ChainLink, Page
from streams.kafka_security import kafka_client_options

PROBE_USER = "memoryos-doctor"


async def check_embedder(settings: Settings) -> dict[str, Any]:
    result: dict[str, Any] = {"backend": settings.embedder, "ok": False, "dim": 0}
    try:
        embedder = build_embedder(settings)
        vector = (await embedder.embed(["memoryos doctor"]))[0]
        await embedder.close()
        result.update(ok=len(vector) == embedder.dim, dim=len(vector), detail="one text embedded")
        if not result["ok"]:
            result["detail"] = f"got {len(vector)} dimensions, expected {embedder.dim}"
    except Exception as exc:
        result["detail"] = f"{type(exc).__name__}: {exc}"
    return result


async def check_store(settings: Settings, dim: int) -> dict[str, Any]:
    result: dict[str, Any] = {"backend": settings.store, "ok": False, "detail": ""}
    try:
        store = build_store(settings)
        await store.ensure_collections(dim)
        vector = [1.0] + [0.0] * (dim - 1)
        probe = Point("00000000-0000-5000-8000-00000000d0c7", vector, {"user_id": PROBE_USER})
        await store.upsert("pages", [probe])
        hits = await store.search("pages", PROBE_USER, vector, 1)
        removed = await store.delete_user("pages", PROBE_USER)
        await store.close()
        result["ok"] = bool(hits) and hits[0].id == probe.id and removed == 1
        result["detail"] = (
            "upsert, search, delete round trip" if result["ok"] else "round trip failed"
        )
    except Exception as exc:
        result["detail"] = f"{type(exc).__name__}: {exc}"
    return result


async def check_llm(settings: Settings) -> dict[str, Any]:
    result: dict[str, Any] = {"backend": settings.llm, "ok": False, "detail": ""}
    try:
        llm = build_llm(settings)
        page = Page(
            page_id="doctor",
            user_id=PROBE_USER,
            turn_id="doctor",
            query="Hello, I am Ada.",
            response="Nice to meet you, Ada.",
            timestamp="2024-01-01T00:00:00Z",
            chain=ChainLink(chain_id="doctor"),
        )
        verdict = await llm.continuity(None, page)
        await llm.close()
        result["ok"] = bool(verdict.summary)
        result["detail"] = f"continuity call answered: {verdict.summary[:60]!r}"
    except Exception as exc:
        result["detail"] = f"{type(exc).__name__}: {exc}"
    return result


async def check_broker(url: str | None, settings: Settings) -> dict[str, Any]:
    if not url:
        return {"url": None, "ok": None, "detail": "embedded broker (started by memoryos up)"}
    try:
        # A TLS or SASL setting that cannot be loaded is this check's failure, not a crash.
        options = kafka_client_options(settings)
    except ConfigError as exc:
        return {"url": url, "ok": False, "detail": str(exc)}
    producer = AIOKafkaProducer(
        bootstrap_servers=url.removeprefix("kafka://"), request_timeout_ms=5000, **options
    )
    try:
        await asyncio.wait_for(producer.start(), 10)
        topics = await producer.client.fetch_all_metadata()
        return {"url": url, "ok": True, "detail": f"metadata: {len(topics.topics())} topics"}
    except Exception as exc:
        return {"url": url, "ok": False, "detail": f"{type(exc).__name__}: {exc}"}
    finally:
        await producer.stop()


async def diagnose(settings: Settings, broker: str | None) -> dict[str, Any]:
    embedder = await check_embedder(settings)
    if settings.store == "edge":
        # A live `memoryos up` holds the data folder; probe a scratch folder instead.
        with tempfile.TemporaryDirectory() as scratch:
            store = await check_store(
                settings.model_copy(update={"data_dir": Path(scratch)}),
                embedder["dim"] or settings.embedding_dim,
            )
    else:
        store = await check_store(settings, embedder["dim"] or settings.embedding_dim)
    llm = await check_llm(settings)
    return {
        "llm": llm,
        "embedder": embedder,
        "store": store,
        "broker": await check_broker(broker or settings.broker_url, settings),
    }


def main(args: argparse.Namespace, settings: Settings) -> int:
    report = asyncio.run(diagnose(settings, args.broker))
    healthy = all(part["ok"] is not False for part in report.values())
    if args.json:
        print(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
    else:
        for name, part in report.items():
            mark = {True: "ok  ", False: "FAIL", None: "skip"}[part["ok"]]
            backend = part.get("backend") or part.get("url")
            print(
                f"{mark} {name:<9} {backend}: {part.get('detail', '')}"
                + (f" (dim {part['dim']})" if name == "embedder" else "")
            )
    if not healthy:
        print("memoryos doctor: some checks failed", file=sys.stderr)
    return 0 if healthy else 1
